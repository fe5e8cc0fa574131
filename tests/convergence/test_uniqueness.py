"""Uniqueness of the limit: methods and precisions converge together (convergence.uniqueness).

Truths the module did not produce: the exact uniform-attention solution as the common
limit of every method, and a splitting that drops the FFN (another flow) as a negative
control.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

from convergence.order import OrderVerdict, estimate_order
from convergence.uniqueness import SAME_LIMIT_VERDICTS, LimitVerdict, uniqueness_study
from solvers import InvalidInputError, LayerWeights, PiecewiseControls, Problem, backend
from solvers.equation.exact import uniform_attention_solution
from solvers.equation.norms import project_to_s1
from solvers.integrators.tableaux import EULER
from solvers.methods.splitting import Splitting
from solvers.methods.terms import AMBIENT, ATTENTION, SubStep
from solvers.solving import solve
from tests.convergence.round_trip import round_trip
from tests.exact_layers import uniform_attention_layer

FLOAT64 = backend("float64")
UNIT = FLOAT64.unit_roundoff
SMALL = Problem(
    np.random.default_rng(5).standard_normal((3, 4)),
    PiecewiseControls([LayerWeights.random(4, 1, 4, 5, weight_scale=0.3)]),
    1.0,
)


@pytest.fixture(scope="module")
def smooth_post_problem():
    """Two post-LN layers with every hidden pre-activation positive (no ReLU kinks), u0 on S1."""
    rng = np.random.default_rng(0)
    u0 = project_to_s1(FLOAT64, rng.standard_normal((3, 4)), 0.0, 1.0)
    layers = [LayerWeights.random(4, 1, 8, seed, weight_scale=0.7) for seed in range(2)]
    layers = [dataclasses.replace(w, b1=w.b1 + 2.5) for w in layers]
    return Problem(u0, PiecewiseControls(layers), 2.0, norm="post")


@pytest.fixture(scope="module")
def uniqueness(smooth_post_problem):
    return uniqueness_study(smooth_post_problem)


def test_methods_and_precisions_converge_to_the_same_limit(uniqueness):
    assert uniqueness.verdict == LimitVerdict.SAME
    assert len(uniqueness.runs) == 6 and len(uniqueness.pairs) == 15
    for pair in uniqueness.pairs:
        assert pair.verdict == LimitVerdict.SAME, pair.reason
        if pair.estimate is None:  # one method in two precisions: rounding only
            assert all(np.less_equal(pair.differences, pair.allowance))
            assert max(pair.differences) <= 1e3 * UNIT
            continue
        assert pair.estimate.verdict == OrderVerdict.PASS
        assert pair.estimate.order == pytest.approx(pair.expected_order, abs=0.1)
        # the differences shrink: the finest is below the coarsest by the expected factor
        ratio = pair.differences[0] / pair.differences[-1]
        assert ratio >= 0.5 * 16**pair.expected_order
    round_trip(uniqueness)


def test_the_expected_rate_is_the_lower_of_the_two_orders(uniqueness):
    lie_rk4 = uniqueness.pair(
        "lie@backend('float64')", "projected-rk4@backend('mpmath', digits=30)"
    )
    strang_rk4 = uniqueness.pair(
        "strang-rk2@backend('float64')", "projected-rk4@backend('float64')"
    )
    assert lie_rk4.expected_order == 1 and strang_rk4.expected_order == 2
    assert strang_rk4.differences[-1] < 0.1 * lie_rk4.differences[-1]


def test_every_method_converges_to_the_exact_uniform_attention_solution(rng):
    """The common limit is the exact solution: the pair differences are within the sum of
    the two runs' errors against it (triangle inequality), and those errors fall at the
    methods' orders."""
    layers = [
        uniform_attention_layer(3, (0.5, 0.2), rng),
        uniform_attention_layer(3, (0.8,), rng),
    ]
    problem = Problem(rng.standard_normal((4, 3)), PiecewiseControls(layers), 2.0, norm="none")
    levels = (4, 8, 16, 32, 64)
    study = uniqueness_study(problem, precisions=["float64"], steps_per_unit=levels)
    assert study.verdict == LimitVerdict.SAME
    exact = uniform_attention_solution(problem, FLOAT64)
    errors = {
        label: [
            float(np.max(np.abs(solve(problem, label.split("@")[0], m) - exact))) for m in levels
        ]
        for label in study.runs
    }
    for label, order in study.orders.items():
        fit = estimate_order([1 / m for m in levels], errors[label], expected=order)
        assert fit.verdict == OrderVerdict.PASS, (label, fit)
    for pair in study.pairs:
        bounds = np.add(errors[pair.first], errors[pair.second])
        assert np.all(np.array(pair.differences) <= bounds * (1 + 1e-9) + 1e-13)


def test_a_method_with_another_limit_is_flagged(smooth_post_problem):
    """Negative control: a splitting that drops the FFN converges to a different flow."""
    attention_only = Splitting(
        "attention-only", 1, (SubStep(ATTENTION, Fraction(1), True),), EULER, AMBIENT
    )
    study = uniqueness_study(
        smooth_post_problem,
        methods=["projected-rk4", attention_only],
        precisions=["float64"],
        steps_per_unit=(4, 8, 16, 32),
    )
    (pair,) = study.pairs
    assert study.verdict == LimitVerdict.DIFFERENT and pair.verdict == LimitVerdict.DIFFERENT
    assert pair.estimate.verdict not in SAME_LIMIT_VERDICTS
    assert min(pair.differences) > 1e-2  # the two limits differ by an O(1) amount


def test_bad_uniqueness_input_is_named():
    with pytest.raises(InvalidInputError, match="methods must name at least one"):
        uniqueness_study(SMALL, methods=())
    with pytest.raises(InvalidInputError, match="precisions must name at least one"):
        uniqueness_study(SMALL, precisions=())
    with pytest.raises(InvalidInputError, match="at least 3 distinct step counts"):
        uniqueness_study(SMALL, steps_per_unit=(4, 8, 8))
    with pytest.raises(InvalidInputError, match="steps_per_unit entry must be a positive integer"):
        uniqueness_study(SMALL, steps_per_unit=(0, 4, 8))
    with pytest.raises(InvalidInputError, match="at least two runs"):
        uniqueness_study(SMALL, methods=["lie"], precisions=["float64"])
