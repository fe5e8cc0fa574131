"""The Llama flow u_t = A(R1 u) + F(R2 u) (docs/model.md section 7) against a solution the
suite did not produce: scipy's DOP853 at rtol 1e-13 on the field of
tests/decoder_reference.py (numpy, written apart from the suite), layer by layer. The
orders are docs/orders.md section 5's for smooth pre-norm flows; at 30 digits the arb
reference's estimate bounds its distance from a 50-digit mpmath reference.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from solvers import backend, load_model, solve, solve_reference
from solvers.solving import METHODS
from tests.solvers.io.test_decoders import decoder, reference_of

IDS = np.array([[3, 17, 5, 29]])
REFERENCE = 1e-9
"""The float64 reference's distance from DOP853, relative to max(1, |u|) (the issue's)."""
ORDERS = {
    "lie": ((16, 32, 64, 128), 0.1),
    "strang-rk2": ((4, 8, 16, 32), 0.1),
    "projected-rk4": ((2, 4, 8, 16), 0.2),
}
"""Steps per unit and the allowance on the last two halvings around the method's order
(SteppingMethod.order on the pre-norm decoder)."""


@pytest.fixture(scope="module")
def llama():
    """A perturbed 2-layer Llama (d 8, 4 heads, 2 key-value heads, FFN 12, rope theta
    1e4, eps 1e-6) on 4 tokens: its Problem and the DOP853 state at t = 2."""
    module = decoder("llama", seed=8, hidden_size=8, intermediate_size=12)
    model = load_model(module)
    u0 = model.embed(IDS)
    field, positions = reference_of(module).field, np.arange(IDS.shape[1], dtype=float)
    state = u0.copy()
    for layer in range(len(model.layers)):
        solution = solve_ivp(
            lambda t, y, n=layer: field(n, y.reshape(u0.shape), positions).ravel(),
            (layer, layer + 1),
            state.ravel(),
            method="DOP853",
            rtol=1e-13,
            atol=1e-15,
        )
        assert solution.success, solution.message
        state = solution.y[:, -1].reshape(u0.shape)
    return model.problem(u0), state


def test_the_float64_reference_is_dop853(llama):
    problem, exact = llama
    result = solve_reference(problem)
    assert np.abs(result.states[-1] - exact).max() / max(1.0, np.abs(exact).max()) <= REFERENCE


@pytest.mark.parametrize("method", list(ORDERS))
def test_the_refined_decoder_converges_at_its_order(llama, method):
    problem, exact = llama
    steps, allowance = ORDERS[method]
    order = METHODS[method].order(problem.norm)
    errors = np.array([np.abs(solve(problem, method, m) - exact).max() for m in steps])
    observed = np.log2(errors[:-1] / errors[1:])
    assert np.all(np.abs(observed[-2:] - order) <= allowance), observed


def test_the_arb_reference_bounds_its_distance_from_mpmath_50_digits(llama):
    """arb at 30 digits, default tolerance: at t = 1 and 2 the returned state lies within
    its own error estimate of mpmath's 50-digit reference (tolerance 1e-36, itself within
    its estimate; the rotary tables, silu and RMSNorm in each system's arithmetic)."""
    problem, _ = llama
    balls = solve_reference(problem, backend=backend("arb", 30))
    points = solve_reference(problem, tol=1e-36, backend=backend("mpmath", 50))
    with mpmath.workdps(60):
        for n in (1, 2):
            distance = max(
                abs(mpmath.mpf(x.mid().str(50, radius=False)) - y)
                for x, y in zip(balls.states[n].ravel(), points.states[n].ravel(), strict=True)
            )
            assert 0 < balls.error[n] and distance <= balls.error[n] + points.error[n], n
