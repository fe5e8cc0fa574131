"""eps > 0 layer norms: order 1 towards the shrunken-set flow, O(eps) away from eps = 0."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from convergence.layer_norm_eps import eps_limit_study, lie_limit, with_eps
from convergence.order import OrderVerdict
from convergence.time_step import time_step_study
from solvers import (
    InvalidInputError,
    LayerWeights,
    PiecewiseControls,
    Problem,
    UndefinedOperationError,
    solve,
)
from solvers.equation.controls import SmoothControls
from tests.convergence.round_trip import round_trip

EPS = [1e-2, 1e-3, 1e-4, 1e-5]


@pytest.fixture(scope="module")
def problem():
    u0 = np.random.default_rng(0).standard_normal((5, 8))
    layers = [LayerWeights.random(8, 2, 16, seed, weight_scale=0.7) for seed in range(2)]
    # every hidden pre-activation stays positive: a smooth field, a cheap reference
    layers = [dataclasses.replace(w, b1=w.b1 + 2.5) for w in layers]
    return Problem(u0, PiecewiseControls(layers), 2.0)


@pytest.fixture(scope="module")
def study(problem):
    return eps_limit_study(problem, EPS, [16, 32, 64, 128, 256])


def test_lie_with_eps_converges_at_order_one_to_the_shrunken_set_flow(study):
    for eps, convergence in zip(study.eps, study.convergence, strict=True):
        estimate = convergence.estimate
        assert estimate.verdict == OrderVerdict.PASS, (eps, estimate)
        assert estimate.order == pytest.approx(1, abs=0.1)


def test_the_shrunken_set_flow_is_order_eps_from_the_eps_zero_flow(study):
    fit = study.distance_fit
    assert fit.verdict == OrderVerdict.PASS and fit.order == pytest.approx(1, abs=0.02)
    # the finest Lie error is below the eps = 1e-2 distance: the limit is not eps = 0
    assert study.convergence[0].max_abs[-1] < study.distance[0]
    round_trip(study)


def test_against_the_eps_zero_flow_the_lie_error_stalls_at_the_distance(problem, study):
    # a truth the study did not produce: the Lie scheme with eps = 1e-2 at a fine step,
    # compared with the eps = 0 flow, is as far from it as the shrunken-set flow is
    fine = solve(with_eps(problem, 1e-2), "lie", 1024)
    eps0 = solve(problem, "reference", 8)
    assert np.abs(fine - eps0).max() == pytest.approx(study.distance[0], rel=0.3)


def test_lie_limit_shrinks_the_gain_and_keeps_other_norms(problem):
    limit = lie_limit(with_eps(problem, 0.19))
    for layer in limit.controls.layers:
        assert layer.eps == 0 and float(layer.norm1[0]) == pytest.approx(0.9)
    pre = dataclasses.replace(problem, norm="pre")
    assert lie_limit(pre) is pre


def test_lie_limit_takes_the_radii_the_two_norms_settle_at(problem):
    """eps > 0 with norm1 != norm2: each norm sees the variance the other left, so the
    radii are those of the fixed point of LN2_eps o LN1_eps, found here by iterating the
    two maps on a row (docs/limits.md section 3), not sqrt(s_k^2 - eps) each."""
    layers = [
        dataclasses.replace(w, norm1=(1.3, 0.2), norm2=(0.5, -0.1), eps=0.09)
        for w in problem.controls.layers
    ]
    limit = lie_limit(dataclasses.replace(problem, controls=PiecewiseControls(layers)))

    def ln(v, gain, bias):
        return gain * (v - v.mean()) / np.sqrt(v.var() + 0.09) + bias

    v = np.random.default_rng(0).standard_normal(8)
    for _ in range(200):
        after_norm1 = ln(v, 1.3, 0.2)
        v = ln(after_norm1, 0.5, -0.1)
    for layer in limit.controls.layers:
        assert float(layer.norm1[0]) == pytest.approx(after_norm1.std(), rel=1e-12)
        assert float(layer.norm2[0]) == pytest.approx(v.std(), rel=1e-12)
        assert float(layer.norm2[0]) != pytest.approx(np.sqrt(0.5**2 - 0.09), rel=1e-3)
        assert (float(layer.norm1[1]), float(layer.norm2[1]), layer.eps) == (0.2, -0.1, 0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            dict(norm1=(np.linspace(0.5, 1.5, 8), 0.0), norm2=(np.linspace(0.5, 1.5, 8), 0.0)),
            "per-feature gain or bias",
        ),
        (dict(norm1=(-1.0, 0.0), norm2=(-1.0, 0.0)), "gain -1.0 <= 0"),
        (dict(norm2=(0.5, 0.0), eps=0.5), "with eps = 0.5 the set .* is empty"),
        (dict(eps=1.0), "with eps = 1.0 the set .* is empty"),
    ],
    ids=["per-feature", "negative-gain", "second-set-empty", "empty-set"],
)
def test_configurations_without_this_limit_are_refused(problem, change, message):
    layers = [dataclasses.replace(w, **change) for w in problem.controls.layers]
    with pytest.raises(UndefinedOperationError, match=message):
        lie_limit(dataclasses.replace(problem, controls=PiecewiseControls(layers)))


def test_bad_input(problem):
    smooth = dataclasses.replace(
        problem, controls=SmoothControls(problem.controls.layers, [0.0, 2.0], 2)
    )
    with pytest.raises(InvalidInputError, match="PiecewiseControls"):
        lie_limit(smooth)
    with pytest.raises(InvalidInputError, match="at least 3 positive numbers"):
        eps_limit_study(problem, [1e-2, 0.0, 1e-3], [8, 16, 32])
    with pytest.raises(InvalidInputError, match="post-LN"):
        eps_limit_study(dataclasses.replace(problem, norm="pre"), EPS, [8, 16, 32])


def test_lie_with_eps_and_two_norms_converges_at_order_one_to_lie_limit(problem):
    """eps > 0 with norm1 != norm2: the refined Transformer tends, at order 1, to the flow
    on the shrunken S2 with the FFN on the shrunken S1 copy (docs/limits.md sections 2, 3)."""
    layers = [
        dataclasses.replace(w, norm1=(1.3, 0.2), norm2=(0.8, -0.1), eps=1e-2)
        for w in problem.controls.layers
    ]
    studied = dataclasses.replace(problem, controls=PiecewiseControls(layers))
    study = time_step_study(
        studied,
        ["lie"],
        [16, 32, 64, 128, 256],
        limit=lie_limit(studied),
        expected={"lie": 1.0},
        reference_steps=8,
    )
    estimate = study.methods[0].estimate
    assert estimate.verdict == OrderVerdict.PASS and estimate.order == pytest.approx(1, abs=0.1)
