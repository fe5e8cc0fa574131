"""Step size and order control of the reference: ODEX's rules, simplified (docs/schemes.md
section 7). The order is 2j for column j of the extrapolation tableau; the largest usable
column is the last whose modelled rounding stays within a share of the tolerance, and the
next column and step size are those of least work per unit step."""

from __future__ import annotations

import math

from solvers.integrators.tableaux import (
    EVEN,
    StepNumbers,
    extrapolation_amplification,
    extrapolation_evaluations,
)

SAFETY, SAFETY_ERROR = 0.94, 0.65
"""ODEX's safety factors: h_new = h SAFETY (SAFETY_ERROR / err)^(1 / (2j - 1))."""
GROWTH_LIMITS = (0.02, 4.0)
"""The factor between one step size and the next stays in this range."""
REJECTED_LIMITS = (0.1, 0.5)
"""After a rejection the step shrinks by a factor in this range."""
MAX_COLUMNS = 40
"""The most columns (order 80) a step may use, at any precision."""
ROUNDING_FACTOR = 4.0
"""A step at column j adds at most ROUNDING_FACTOR (Lambda_j + 2) unit roundoffs of the
state's size (Lambda_j: the Lebesgue constant of T_jj; the 2: the projection and the last
addition; the 4: a safety factor for the roundings inside the sub-steps that the count
leaves out; docs/schemes.md section 7)."""
ROUNDING_SHARE = 0.5
"""A column is usable while its rounding is within this share of the tolerance."""


def first_column(tol: float) -> int:
    """ODEX's first column for a tolerance: about 0.6 log10(1 / tol) + 1.5, at least 3."""
    return max(3, int(0.6 * -math.log10(tol) + 1.5))


def column_rounding(columns: int, unit_roundoff: float) -> float:
    """The rounding error a step at `columns` may add, relative to the state's size:
    ROUNDING_FACTOR (Lambda_j + 2) unit roundoffs."""
    return ROUNDING_FACTOR * (extrapolation_amplification(columns) + 2) * unit_roundoff


def step_factor(ratio: float, column: int, low: float, high: float) -> float:
    """h_new / h for an estimate `ratio` (error / tolerance) at column j (order 2j)."""
    if not ratio > 0:
        return high
    if not math.isfinite(ratio):
        return low
    factor = SAFETY * (SAFETY_ERROR / ratio) ** (1 / (2 * column - 1))
    return min(high, max(low, factor))


class StepControl:
    """The size and column of the next step, from the estimates of the last one.

    `max_columns` is the last column whose rounding (`rounding`) is within ROUNDING_SHARE
    of the tolerance: beyond it the tableau's differences are rounding, and no step size
    brings them down. The first column is ODEX's, about 0.6 log10(1 / tol) + 1.5 (order
    twice that), below the largest; the first step is `max_step`."""

    def __init__(self, unit_roundoff: float, tol: float, max_step: float) -> None:
        self.unit_roundoff = unit_roundoff
        self.max_columns = 3  # the rounding grows with the column: the first too many ends it
        while (
            self.max_columns < MAX_COLUMNS
            and self.rounding(self.max_columns + 1) <= ROUNDING_SHARE * tol
        ):
            self.max_columns += 1
        self.columns = min(self.max_columns - 1, first_column(tol))
        self.max_step = max_step
        self.h = max_step

    def rounding(self, columns: int) -> float:
        """`column_rounding` at this control's unit roundoff."""
        return column_rounding(columns, self.unit_roundoff)

    def next_size(self) -> float:
        """The size of the next step: the planned one, at most `max_step`."""
        return min(self.h, self.max_step)

    def accepted(
        self, h: float, j: int, ratio: dict[int, float], numbers: StepNumbers = EVEN
    ) -> None:
        """Plan after a step of size h accepted at column j (rows of `numbers`): the column
        of least work per unit step among j - 1, j (and j + 1 when the target was met at
        its own column), and its step size."""
        optimal = {i: h * step_factor(r, i, *GROWTH_LIMITS) for i, r in ratio.items()}
        cost = {i: extrapolation_evaluations(i, numbers) for i in (*optimal, j + 1)}
        work = {i: cost[i] / optimal[i] for i in optimal}
        column = j
        if j - 1 in work and work[j - 1] < 0.9 * work[j]:
            column = j - 1
        elif j == self.columns and j < self.max_columns:
            column = j + 1
            optimal[column] = min(h * GROWTH_LIMITS[1], optimal[j] * cost[j + 1] / cost[j])
        self.columns = max(2, column)
        self.h = optimal.get(column, optimal[j])

    def column_for(self, shorter: float, h: float, ratio: dict[int, float]) -> int:
        """The lowest column that the ratios of a step of size h predict within the
        tolerance, with the safety factors, for a step of size `shorter`: the error of
        column i scales as h^(2i - 1). The highest column tried if none."""
        for i in sorted(ratio):
            if i >= 2 and ratio[i] * (shorter / h) ** (2 * i - 1) <= SAFETY_ERROR * SAFETY:
                return i
        return max(ratio)

    def rejected(self, h: float, ratio: float, column: int) -> None:
        """Shrink the step after a step of size h failed with `ratio` at `column`."""
        self.h = h * step_factor(ratio, column, *REJECTED_LIMITS)
