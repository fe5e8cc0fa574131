"""A family's sequences fitted against 1 / L: the order estimator's rate where it fits one,
else the least-squares slope over every level, so that a sequence that does not shrink
has a measured slope near 0, never a missing one (docs/depth.md section 5)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from convergence.network_limit.levels import FIT_LEVELS
from convergence.order import OrderVerdict, estimate_order
from solvers.results.line_fit import fit_line

ESTIMATOR = "order estimator"
LEAST_SQUARES = "least squares over every member (the estimator fits no order)"


@dataclass(frozen=True)
class FittedRate:
    """The rate p of a sequence e(L) ~ C L^-p with its 95% interval, the estimator's
    verdict and reason (docs/orders.md section 4), the depths it was fitted on and how
    (`fitted_by`: ESTIMATOR, LEAST_SQUARES, or None when there were too few members)."""

    rate: float
    interval: tuple[float, float]
    verdict: OrderVerdict | None
    """None when fewer than FIT_LEVELS members qualify: nothing was fitted."""
    reason: str
    depths: list[int]
    fitted_by: str | None

    @property
    def shrinks(self) -> bool:
        """The sequence decreases with a rate whose interval lies above 0 (PASS)."""
        return self.verdict in (OrderVerdict.PASS, OrderVerdict.SUPERCONVERGENT)

    @property
    def stays(self) -> bool:
        """The estimator finds that the sequence does not decrease (NO-LIMIT)."""
        return self.verdict == OrderVerdict.NO_LIMIT

    @property
    def text(self) -> str:
        """The rate and its interval, "1.01 [0.98, 1.04]", or "not fitted"."""
        if self.fitted_by is None:
            return "not fitted"
        lo, hi = self.interval
        return f"{self.rate:.3g} [{lo:.3g}, {hi:.3g}]"

    def agrees(self, expected: float, tolerance: float) -> bool:
        """Whether the interval contains `expected` or lies within expected +- tolerance."""
        lo, hi = self.interval
        return lo <= expected <= hi or expected - tolerance <= lo <= hi <= expected + tolerance


def fit_rate(
    depths: Sequence[int],
    values: Sequence[float | None],
    *,
    within: float | None = None,
    floor: float = 0.0,
    floor_name: str = "precision floor",
    expected: float | None = None,
    what: str = "members",
) -> FittedRate:
    """The rate of `values` against h = 1 / depth over the members with a value (and, with
    `within`, a value at most `within`: levels far from the limit say nothing, docs/
    networks.md section 3), by estimate_order with `floor` and `expected`; where it fits no
    order (no decrease), the least-squares slope of log value against log h over every
    positive value. Fewer than FIT_LEVELS members: nothing fitted."""
    pairs = [
        (int(L), float(v))
        for L, v in zip(depths, values, strict=True)
        if v is not None and (within is None or v <= within)
    ]
    nan = math.nan
    if len(pairs) < FIT_LEVELS:
        limit = "" if within is None else f" within {within:g}"
        return FittedRate(
            nan,
            (nan, nan),
            None,
            f"{len(pairs)} {what}{limit}, fewer than the {FIT_LEVELS} a fit needs",
            [L for L, _ in pairs],
            None,
        )
    hs, errors = [1 / L for L, _ in pairs], [v for _, v in pairs]
    estimate = estimate_order(hs, errors, expected=expected, floor=floor, floor_name=floor_name)
    if not math.isnan(estimate.order):
        used = sorted(pairs[i][0] for i in estimate.used)
        return FittedRate(
            estimate.order, estimate.interval, estimate.verdict, estimate.reason, used, ESTIMATOR
        )
    positive = [(L, v) for L, v in pairs if v > 0]
    fit = fit_line(np.log([1 / L for L, _ in positive]), np.log([v for _, v in positive]))
    return FittedRate(
        fit.slope,
        fit.slope_interval,
        estimate.verdict,
        estimate.reason,
        [L for L, _ in positive],
        LEAST_SQUARES if fit.points >= FIT_LEVELS else None,
    )
