"""Figures of merit keep their rules: each rule passes a value inside its tolerance and fails
one just outside it; baselines written before rules were stored are read by their shape."""

from __future__ import annotations

import math

import pytest

from convergence.order import estimate_order
from reports.baseline import difference
from reports.merit import (
    ERROR_GROWTH,
    ORDER_SLACK,
    bounded_merit,
    exact_merit,
    growth_merit,
    kept,
    order_merit,
    rule_of,
    tolerance_text,
    within_merit,
)


def _new(value, verdict=None):
    return {"value": value} | ({} if verdict is None else {"verdict": verdict})


def test_exact_counts_and_verdicts():
    assert kept(exact_merit(5), _new(5))
    assert not kept(exact_merit(5), _new(6))
    assert not kept(exact_merit("NO-LIMIT"), _new("CAUCHY"))
    uncertain = exact_merit(5, uncertain=2)
    assert kept(uncertain, _new(7)) and kept(uncertain, _new(3))
    assert not kept(uncertain, _new(8))
    assert "2 uncertain" in tolerance_text(uncertain)


def test_within_its_tolerance():
    merit = within_merit(1.0, 1e-6, "the limit's error")
    assert kept(merit, _new(1.0 + 0.9e-6)) and kept(merit, _new(1.0 - 0.9e-6))
    assert not kept(merit, _new(1.0 + 1.1e-6))
    assert not kept(merit, _new(math.nan)) and not kept(merit, _new(None))
    assert "the limit's error" in tolerance_text(merit)
    with pytest.raises(ValueError, match="tolerance"):
        within_merit(1.0, math.inf, "none")


def test_bounded_growth_and_orders():
    assert kept(bounded_merit(0.1, 0.0, 0.2), _new(0.2))
    assert not kept(bounded_merit(0.1, 0.0, 0.2), _new(0.21))
    assert kept(growth_merit(1e-10), _new(ERROR_GROWTH * 1e-10))
    assert not kept(growth_merit(1e-10), _new(2.1 * 1e-10))
    hs = [1 / 8, 1 / 16, 1 / 32, 1 / 64]
    estimate = estimate_order(hs, [h**2 for h in hs], expected=2.0)
    merit = order_merit(estimate)
    low, high = estimate.interval
    assert kept(merit, _new(high + 0.9 * ORDER_SLACK, str(estimate.verdict)))
    assert not kept(merit, _new(high + 1.1 * ORDER_SLACK, str(estimate.verdict)))
    assert not kept(merit, _new(low - 1.1 * ORDER_SLACK, str(estimate.verdict)))
    assert not kept(merit, _new(estimate.order, "FAIL"))


def test_old_baselines_read_by_shape():
    assert rule_of({"value": 1.0, "low": 0.9, "high": 1.1, "verdict": "PASS"}) == "order"
    assert rule_of({"value": 0, "low": 0, "high": 0}) == "bounded"
    assert rule_of({"value": 1e-9}) == "growth"
    assert rule_of({"value": "NO-LIMIT"}) == "exact"
    assert not kept({"value": 1e-9}, _new(3e-9))


def test_a_difference_names_experiment_case_figure_values_and_tolerance():
    old = within_merit(0.5, 1e-8, "the limit's error", case="network")
    line = difference("vit", "lie.4 per unit.relative_distance", old, _new(0.51))
    assert line == (
        "vit | network | lie.4 per unit.relative_distance: 0.5 -> 0.51 "
        "(tolerance: within 1e-08 (the limit's error))"
    )
    assert difference("vit", "x", old, _new(0.5 + 1e-9)) is None
    assert "missing" in difference("vit", "x", old, None)
