"""solve_reference, the error-controlled reference, against truths it did not produce: a
manufactured solution, and scipy's Radau on a stiff field; and no silent garbage from the
fixed-step extrapolation (docs/schemes.md sections 3 and 7)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from solvers import (
    LayerWeights,
    PiecewiseControls,
    Problem,
    backend,
    solve,
    solve_reference,
)
from solvers.errors import IntegrationError
from solvers.operators import attention, feed_forward
from tests.exact_layers import manufactured_post_ln

STIFFNESS = 80.0
SHIFT = 100.0  # keeps U + SHIFT > 0: the ReLU never switches and the FFN is linear


@pytest.fixture(scope="module")
def manufactured():
    return manufactured_post_ln()


@pytest.mark.parametrize("precision", [("float64",), ("mpmath", 30)])
def test_the_reference_meets_its_tolerance_and_knows_its_error(manufactured, precision):
    bk = backend(*precision)
    result = solve_reference(manufactured, backend=bk)
    star = manufactured.manufactured
    for n in range(3):
        with bk.active():
            exact = star.state(bk, bk.asarray(n))
            error = float(np.abs(bk.to_float64(bk.asarray(result.states[n]) - exact)).max())
        assert error <= result.error[n] + 1e-300  # the estimate is an upper one
        assert result.error[n] <= 1e4 * bk.unit_roundoff  # and near the working precision
    assert result.accepted > 0 and result.evaluations > 0 and result.events == []


def _damped_layer(seed: int) -> LayerWeights:
    """Random attention and the linear FFN F(U) = -U K, K with eigenvalues 1 .. 80,
    written as relu(U + SHIFT) (-K) + SHIFT K (the ReLU never switches)."""
    rng = np.random.default_rng(seed)
    layer = LayerWeights.random(4, 2, 4, rng)
    q, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    damping = q @ np.diag(np.linspace(1.0, STIFFNESS, 4)) @ q.T
    return dataclasses.replace(
        layer, w1=np.eye(4), b1=np.full(4, SHIFT), w2=-damping, b2=SHIFT * damping.sum(0)
    )


@pytest.fixture(scope="module")
def stiff():
    layers = [_damped_layer(seed) for seed in range(2)]
    u0 = np.random.default_rng(9).standard_normal((3, 4))
    return Problem(u0, PiecewiseControls(layers), 2, norm="none")


def _radau(problem: Problem) -> np.ndarray:
    """scipy's Radau (implicit, made for stiff fields) on u_t = A(u) + F(u) layer by layer;
    the operators are tide's (checked against torch elsewhere), the integrator is not."""
    bk = backend("float64")
    u = problem.u0
    for n in range(2):
        layer = problem.controls.layers[n].on(bk)

        def field(_t, y, layer=layer):
            state = y.reshape(problem.u0.shape)
            return (attention(bk, state, layer) + feed_forward(bk, state, layer)).ravel()

        run = solve_ivp(field, (0, 1), u.ravel(), method="Radau", rtol=1e-12, atol=1e-14)
        assert run.success
        u = run.y[:, -1].reshape(problem.u0.shape)
    return u


def test_a_stiff_field_is_solved_not_garbled(stiff):
    """The fixed-step extrapolation at 1 step per unit is unstable there and says so; the
    error-controlled reference shrinks its steps and agrees with Radau."""
    with pytest.raises(IntegrationError, match=r"layer 0, t = 0.*exceeds the state's size"):
        solve(stiff, "reference-no-events", 1)
    result = solve_reference(stiff)
    assert np.abs(result.states[-1] - _radau(stiff)).max() <= 1e-9
    assert result.rejected >= 1  # the first step of length 1 was refused


def test_the_budget_is_bounded_and_named(stiff):
    with pytest.raises(IntegrationError, match=r"layer 0, t = .*budget of 5 steps"):
        solve_reference(stiff, max_steps=5)


def test_relu_kinks_are_events_of_accepted_steps():
    layer = LayerWeights.random(3, 1, 6, rng=8, bias_scale=0.3)
    problem = Problem(
        np.random.default_rng(2).standard_normal((2, 3)), PiecewiseControls([layer]), 1,
        norm="pre",
    )  # fmt: skip
    result = solve_reference(problem)
    high = backend("mpmath", 30)
    truth = high.to_float64(solve(problem, "reference", 4, high))
    assert result.events, "pre-activations cross zero: the kinks were located"
    times = [event.time for event in result.events]
    assert times == sorted(times) and all(0 < t <= 1 for t in times)
    assert np.abs(result.states[-1] - truth).max() <= result.error[-1] <= 1e-11
