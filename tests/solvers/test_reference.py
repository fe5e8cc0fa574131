"""The extrapolation reference: exact uniform-attention solution, and ReLU event location."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from solvers import InvalidInputError, LayerWeights, PiecewiseControls, Problem, backend, solve
from solvers.exact import uniform_attention_solution
from solvers.manufactured import ManufacturedSolution
from solvers.reference import Reference


def _uniform_problem(seed: int = 3, d: int = 8, layers: int = 4) -> Problem:
    rng = np.random.default_rng(seed)

    def uniform(w):
        zero = np.zeros
        return dataclasses.replace(
            w, wk=zero(w.wk.shape), bk=zero(w.bk.shape), bv=zero(w.bv.shape), bo=zero(d),
            w2=zero(w.w2.shape), b2=zero(d),
        )  # fmt: skip

    stack = [uniform(LayerWeights.random(d, 2, 16, rng)) for _ in range(layers)]
    return Problem(rng.standard_normal((8, d)), PiecewiseControls(stack), layers, norm="none")


@pytest.mark.parametrize("precision", [backend("arb", 50), backend("mpmath", 50)], ids=repr)
def test_reference_reproduces_the_uniform_attention_solution_to_1e_30(precision):
    problem = _uniform_problem()
    got = solve(problem, "reference", steps_per_unit=4, backend=precision)
    exact = uniform_attention_solution(problem, precision)
    with precision.active():
        error = np.abs(precision.to_float64(got - exact)).max()
    assert error < 1e-30


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
    bk = backend("arb", 50)
    with bk.active():
        exact = bk.to_float64(star.state(bk, bk.asarray(1)))

    def errors(events: bool) -> np.ndarray:
        method = Reference(levels=4, events=events)
        runs = [solve(problem, method, m, bk) for m in (4, 8, 16)]
        return np.array([np.abs(bk.to_float64(u) - exact).max() for u in runs])

    with_events, without = errors(True), errors(False)
    assert np.all(np.log2(with_events[:-1] / with_events[1:]) >= 6)
    assert np.all(without > 1e3 * with_events)
