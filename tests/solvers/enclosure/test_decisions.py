"""Certified decisions (issue "certified enclosures", item 3): the readout in arb balls
contains the float64 readout, a decision is certified exactly when the leader's ball lies
above the others, and an enclosed tiny classifier's limit decisions are certified and
agree with the reference's."""

from __future__ import annotations

import flint
import numpy as np
import pytest

from solvers import LayerWeights, Model, backend, solve_reference
from solvers.enclosure import Enclosure, certified_decisions, enclose
from solvers.errors import InvalidInputError
from solvers.network.readout import Dense, Readout


def _readout(d: int = 4, classes: int = 3) -> Readout:
    rng = np.random.default_rng(7)
    return Readout(
        norm=(1 + 0.3 * rng.standard_normal(d), 0.3 * rng.standard_normal(d), 1e-5),
        pool="mean",
        dense=(
            Dense(rng.standard_normal((d, d)), rng.standard_normal(d), "tanh"),
            Dense(rng.standard_normal((d, classes)), rng.standard_normal(classes)),
        ),
    )


def _enclosure(states: np.ndarray, radius: float) -> Enclosure:
    arb = backend("arb", 30)
    with arb.active():
        balls = np.asarray(arb.asarray(states) + flint.arb(0, radius), dtype=object)
    return Enclosure([balls], [radius], 0, 0, 0, 2, 30, 1e-25, 0.0)


def test_the_ball_readout_contains_the_float64_readout():
    states = np.random.default_rng(1).standard_normal((5, 3, 4))
    readout = _readout()
    arb = backend("arb", 30)
    with arb.active():
        balls = readout(arb.asarray(states), None, arb)
        middle = arb.to_float64(balls)
    assert np.max(np.abs(middle - readout(states))) < 1e-13
    assert arb.max_radius(balls) < 1e-25


@pytest.mark.parametrize(("radius", "certified"), [(1e-20, 5), (1e3, 0)])
def test_a_decision_is_certified_exactly_when_the_leader_stays_above(radius, certified):
    states = np.random.default_rng(1).standard_normal((5, 3, 4))
    readout = _readout()
    found = certified_decisions(readout, _enclosure(states, radius))
    counts = found.against(readout.decisions(states))
    assert counts["certified"] == counts["certified same"] == certified
    assert counts["uncertain"] == 5 - certified and counts["certified changed"] == 0
    if certified:
        assert np.array_equal(found.leader, readout.decisions(states))


def test_a_certified_change_is_counted_as_one():
    states = np.random.default_rng(1).standard_normal((5, 3, 4))
    readout = _readout()
    found = certified_decisions(readout, _enclosure(states, 1e-20))
    other = readout.decisions(states).copy()
    other[0] = (other[0] + 1) % 3
    assert found.against(other)["certified changed"] == 1


def test_the_limit_of_a_tiny_classifier_is_certified():
    layer = LayerWeights.random(4, 2, 8, 3, activation="gelu", eps=1e-5)
    model = Model((layer,), "pre", readout=_readout())
    u0 = np.random.default_rng(3).standard_normal((2, 3, 4))
    problem = model.problem(u0, t_final=0.05)
    found = certified_decisions(model.readout, enclose(problem, backend("arb", 25)))
    reference = solve_reference(problem, backend=backend("arb", 40)).states[-1]
    expected = model.readout.decisions(backend("arb", 40).to_float64(reference))
    assert found.certified.all() and np.array_equal(found.leader, expected)


def test_a_readout_without_a_classifier_is_refused():
    states = np.zeros((2, 3, 4)) + np.arange(4)
    with pytest.raises(InvalidInputError, match="no classifier"):
        certified_decisions(Readout(pool="mean"), _enclosure(states, 1e-20))
