"""Figures of merit: a measured value with the tolerance a recomputation must keep.

Every experiment's judge names its figures of merit (reports.judging); a baseline
(reports.baseline) stores them, and `tide check` compares a recomputation with them. Each
figure states its rule and its tolerance in the stored JSON, derived from that figure's
own uncertainty, so that a reader of baseline.json sees what "unchanged" means:

- `exact`: counts, verdicts and labels; the new value equals the old one, or differs by
  at most `tolerance` for a count some of whose members are uncertain (a decision whose
  margin is below the error of the states it is taken on).
- `within`: |new - old| <= tolerance, an absolute tolerance derived from the figure's
  error (the limit's assessed error, a rounding allowance), with `why` naming it.
- `bounded`: low <= new <= high, for quantities a claim bounds (a ratio to a bound).
- `order`: the new order lies in the old 95% interval widened by ORDER_SLACK, and the
  verdict is unchanged.
- `growth`: an error at a rounding or reference floor, which moves between machines by
  small factors; the new one is at most ERROR_GROWTH times the old one (a real regression
  of a scheme moves it by orders of magnitude).

Baselines written before the rule was stored are read by the shape of their entries
(`rule_of`).
"""

from __future__ import annotations

import math
from typing import Any

from convergence.order import OrderEstimate

ORDER_SLACK = 0.1
"""Added on both sides of an order's 95% interval: fits at the rounding floor move the
interval by a few hundredths between machines."""
ERROR_GROWTH = 2.0
"""The factor an error at a floor may grow by between two runs of one study."""

Merit = dict[str, Any]


def exact_merit(value: Any, uncertain: int = 0, case: str | None = None) -> Merit:
    """A count, verdict or label that a recomputation must reproduce; a count may move by
    `uncertain` (its members the measurement cannot tell)."""
    merit = {"rule": "exact", "value": value}
    if uncertain:
        merit |= {"tolerance": int(uncertain), "why": f"{uncertain} uncertain"}
    return _cased(merit, case)


def within_merit(value: float, tolerance: float, why: str, case: str | None = None) -> Merit:
    """A measured number that a recomputation must reproduce to `tolerance` (absolute),
    which `why` derives from the number's own uncertainty."""
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise ValueError(f"a tolerance must be finite and >= 0, got {tolerance}")
    return _cased({"rule": "within", "value": value, "tolerance": tolerance, "why": why}, case)


def bounded_merit(value: float, low: float, high: float, case: str | None = None) -> Merit:
    """A quantity that must stay in [low, high] (its claim's bounds)."""
    return _cased({"rule": "bounded", "value": value, "low": low, "high": high}, case)


def order_merit(estimate: OrderEstimate, case: str | None = None) -> Merit:
    """An order estimate: its order, 95% interval and verdict; a recomputation must land in
    the interval widened by ORDER_SLACK with the same verdict."""
    return fitted_merit(estimate.order, estimate.interval, estimate.verdict, case)


def fitted_merit(
    value: float, interval: tuple[float, float], verdict: Any, case: str | None = None
) -> Merit:
    """A fitted order or rate with its 95% interval and verdict (the rule of order_merit)."""
    low, high = interval
    merit = {
        "rule": "order",
        "value": value,
        "low": low,
        "high": high,
        "slack": ORDER_SLACK,
        "verdict": str(verdict),
    }
    return _cased(merit, case)


NORM_ROUNDING = 1e-12
"""A ratio of Euclidean norms of stored float64 weights moves by rounding alone (the order of
the sums of squares), far below this relative tolerance."""


def norm_merit(value: float, case: str | None = None) -> Merit:
    """A ratio of norms of a network's stored weights (docs/depth.md section 4): it moves
    by the rounding of the norms only, NORM_ROUNDING relative."""
    why = "float64 rounding of the weights' norms"
    return within_merit(value, NORM_ROUNDING * abs(value), why, case)


def growth_merit(value: float, case: str | None = None) -> Merit:
    """An error at a floor: a recomputation may reach ERROR_GROWTH times it, no more."""
    return _cased({"rule": "growth", "value": value, "factor": ERROR_GROWTH}, case)


def _cased(merit: Merit, case: str | None) -> Merit:
    return merit if case is None else merit | {"case": case}


def rule_of(old: Merit) -> str:
    """The rule of a stored figure; baselines written before rules were stored by the
    shape of their entries."""
    if "rule" in old:
        return old["rule"]
    if "low" in old and "high" in old:
        return "order" if "verdict" in old else "bounded"
    return "growth" if _finite(old.get("value")) else "exact"


def tolerance_text(old: Merit) -> str:
    """The rule a recomputation must keep, in words."""
    rule = rule_of(old)
    if rule == "exact":
        return f"within {old['tolerance']} ({old['why']})" if old.get("tolerance") else "exact"
    if rule == "within":
        return f"within {old['tolerance']:.3g} ({old['why']})"
    if rule == "bounded":
        return f"within [{old['low']:.4g}, {old['high']:.4g}]"
    if rule == "order":
        slack = old.get("slack", ORDER_SLACK)
        return (
            f"in [{old['low'] - slack:.4g}, {old['high'] + slack:.4g}], "
            f"verdict {old.get('verdict')}"
        )
    return f"at most {old.get('factor', ERROR_GROWTH):g} x the baseline's"


def kept(old: Merit, new: Merit) -> bool:
    """Whether the recomputed figure `new` keeps the stored figure `old`'s rule."""
    value, rule = new.get("value"), rule_of(old)
    if "verdict" in old and old["verdict"] != new.get("verdict"):
        return False
    if rule == "exact":
        if old.get("tolerance") and _finite(old["value"]) and _finite(value):
            return abs(value - old["value"]) <= old["tolerance"]
        return value == old["value"]
    if not _finite(value):
        return False
    if rule == "within":
        return abs(value - old["value"]) <= old["tolerance"]
    if rule == "bounded":
        return old["low"] <= value <= old["high"]
    if rule == "order":
        slack = old.get("slack", ORDER_SLACK)
        return old["low"] - slack <= value <= old["high"] + slack
    return value <= old.get("factor", ERROR_GROWTH) * old["value"] + 1e-300


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
