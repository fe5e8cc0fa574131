"""Taylor-mode arithmetic (solvers.backends.taylor.series, TaylorBackend) against truths it did
not produce: mpmath's Taylor coefficients by numerical differentiation at 60 digits, the
reference solver at 60 digits for the flow's solution, and central differences at 60
digits for the field's Jacobian."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from solvers import LayerWeights, PiecewiseControls, Problem, backend, solve_reference
from solvers.backends.taylor.series import Tape
from solvers.enclosure.taylor_flow import field_jacobian, solution_coefficients
from solvers.equation.flow import LayerFlow
from solvers.errors import OutOfScopeError

ORDER = 12
X0 = 0.3


def _gelu_tanh(z):
    inner = mpmath.sqrt(2 / mpmath.pi) * (z + mpmath.mpf("0.044715") * z**3)
    return z * (1 + mpmath.tanh(inner)) / 2


CASES = {  # what the backend computes of the series x = X0 + tau, and mpmath's same function
    "exp": (lambda tb, x: tb.exp(x * 2), lambda z: mpmath.exp(2 * z)),
    "sqrt": (lambda tb, x: tb.sqrt(x + 1), lambda z: mpmath.sqrt(z + 1)),
    "tanh": (lambda tb, x: tb.tanh(x * 2), lambda z: mpmath.tanh(2 * z)),
    "gelu": (lambda tb, x: tb.gelu(x * 3 - 1), lambda z: (3 * z - 1) * mpmath.ncdf(3 * z - 1)),
    "gelu-negative-tail": (
        lambda tb, x: tb.gelu(x * 20 - 12),
        lambda z: (20 * z - 12) * mpmath.ncdf(20 * z - 12),
    ),
    "gelu-tanh": (lambda tb, x: tb.gelu_tanh(x * 3 - 1), lambda z: _gelu_tanh(3 * z - 1)),
    "silu": (lambda tb, x: tb.silu(x * 2 - 1), lambda z: (2 * z - 1) / (1 + mpmath.exp(1 - 2 * z))),
    "quotient": (lambda tb, x: (x + 2) / (x * x + 1), lambda z: (z + 2) / (z * z + 1)),
    "softmax": (
        lambda tb, x: tb.softmax_(tb.matmul(x[None, :], tb.asarray([[1.0, -2.0, 0.5]]))),
        lambda z: mpmath.exp(-2 * z) / (mpmath.exp(z) + mpmath.exp(-2 * z) + mpmath.exp(z / 2)),
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_series_coefficients_match_mpmath_taylor(name):
    ours, truth = CASES[name]
    arb = backend("arb", 40)
    taylor = arb.taylor_series()
    with taylor.active():
        tape = Tape()
        x = tape.variable(arb.asarray([X0]))
        y = ours(taylor, x)
        x.coefficients.append(arb.asarray([1.0]))
        for _ in range(ORDER):
            tape.advance()
            x.coefficients.append(arb.asarray([0.0]))
    index = (0, 1) if name == "softmax" else (0,)
    with mpmath.workdps(60):
        expected = mpmath.taylor(truth, mpmath.mpf(X0), ORDER)
        for k, exact in enumerate(expected):
            ball = y.coefficients[k][index]
            middle = mpmath.mpf(ball.mid().str(50, radius=False))
            error = abs(middle - exact)
            assert error <= 1e-33 * max(1, abs(exact)), f"coefficient {k}: {error}"
            assert float(ball.rad()) <= 1e-30 * max(1, abs(exact)), f"coefficient {k} radius"


def _flow_problem(t_final: float, norm: str = "pre", **kwargs) -> Problem:
    layers = [LayerWeights.random(8, 2, 16, seed, activation="gelu", **kwargs) for seed in range(2)]
    u0 = np.random.default_rng(0).standard_normal((4, 8))
    return Problem(u0, PiecewiseControls(layers), t_final, norm=norm)


def test_the_taylor_polynomial_of_the_flow_matches_the_reference():
    """sum_{k <= 30} u_k h^k at h = 0.05 against a 60-digit reference at t = 0.05: the
    radius of convergence is about 0.3 here (|u_k|^(-1/k)), so the truncation is about
    (0.05 / 0.3)^31 = 1e-24."""
    h = 0.05
    problem = _flow_problem(h)
    arb = backend("arb", 40)
    taylor = arb.taylor_series()
    with taylor.active():
        flow = LayerFlow.from_problem(problem, taylor)
        coefficients = solution_coefficients(flow, 0, arb.asarray(0), arb.asarray(problem.u0), 30)
        total = coefficients[-1]
        for c in coefficients[-2::-1]:
            total = total * arb.asarray(h) + c
        ours = arb.to_strings(total)
    reference = solve_reference(problem, backend=backend("arb", 60))
    wide = backend("arb", 60)
    with wide.active():
        distance = np.max(np.abs(wide.to_float64(wide.asarray(ours) - reference.states[-1])))
    assert distance < 1e-22


def test_the_jacobian_matches_central_differences():
    problem = _flow_problem(1.0, norm="none")
    arb = backend("arb", 60)
    taylor = arb.taylor_series()
    with taylor.active():
        flow = LayerFlow.from_problem(problem, taylor)
        x = arb.asarray(problem.u0)
        (ours,) = arb.to_float64(field_jacobian(flow, 0, arb.asarray(0), x))
        step = arb.asarray(1e-20)
        size = x.size
        for j in range(0, size, 5):
            unit = np.zeros(size)
            unit[j] = 1.0
            e = arb.asarray(unit.reshape(x.shape))
            column = (flow.field(0, 0, x + e * step) - flow.field(0, 0, x - e * step)) / (2 * step)
            assert np.max(np.abs(arb.to_float64(column).ravel() - ours[:, j])) < 1e-30


def test_the_jacobian_of_a_batch_is_its_inputs_blocks():
    """Two inputs, one padded: each block matches central differences at 60 digits in
    which only that input's component moves, and the other input's field does not move at
    all (the entries between inputs that the blocks leave out are exactly 0)."""
    layers = [LayerWeights.random(4, 2, 8, 1, activation="silu")]
    u0 = np.random.default_rng(1).standard_normal((2, 3, 4))
    mask = np.array([[1, 1, 1], [1, 1, 0]])
    problem = Problem(u0, PiecewiseControls(layers), 1.0, norm="pre", mask=mask)
    arb = backend("arb", 60)
    taylor = arb.taylor_series()
    with taylor.active():
        flow = LayerFlow.from_problem(problem, taylor)
        x = arb.asarray(u0)
        blocks = arb.to_float64(field_jacobian(flow, 0, arb.asarray(0), x))
        assert blocks.shape == (2, 12, 12)
        step = arb.asarray(1e-20)
        for b in range(2):
            for j in range(0, 12, 5):
                unit = np.zeros(u0.shape)
                unit[b].flat[j] = 1.0
                e = arb.asarray(unit)
                moved = arb.to_float64(
                    (flow.field(0, 0, x + e * step) - flow.field(0, 0, x - e * step)) / (2 * step)
                )
                assert np.max(np.abs(moved[b].ravel() - blocks[b][:, j])) < 1e-30
                assert np.all(moved[1 - b] == 0)


@pytest.mark.parametrize(
    ("kwargs", "reason"), [({"activation": "relu"}, "ReLU"), ({"norm": "post"}, "post-LN")]
)
def test_non_smooth_or_constrained_flows_are_refused(kwargs, reason):
    activation = kwargs.get("activation", "gelu")
    layers = [LayerWeights.random(4, 2, 8, 0, activation=activation)]
    problem = Problem(
        np.ones((3, 4)) + np.eye(3, 4), PiecewiseControls(layers), 1, norm=kwargs.get("norm", "pre")
    )
    from solvers.enclosure.solver import enclose

    with pytest.raises(OutOfScopeError, match=reason):
        enclose(problem, backend("arb", 20))
