"""The extrapolation reference: exact uniform-attention solution, and ReLU event location."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from solvers import InvalidInputError, LayerWeights, PiecewiseControls, Problem, backend, solve
from solvers.equation.exact import uniform_attention_solution
from solvers.equation.manufactured import ManufacturedSolution
from solvers.methods.extrapolation import Extrapolation
from tests.exact_layers import uniform_attention_linear_ffn


def _uniform_problem(seed: int = 3, d: int = 8, layers: int = 4) -> Problem:
    rng = np.random.default_rng(seed)

    def uniform(w):
        zero = np.zeros
        return dataclasses.replace(
            w,
            wk=zero(w.wk.shape),
            bk=zero(w.bk.shape),
            bv=zero(w.bv.shape),
            bo=zero(d),
            w2=zero(w.w2.shape),
            b2=zero(d),
        )

    stack = [uniform(LayerWeights.random(d, 2, 16, rng)) for _ in range(layers)]
    return Problem(rng.standard_normal((8, d)), PiecewiseControls(stack), layers, norm="none")


@pytest.mark.parametrize("precision", [backend("arb", 50), backend("mpmath", 50)], ids=repr)
def test_reference_reproduces_the_uniform_attention_solution_to_1e_30(precision):
    problem = _uniform_problem()
    got = solve(problem, "extrapolation", steps_per_unit=4, backend=precision)
    exact = uniform_attention_solution(problem, precision)
    with precision.active():
        error = np.abs(precision.to_float64(got - exact)).max()
    assert error < 1e-30


def test_the_linear_ffn_solution_matches_scipy():
    """The closed form with a ReLU FFN in its linear region against scipy's DOP853 on
    u' = ubar M + u K + c (written out here, not tide's operators)."""
    problem = uniform_attention_linear_ffn()
    u = problem.u0
    for w in problem.controls.layers:
        m = sum(w.wv[h] @ w.wo[h] for h in range(w.heads))
        k, c = w.w1 @ w.w2, w.b1 @ w.w2 + w.b2

        def field(_t, y, m=m, k=k, c=c):
            state = y.reshape(problem.u0.shape)
            return (state.mean(axis=0) @ m + state @ k + c).ravel()

        run = solve_ivp(field, (0, 1), u.ravel(), method="DOP853", rtol=1e-13, atol=1e-13)
        u = run.y[:, -1].reshape(u.shape)
    exact = uniform_attention_solution(problem, backend("float64"))
    assert exact.shape == u.shape and np.abs(exact - u).max() <= 1e-11


def test_the_linear_ffn_solution_checks_the_linear_region():
    problem = uniform_attention_linear_ffn()
    shifted = [dataclasses.replace(w, b1=w.b1 - 60.0) for w in problem.controls.layers]
    with pytest.raises(InvalidInputError, match="layer 0: a ReLU pre-activation is not positive"):
        uniform_attention_solution(
            dataclasses.replace(problem, controls=PiecewiseControls(shifted)), backend("float64")
        )


def test_uniform_attention_solution_rejects_other_problems():
    rng = np.random.default_rng(0)
    layers = [LayerWeights.random(8, 2, 16, rng)]
    problem = Problem(rng.standard_normal((4, 8)), PiecewiseControls(layers), 1, norm="none")
    with pytest.raises(InvalidInputError, match="layer 0 is not a uniform-attention layer"):
        uniform_attention_solution(problem, backend("float64"))


def test_event_location_keeps_the_order_through_relu_kinks():
    """Pre-activations cross zero 4 times on [0, 1]; order 8 survives only with events."""
    rng = np.random.default_rng(1)
    star = ManufacturedSolution(tokens=5, d=6)
    layers = [LayerWeights.random(6, 2, 8, rng, weight_scale=0.7)]
    problem = Problem(star.initial(), PiecewiseControls(layers), 1, norm="post", manufactured=star)
    bk = backend("arb", 30)  # the error at 16 steps is near float64's rounding
    with bk.active():
        exact = star.state(bk, bk.asarray(1))

    def errors(events: bool) -> np.ndarray:
        method = Extrapolation(levels=4, events=events)
        runs = [solve(problem, method, m, bk) for m in (4, 8, 16)]
        with bk.active():
            return np.array([np.abs(bk.to_float64(u - exact)).max() for u in runs])

    with_events, without = errors(True), errors(False)
    assert np.all(np.log2(with_events[:-1] / with_events[1:]) >= 6)
    assert np.all(without > 1e3 * with_events)
