"""The parts of a network study a paper prints (docs/networks.md section 7), each against a
truth the code did not produce: a finite-difference Jacobian for the readout's score
bound, a hand-made near tie for the margins, the closed-form Wilson interval, a network
whose layers the Lie step solves exactly for the layer shares, float64 itself for the
rounded networks, and a made-up sequence of distances for the refinement."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from convergence.network_limit import ASYMPTOTIC, FIT_LEVELS, network_limit
from convergence.network_limit.batch import share, spread
from convergence.network_limit.decisions import classes
from convergence.network_limit.levels import Level, method_levels, refine
from solvers import LayerWeights, backend, solve
from solvers.network.model import Model
from solvers.network.readout import Dense, Readout

FINAL_NORMS = {
    None: lambda gain, bias: None,
    "layer": lambda gain, bias: (gain, bias, 1e-5),
    "rms": lambda gain, bias: (gain, np.zeros_like(bias), 1e-6),
    "dyt": lambda gain, bias: (gain, bias, 0.7, 0.0),
}
"""A readout's final norm of each kind from a drawn gain and bias: its parameters, then eps."""


def _readout(rng, d, norm_kind, pool, activation):
    gain, bias = rng.uniform(0.5, 2, d), rng.standard_normal(d)
    norm = FINAL_NORMS[norm_kind](gain, bias)
    dense = [Dense(rng.standard_normal((d, 5)), rng.standard_normal(5), activation)]
    if pool is not None:
        dense.append(Dense(rng.standard_normal((5, 3)), rng.standard_normal(3)))
    return Readout(norm, pool, tuple(dense), norm_kind or "layer")


@pytest.mark.parametrize("norm_kind", FINAL_NORMS)
@pytest.mark.parametrize("pool, activation", [("first", "tanh"), ("mean", "relu"), (None, "none")])
def test_the_score_bound_holds_over_the_jacobian(rng, norm_kind, pool, activation):
    """sensitivity(U)_v >= sum_i |d s_v / d U_i| (central differences); it is that sum
    exactly for a linear head without a norm, and otherwise loose by the triangle inequality
    between the norm's two terms and through the dense layers' absolute products: a median
    factor of 1.3 to 2.6 on these seeds, so the test allows 3."""
    d, tokens = 6, 4
    readout = _readout(rng, d, norm_kind, pool, activation)
    states = rng.standard_normal((1, tokens, d))
    bound = readout.sensitivity(states)
    h = 1e-6
    jacobian = []
    for i in range(states.size):
        step = np.zeros(states.size)
        step[i] = h
        step = step.reshape(states.shape)
        up = readout(states + step).reshape(-1, bound.shape[-1])
        down = readout(states - step).reshape(-1, bound.shape[-1])
        jacobian.append((up - down) / (2 * h))
    true = np.abs(np.array(jacobian)).sum(axis=0)  # (decisions, classes)
    assert bound.shape == true.shape
    assert np.all(bound >= true * (1 - 1e-6)), (bound, true)
    if norm_kind in (None, "dyt") and pool is None:  # a diagonal Jacobian: the exact sum
        assert bound == pytest.approx(true, rel=1e-6)
    assert np.median(bound / np.maximum(true, 1e-300)) <= 3


def test_a_near_tie_is_uncertain_only_within_the_error(rng):
    """Two classes 1e-3 apart in score: an error that can move each score by more than half
    of that makes the decision uncertain, a smaller one does not."""
    readout = Readout(None, "first", (Dense(np.eye(2), np.zeros(2)),))
    states = np.array([[[1.0, 1.0 - 1e-3]], [[1.0, 0.0]]])
    margins = readout.margins(states, None, 0.0)
    assert margins.gap == pytest.approx([1e-3, 1.0])
    assert not margins.uncertain.any()
    assert readout.margins(states, None, 6e-4).uncertain.tolist() == [True, False]
    assert readout.margins(states, None, 4e-4).uncertain.tolist() == [False, False]


def test_the_wilson_interval_is_the_closed_form():
    """(k + z^2/2 +- z sqrt(k (n - k) / n + z^2 / 4)) / (n + z^2), z the 97.5% quantile."""
    z = 1.959963984540054
    for k, n in ((38, 64), (0, 64), (64, 64), (3, 10)):
        root = z * math.sqrt(k * (n - k) / n + z * z / 4)
        low, high = ((k + z * z / 2 + s * root) / (n + z * z) for s in (-1, 1))
        found = share(k, n)
        assert (found.count, found.of) == (k, n)
        assert found.low == pytest.approx(low, abs=1e-12)
        assert found.high == pytest.approx(high, abs=1e-12)


def test_spread_and_classes():
    found = spread(np.array([3.0, 1.0, 2.0, 10.0]))
    assert (found.median, found.low, found.high) == (2.5, 1.0, 10.0)
    histogram = classes(np.array([2, 2, 5, 2, 0, 5, *range(10, 20)]))
    assert histogram.top[:3] == [(2, 3), (5, 2), (0, 1)] and len(histogram.top) == 10
    assert histogram.others == 16 - 3 - 2 - 8 and histogram.leader_share == 3 / 16


def _exact_layer(rng, d):
    """A layer whose field is the constant bo + b2 (every map zero): one Lie step of size 1
    is its flow over the unit, exactly."""
    layer = dataclasses.replace(LayerWeights.random(d, 2, 12, rng), activation="gelu")
    zero = {name: np.zeros_like(getattr(layer, name)) for name in layer.map_names}
    zero |= {"bo": rng.standard_normal(d), "b2": rng.standard_normal(d)}
    return dataclasses.replace(layer, **zero)


def test_the_layer_that_the_lie_step_does_not_solve_drives_the_distance(rng):
    """Layers 0 and 2 have constant fields, which Lie solves exactly; layer 1 does not. Its
    defect carries the whole distance (share 1) and theirs nothing (share 0)."""
    d = 6
    middle = dataclasses.replace(LayerWeights.random(d, 2, 12, rng), activation="gelu")
    layers = (_exact_layer(rng, d), middle, _exact_layer(rng, d))
    readout = Readout(None, "mean", (Dense(rng.standard_normal((d, 3)), np.zeros(3)),))
    model = Model(layers, "pre", readout=readout)
    result = network_limit(model, rng.standard_normal((3, 5, d)), steps_per_unit=[1, 2, 4, 8])
    first, second, third = result.layers
    tiny = 1e-6 * second.contribution
    assert first.defect < tiny and third.defect < tiny
    assert first.share < 1e-6 and third.share < 1e-6
    assert second.share == pytest.approx(1, abs=1e-6)
    assert second.defect > 1e-4
    assert result.network_spread.high == pytest.approx(result.network_distance, rel=1e-15)


def test_rounded_networks_measure_their_distance_from_float64(rng):
    """float64 against itself is distance 0 and changes nothing; float32's distance is a few
    of its unit roundoffs per layer, bfloat16's larger."""
    layers = tuple(
        dataclasses.replace(LayerWeights.random(6, 2, 12, rng), activation="gelu") for _ in range(2)
    )
    readout = Readout(None, "mean", (Dense(rng.standard_normal((6, 4)), np.zeros(4)),))
    model = Model(layers, "pre", readout=readout)
    inputs = rng.standard_normal((8, 5, 6))
    names = ("float64", "float32", "bfloat16")
    result = network_limit(
        model, inputs, steps_per_unit=[1, 2, 4, 8], precisions=[backend(n) for n in names]
    )
    same, single, brain = result.rounding
    assert same.relative_distance == 0 and same.decisions_changed.count == 0
    assert same.within_reach == 0
    assert 0 < single.relative_distance < 1e3 * single.unit_roundoff
    assert single.relative_distance < brain.relative_distance < 1e3 * brain.unit_roundoff
    network = solve(model.problem(inputs))
    rounded = np.asarray(solve(model.problem(inputs), backend="bfloat16"), dtype=np.float64)
    moved = np.sum(readout.decisions(rounded) != readout.decisions(network))
    assert brain.decisions_changed.count == moved
    assert brain.relative_distance == np.abs(rounded - network).max() / np.abs(network).max()


def test_a_plateau_is_refined_into_the_asymptotic_range():
    """Distances that sit near 0.9 up to 64 steps per unit and then fall at order 1: with a
    budget the levels double until FIT_LEVELS lie within ASYMPTOTIC; the sequence's rise is
    named, and so is the start of its asymptotic range."""

    def distance(m: int) -> float:
        return 0.9 if m <= 16 else (0.95 if m == 32 else 6.4 / m)

    def measure(m: int) -> Level:
        return Level(distance(m), None, None, None, None, None)

    asked = [1, 2, 4, 8]
    steps, measured, added = refine(asked, measure, None)
    assert steps == asked and added == 0
    steps, measured, added = refine(asked, measure, 4096)
    near = [m for m in steps if distance(m) <= ASYMPTOTIC]
    assert len(near) == FIT_LEVELS and steps[-1] == near[-1] == 256 and added == 5
    levels = method_levels("lie", steps, measured, added, expected=1.0, floor=1e-12)
    assert levels.rises == [32] and levels.asymptotic_from == 64 and levels.refined == 5
    assert levels.order.order == pytest.approx(1) and levels.steps_per_unit == steps
    _, _, capped = refine(asked, measure, 100)
    assert capped == 3  # 16, 32, 64: the next doubling would pass the budget
