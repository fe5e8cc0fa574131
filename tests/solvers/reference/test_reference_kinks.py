"""The reference's ReLU kinks, found on the dense output of its steps, against solutions that
do not locate kinks at all: scipy's DOP853 on the ReLU field itself, which crosses them by
step-size control (docs/schemes.md section 8)."""

from __future__ import annotations

import dataclasses
import functools

import mpmath
import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from solvers import LayerWeights, PiecewiseControls, Problem, backend, solve_reference
from solvers.equation.flow import LayerFlow
from solvers.methods.kinks import Margins
from tests.scipy_truth import dop853_final_state, dop853_layer


def _relu_problem(seed: int, d: int, heads: int, d_ff: int, tokens: int, **options) -> Problem:
    rng = np.random.default_rng(seed)
    layers = [
        LayerWeights.random(d, heads, d_ff, rng, activation="relu", **options) for _ in range(2)
    ]
    return Problem(rng.standard_normal((tokens, d)), PiecewiseControls(layers), 2, norm="pre")


def test_a_unit_that_switches_on_and_off_inside_a_step_is_located():
    """Unit (token 0, hidden 2) of layer 1 switches on at t = 1.3095 and off at 1.4161,
    inside one step of the float64 reference. The search by trial steps looked at the
    step's end only and missed the pair: off by 2.4e-5 with an estimate of 2e-12. arb at
    30 digits (with guard digits) is the truth here, checked against DOP853."""
    problem = _relu_problem(11, 4, 2, 8, 3, bias_scale=0.5)
    result = solve_reference(problem)
    pair = [e.time for e in result.events if e.layer == 1 and e.unit == (0, 2)]
    assert len(pair) == 2 and abs(pair[0] - 1.309486) < 1e-6 and abs(pair[1] - 1.416134) < 1e-6
    high = solve_reference(problem, backend=backend("arb", 30))
    with mpmath.workdps(40):
        truth = np.array(
            [float(mpmath.mpf(x.mid().str(40, radius=False))) for x in high.states[-1].ravel()]
        )
    truth = truth.reshape(problem.u0.shape)
    assert np.abs(dop853_final_state(problem, 2.3e-14) - truth).max() <= 1e-12
    assert np.abs(result.states[-1] - truth).max() <= result.error[-1] <= 1e-11
    assert high.error[-1] <= 1e-29


def test_kinks_are_located_at_a_few_evaluations_each():
    """Two pre-LN ReLU layers (d 16, d_ff 64, 8 tokens) at tol 1e-8: hundreds of kinks, a
    few dozen field evaluations each (a trial-step search paid about 480), and the
    result within its estimate of DOP853 at rtol 1e-13."""
    problem = _relu_problem(1, 16, 4, 64, 8)
    result = solve_reference(problem, tol=1e-8)
    assert len(result.events) > 200
    assert result.evaluations / len(result.events) <= 60
    distance = np.abs(dop853_final_state(problem, 1e-13) - result.states[-1]).max()
    assert distance <= result.error[-1]


def _touching(problem: Problem, unit: int, height: float) -> Problem:
    """The one-layer problem with b1[unit] shifted so that the unit's largest pre-activation
    over the tokens and [0, 1], on DOP853's dense solution, is `height`."""
    flow = LayerFlow.from_problem(problem, backend("float64"))
    run = dop853_layer(flow, 0, problem.u0, 1e-13, dense=True)

    def z(t):
        state = run.sol(t).reshape(problem.u0.shape)
        return np.max(np.asarray(flow.preactivations(0, np.float64(t), state))[..., unit])

    grid = np.linspace(0, 1, 2001)
    top = int(np.argmax([z(t) for t in grid]))
    peak = minimize_scalar(
        lambda t: -z(t), bounds=grid[[top - 1, top + 1]], method="bounded", options={"xatol": 1e-12}
    )
    assert 0.6 < peak.x < 0.8, "the unit's touch is inside the layer"
    b1 = np.array(problem.controls.all_layers()[0].b1)
    b1[unit] += height + peak.fun
    return _with_layer(problem, b1=b1)


def _with_layer(problem: Problem, **weights) -> Problem:
    """The one-layer problem with its layer's `weights` replaced."""
    layer = dataclasses.replace(problem.controls.all_layers()[0], **weights)
    return dataclasses.replace(problem, controls=PiecewiseControls([layer]))


@functools.cache
def _touch_and_truth() -> tuple[Problem, np.ndarray]:
    """The touching problem to t = 0.76 and its truth: the same layer with the unit's row of
    W2 zero, which is the same flow while the unit stays off (checked against DOP853)."""
    rng = np.random.default_rng(1)
    layer = LayerWeights.random(4, 2, 16, rng, activation="relu", bias_scale=0.5)
    whole = Problem(rng.standard_normal((3, 4)), PiecewiseControls([layer]), 1, norm="pre")
    touching = _touching(whole, 5, -1e-12)
    w2 = np.array(touching.controls.all_layers()[0].w2)
    w2[5] = 0
    silenced = _with_layer(touching, w2=w2)
    dop853 = dop853_final_state(silenced, 1e-13)
    assert np.abs(solve_reference(silenced, tol=1e-13).states[-1] - dop853).max() <= 1e-10
    truth = solve_reference(dataclasses.replace(silenced, t_final=0.76), tol=1e-13)
    assert truth.error[-1] <= 1e-12
    return dataclasses.replace(touching, t_final=0.76), truth.states[-1]


@pytest.mark.parametrize("tol", [1e-10, 1e-12])
def test_a_unit_that_touches_zero_without_crossing_is_not_held_across(tol):
    """Hidden unit 5 is off for every token over the layer; its largest pre-activation is
    raised to -1e-12 at t = 0.7057. The dense output, accurate to its tolerance, dips
    across zero there and the unit is switched on; on the solution it never turns on, so
    the next step starts with it off its side and switches it back. Held on instead (as it
    once was: nothing watched a unit that started a step off its side), the state at
    t = 0.76 was off by 1.3e-5 with an estimate of 2e-10."""
    touching, truth = _touch_and_truth()
    result = solve_reference(touching, tol=tol)
    assert np.abs(result.states[-1] - truth).max() <= result.error[-1] <= 100 * tol


def test_a_clear_step_is_kept_only_if_no_unit_can_have_reached_zero():
    """Distances 1 and 2 at the start, rates -1 and 0: a step of 0.2 is clear (4 x 0.2 < 1)
    and 0.3 is not. Ending at 0.8 (the linear prediction) keeps it; ending off the side
    does not; nor does a start at rate -5 that ends at 0.9 after a step of 1, whose
    quadratic dips below zero inside."""
    margins = Margins(np.array([1.0, 2.0]), np.array([-1.0, 0.0]))
    assert margins.clear(0.2) and not margins.clear(0.3)
    assert margins.kept(np.array([0.8, 2.0]), 0.2)
    assert not margins.kept(np.array([-0.1, 2.0]), 0.2)  # off its side at the end
    # rate -5 over 1: the quadratic 1 - 5 theta + 4.9 theta^2 dips to -0.28 inside
    assert not Margins(np.array([1.0, 2.0]), np.array([-5.0, 0.0])).kept(np.array([0.9, 2.0]), 1.0)
