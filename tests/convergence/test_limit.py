"""limit_check: per-feature LN gain and bias make the refined Lie scheme degenerate."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from convergence.limit import (
    COLLAPSE,
    _Level,
    _verdict,
    distinct_tokens,
    limit_check,
    token_spread,
)
from convergence.order import OrderVerdict
from solvers import InvalidInputError, LayerWeights, PiecewiseControls, Problem
from tests.convergence.round_trip import round_trip


def _problem(affine: bool) -> Problem:
    u0 = np.random.default_rng(0).standard_normal((5, 8))
    layers = [LayerWeights.random(8, 2, 16, seed, affine=affine) for seed in range(2)]
    return Problem(u0, PiecewiseControls(layers), 2.0)


def test_per_feature_gain_and_bias_have_no_limit_the_tokens_collapse():
    check = limit_check(_problem(affine=True), [2**k for k in range(11)])
    assert check.verdict == OrderVerdict.NO_LIMIT and check.reason.startswith("degenerate")
    # the spread falls by orders of magnitude under refinement, to rounding
    assert max(check.spread) > 0.3 and check.spread[-1] < 1e-12
    # the refined states approach a fixed point of the two LN maps, P2(P1(u)) = u
    assert check.fixed_point_defect[-1] < 0.01 * check.fixed_point_defect[0]
    round_trip(check)


def test_scalar_norms_give_a_cauchy_sequence_of_order_one():
    check = limit_check(_problem(affine=False), [2**k for k in range(3, 10)])
    assert check.verdict == OrderVerdict.PASS and check.reason.startswith("Cauchy")
    assert check.estimate.order == pytest.approx(1, abs=0.1)
    assert min(check.spread) > 0.1


def test_before_the_collapse_the_levels_cannot_tell():
    """At coarse steps the tokens have not collapsed yet and successive refinements land
    O(1) apart (docs/limits.md section 4): that is no evidence against a limit, and the
    check says the levels cannot tell (docs/limits.md section 7), not "not Cauchy"."""
    check = limit_check(_problem(affine=True), [1, 2, 4, 8])
    assert check.verdict == OrderVerdict.UNDECIDED and min(check.cauchy_differences) > 1
    assert check.reason.startswith("undecided at these levels") and "not Cauchy" not in check.reason
    assert "finer levels would decide" in check.reason and check.refined == []


def test_with_a_budget_the_check_refines_until_it_can_tell():
    """The same levels with max_steps_per_unit: the check doubles the finest level until the
    collapse shows, and says that it did; a budget too small says so too."""
    check = limit_check(_problem(affine=True), [1, 2, 4, 8], max_steps_per_unit=1024)
    assert check.verdict == OrderVerdict.NO_LIMIT and check.reason.startswith("degenerate")
    assert check.refined and check.steps_per_unit == [1, 2, 4, 8, *check.refined]
    assert f"refined on its own from 8 to {check.refined[-1]} steps per unit" in check.reason
    assert len(check.cauchy_differences) == len(check.steps_per_unit) - 1
    short = limit_check(_problem(affine=True), [1, 2, 4, 8], max_steps_per_unit=8)
    assert short.verdict == OrderVerdict.UNDECIDED and short.refined == []
    assert short.reason.endswith("undecided up to the budget of 8 steps per unit")
    with pytest.raises(InvalidInputError, match="max_steps_per_unit must be at least"):
        limit_check(_problem(affine=True), [1, 2, 4, 8], max_steps_per_unit=4)


def _levels(differences, spread, sensitivity, size=1.0, clusters=5):
    """Hand-made measurements of a limit check, for the decision rule alone."""
    steps = [2**k for k in range(len(spread))]
    return [
        _Level(m, None, d, size, s, clusters, None, g)
        for m, d, s, g in zip(steps, [None, *differences], spread, sensitivity, strict=True)
    ]


def test_not_cauchy_needs_resolved_levels_and_no_collapse_under_way():
    """Differences that stay put while the solutions are resolved and steady are not
    Cauchy; the same differences with a spread still falling are undecided."""
    steady = _levels([0.03, 0.031, 0.03, 0.032], [0.5, 0.52, 0.5, 0.51, 0.5], [1.0] * 5)
    verdict, _, reason = _verdict(steady, COLLAPSE)
    assert verdict == OrderVerdict.NO_LIMIT and reason.startswith("not Cauchy")
    falling = _levels([0.03, 0.031, 0.03, 0.032], [0.5, 0.52, 0.5, 0.2, 0.05], [1.0] * 5)
    verdict, _, reason = _verdict(falling, COLLAPSE)
    assert verdict == OrderVerdict.UNDECIDED
    assert "the token spread falls from 0.5 to 0.05 over the last three levels" in reason
    coarse = _levels([0.3, 0.31, 0.3, 0.32], [0.5] * 5, [1.0] * 5)
    verdict, _, reason = _verdict(coarse, COLLAPSE)
    assert verdict == OrderVerdict.UNDECIDED and "0.32 of the state's size apart" in reason


def test_degenerate_reasons_name_only_what_was_seen():
    """A sensitivity that falls is reported as forgetting u0; tokens that stay distinct
    are not said to fall onto points."""
    forgets = _levels([0.3, 0.1, 0.05, 0.02], [0.5] * 5, [1.0, 0.5, 0.1, 0.02, 0.005])
    verdict, _, reason = _verdict(forgets, COLLAPSE)
    assert verdict == OrderVerdict.NO_LIMIT
    assert reason == (
        "degenerate: the final state forgets u0 (its sensitivity to u0 falls from 1 to "
        "0.005, below 0.01 of its largest)"
    )
    one = _levels([0.3, 0.1, 0.05, 0.02], [0.5, 0.1, 1e-3, 1e-6, 1e-9], [1.0] * 5, clusters=1)
    assert _verdict(one, COLLAPSE)[2] == (
        "degenerate: the tokens fall onto one point (spread 0.5 -> 1e-09)"
    )


def test_token_spread():
    u = np.array([[1.0, 2.0], [3.0, 2.0]])
    assert token_spread(u) == pytest.approx(1 / 3)
    assert token_spread(np.ones((4, 3))) == 0


def test_bad_input():
    with pytest.raises(InvalidInputError, match="at least 4 distinct step counts"):
        limit_check(_problem(False), [1, 2, 2, 4])
    with pytest.raises(InvalidInputError, match="collapse must lie in"):
        limit_check(_problem(False), [1, 2, 4, 8], collapse=0)


def test_collapse_onto_several_points_is_degenerate_too():
    """Per-feature gains with zero biases: the norm maps are odd, the tokens of each batch
    entry fall onto a few fixed points (+v and -v), the spread stays O(1) and successive
    refinements even look Cauchy; the final state forgets u0 (docs/limits.md section 4)."""
    rng = np.random.default_rng(5)
    layers = [
        dataclasses.replace(
            LayerWeights.random(8, 2, 16, seed),
            norm1=(rng.uniform(0.5, 1.5, 8), np.zeros(8)),
            norm2=(rng.uniform(0.5, 1.5, 8), np.zeros(8)),
        )
        for seed in range(2)
    ]
    problem = Problem(rng.standard_normal((2, 40, 8)), PiecewiseControls(layers), 2.0)
    check = limit_check(problem, [2**k for k in range(2, 12)])
    assert check.verdict == OrderVerdict.NO_LIMIT and check.reason.startswith("degenerate")
    assert check.clusters[0] == 80 and check.clusters[-1] <= 4  # 80 tokens on a few points
    assert check.spread[-1] > 0.3  # not one point: a spread test alone misses it
    assert check.sensitivity[-1] <= 1e-2 * max(check.sensitivity)
    assert check.fixed_point_defect[-1] < 0.01 * max(check.fixed_point_defect)
    assert check.estimate.verdict == OrderVerdict.PASS  # the differences alone look Cauchy


def test_distinct_tokens():
    u = np.array([[1.0, 2.0], [1.0, 2.0 + 1e-9], [-1.0, 0.0]])
    assert distinct_tokens(u) == 2 and distinct_tokens(u[:1]) == 1
