"""One attempted step of the reference: the Gragg-Bulirsch-Stoer tableau built row by row
until a diagonal entry T_jj near the target column is within the tolerance, as ODEX's
convergence monitor does (docs/schemes.md sections 3 and 7). It returns the state, its
error estimate and the column used, or the ratios that say how far it missed."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from solvers.backends import Array
from solvers.errors import NumericalBreakdownError, WideBallsError
from solvers.integrators.tableaux import (
    DENSE,
    EVEN,
    RowSamples,
    StepNumbers,
    extrapolation_evaluations,
    extrapolation_rows,
)
from solvers.reference.step_control import StepControl
from solvers.reference.system import System

TRUNCATION_SAFETY = 2.0
"""The truncation error of the accepted T_jj is estimated as this times the larger of
d_j = |T_jj - T_j,j-1| and the d_j that d_j-1 and d_j-2 predict (`truncation`): the
differences alternate in size, and one that cancels by chance is no sign of convergence;
far from the asymptotic regime T_jj is off by about d_j, not far less (docs/schemes.md
section 7)."""
RADIUS_SHARE = 0.5
"""In arb, ball radii above this share of the tolerance cannot be stepped away (a shorter
step does not narrow them): the run stops and certification adds guard bits."""


@dataclass(frozen=True)
class Attempt:
    """What one attempt gave: the accepted state T_jj (None: no column came within the
    tolerance), its estimated error (absolute), the signed T_jj - T_j,j-1 in float64, the
    column j, the ratios estimate / tolerance per column tried, the field evaluations it
    took, the step numbers of its rows, and (when asked for) what the rows up to j keep for
    the dense output."""

    value: Array | None
    estimate: float
    difference: np.ndarray | None
    column: int
    ratio: dict[int, float]
    evaluations: int
    numbers: StepNumbers
    samples: list[RowSamples] | None = None


def truncation(differences: list[float], diagonal: float = 0.0) -> float:
    """The larger of TRUNCATION_SAFETY max(d_j, d_j-1 min(1, d_j-1 / d_j-2)) from
    d_2, ..., d_j (the last difference, or the one its two predecessors predict if that is
    larger) and `diagonal` = |T_jj - T_j-1,j-1|, which bounds the error of T_jj while the
    diagonal contracts by 2 or more a column. The differences alone fall below the error
    of T_jj on long steps, where T_jj is no longer much closer than T_j,j-1: measured 9
    times at column 8 (a step of length 1) and 8 to 10 times at columns 16 to 20
    (docs/schemes.md section 7)."""
    *earlier, last = differences
    predicted = 0.0
    if len(earlier) == 1:
        predicted = earlier[-1]
    elif len(earlier) >= 2:
        previous, before = earlier[-1], earlier[-2]
        predicted = previous * min(1.0, previous / before) if before > 0 else previous
    return max(TRUNCATION_SAFETY * max(last, predicted), diagonal)


def attempt(
    system: System,
    t: Array,
    u: Array,
    size: Array,
    *,
    pattern: Array | None,
    tol: float,
    scale: float,
    control: StepControl,
    target: int | None = None,
    dense: bool = False,
    start: Array | None = None,
) -> Attempt:
    """Rows (EVEN's, DENSE's with `dense`) up to k + 1, k the target column
    (control.columns unless given), of a step of `size` from (t, u) along `system` with
    `pattern` held; accept the first of columns k - 1, k, k + 1 whose estimate is within
    tol relative to `scale`: truncation (`truncation`) plus the step's rounding, measured
    by the radii in balls (added after the projection, by the caller), modelled otherwise
    (StepControl.rounding). With `dense`, the attempt keeps the rows' samples for the
    dense output; `start` is f(t, u) when the caller has it (the evaluations then count
    one fewer). Raises WideBallsError when the radii, not the truncation, fail (a
    shorter step would not help)."""
    bk = system.bk
    h = bk.to_float64(size)
    numbers = DENSE if dense else EVEN
    target = control.columns if target is None else target
    last = min(target + 1, control.max_columns)

    def field(s: Array, v: Array) -> Array:
        return system.field(s, v, pattern)

    ratio, differences, rows, previous = {}, [], last, None
    samples: list[RowSamples] | None = [] if dense else None
    given = 0 if start is None else 1
    for j, (value, neighbour) in enumerate(
        extrapolation_rows(bk, field, t, u, size, last, numbers, samples, start), start=1
    ):
        if j == 1:
            previous = value
            continue
        difference = value - neighbour
        differences.append(system.size(bk.to_float64(difference)))
        diagonal = system.size(bk.to_float64(value - previous))
        previous = value
        truncated = truncation(differences, diagonal)
        if not math.isfinite(truncated):
            rows = j
            break
        radius = bk.max_radius(value)
        if radius > RADIUS_SHARE * tol * scale and truncated <= tol * scale:
            raise WideBallsError(
                f"{system.label}, t = {bk.to_float64(t):.6g}, step {h:.3g}: ball radii "
                f"{radius:.3g} exceed {RADIUS_SHARE:g} of the tolerance; more guard bits",
                radius,
                RADIUS_SHARE * tol * scale,
            )
        modelled = 0.0 if bk.measures_rounding else control.rounding(j) * scale
        ratio[j] = (truncated + radius) / (tol * scale - modelled)
        if j >= target - 1 and ratio[j] <= 1:
            if not bk.all_finite(value):
                raise NumericalBreakdownError(f"{bk!r} produced inf or NaN in {system.label}")
            return Attempt(
                value,
                truncated + modelled,
                system.judged(bk.to_float64(difference)),
                j,
                ratio,
                extrapolation_evaluations(j, numbers) - given,
                numbers,
                samples,
            )
    evaluations = extrapolation_evaluations(rows, numbers) - given
    return Attempt(None, math.inf, None, min(target, last), ratio, evaluations, numbers)
