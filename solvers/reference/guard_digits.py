"""The precision a reference works at: guard digits for a number system of variable
precision, so that its order can grow with the digits asked for (docs/schemes.md
section 7).

A reference asked for in mpmath or arb at D digits is computed at D + G digits to a
per-step tolerance of 10^-D / DIGIT_SAFETY, and rounded back to D digits. G is chosen so
that ODEX's first column for that tolerance, and the one after it (at most the
MAX_COLUMNS a step may use), are usable: their
modelled rounding (solvers.reference.step_control.column_rounding) stays within
ROUNDING_SHARE of the tolerance. Without guard digits the usable columns are capped by
the rounding alone, the same at every precision, so more digits cost more steps at a
fixed order; with them the order grows with the digits and more digits cost more work
per step instead. A fixed format (float16 .. longdouble) cannot widen: its reference
works at its own precision to at least TOLERANCE_FLOOR unit roundoffs.

`tighter_precision` picks the number system of an assessment's tighter run
(solvers.reference.solution): bk itself where its floor allows the tighter tolerance,
else the cheapest wider one that does (docs/schemes.md section 7).
"""

from __future__ import annotations

import math
import sys

import numpy as np

from solvers.backends import Backend, backend, registered
from solvers.equation.problem import Problem
from solvers.errors import InvalidInputError
from solvers.reference.step_control import (
    MAX_COLUMNS,
    ROUNDING_SHARE,
    column_rounding,
    first_column,
)
from solvers.validation import positive_number

TOLERANCE_FLOOR = 1000
"""In a fixed format the tolerance is at least this many unit roundoffs: there the
rounding share leaves enough columns usable for a high order
(solvers.reference.step_control)."""

DIGIT_SAFETY = 10.0
"""The per-step tolerance is 10^-D / DIGIT_SAFETY, so that the global error, a sum over
the steps, stays near 10^-D."""
GUARD_FLOOR = 2
"""At least this many guard digits."""


def tolerance_for(bk: Backend, tol: float | None) -> float:
    """The tolerance a run in bk works to: `tol`, raised to TOLERANCE_FLOOR unit roundoffs
    (the working precision, also the default)."""
    floor = TOLERANCE_FLOOR * bk.unit_roundoff
    return floor if tol is None else max(positive_number("tol", tol), floor)


def reference_precision(bk: Backend, tol: float | None) -> tuple[Backend, float]:
    """(the backend a reference in `bk` works in, its per-step tolerance) for a requested
    `tol` (None: the digits bk holds). In a fixed format: (bk, tolerance_for(bk, tol)).
    In a variable precision of D digits the tolerance is at least 10^-D / DIGIT_SAFETY
    (the states come back rounded to D digits) and the working backend has the guard
    digits of the module docstring; `check_range` refuses D beyond float64's range."""
    if not _variable(bk):
        return bk, tolerance_for(bk, tol)
    check_range(bk, tol)
    return _guarded(bk, tol)


def check_range(bk: Backend, tol: float | None, tighter_by: float | None = None) -> None:
    """Raise InvalidInputError, naming the most digits that fit, where a reference in bk
    to `tol` (and, with `tighter_by`, the tighter run of its assessment, to its tolerance
    / tighter_by) would carry its tolerance, rounding allowance or unit roundoff below
    float64's normal range (docs/schemes.md section 7, "Guard digits")."""
    if _within_range(bk, tol, tighter_by):
        return
    last = -math.floor(math.log10(sys.float_info.min))  # 10^-last is not normal
    most = next(
        (
            d
            for d in range(min(bk.digits, last) - 1, 0, -1)
            if _within_range(_at(bk, d), tol, tighter_by)
        ),
        None,
    )
    run = "" if tighter_by is None else f" and its assessment's tighter run (tol / {tighter_by:g})"
    fits = "no digits fit" if most is None else f"ask for at most {most} digits of {bk.name}"
    raise InvalidInputError(
        f"a reference in {bk!r}{run} would carry its tolerance, rounding allowance or unit "
        f"roundoff below float64's normal range (down to {sys.float_info.min:.1e}): {fits}"
        + ("" if tol is None else f" at tol {tol:g}")
        + ", or integrate with solve() at fixed steps"
    )


def _within_range(bk: Backend, tol: float | None, tighter_by: float | None) -> bool:
    if not _variable(bk):
        return True
    guarded = _guarded(bk, tol)
    if guarded is None or tighter_by is None:
        return guarded is not None
    tighter = guarded[1] / tighter_by
    return _within_range(tighter_precision(bk, tighter, 0), tighter, None)  # bk variable


def _guarded(bk: Backend, tol: float | None) -> tuple[Backend, float] | None:
    """(bk widened by its guard digits, the tolerance) for a variable precision, or None
    where the floor, or the unit roundoff the rounding allows (and with it the widened
    one), is below float64's normal range."""
    floor = _floor(bk.digits)
    if floor < sys.float_info.min:
        return None
    tol = floor if tol is None else max(tol, floor)
    columns = min(first_column(tol) + 1, MAX_COLUMNS)
    unit_needed = ROUNDING_SHARE * tol / column_rounding(columns, 1.0)
    if unit_needed < sys.float_info.min:
        return None
    extra = max(GUARD_FLOOR, math.ceil(math.log10(bk.unit_roundoff / unit_needed)) - 1)
    while bk.widened(extra).unit_roundoff > unit_needed:  # decimal digits to binary bits
        extra += 1
    working = bk.widened(extra)
    return (working, tol) if working.unit_roundoff >= sys.float_info.min else None


def _at(bk: Backend, digits: int) -> Backend:
    """bk's number system at `digits` decimal digits."""
    return bk.widened(digits - bk.digits)


def multiply_adds(problem: Problem) -> int:
    """The multiply-adds of one field evaluation of the problem's largest layer: every row
    (token, over the batch) times each of its maps (their entries, biases aside), and each
    head's scores and values, tokens x (d_k + d_v) a row."""
    rows, tokens = math.prod(problem.u0.shape[:-1]), problem.tokens
    most = 0
    for w in problem.controls.all_layers():
        maps = sum(np.size(getattr(w, name)) for name in w.map_names if name.startswith("w"))
        attention = w.heads * tokens * (w.d_k + w.d_v)
        most = max(most, rows * (maps + attention))
    return most


def tighter_precision(bk: Backend, tol: float, work: int) -> Backend:
    """The number system in which a reference can work to `tol`: bk where it can (a
    variable precision widened by the digits its floor 10^-D / DIGIT_SAFETY needs), else
    the registered fixed format of more digits and at least bk's range whose floor of
    TOLERANCE_FLOOR unit roundoffs is at most `tol` and whose field evaluation of `work`
    multiply-adds (`multiply_adds`) costs least by its `evaluation_cost` (the narrower of
    equal cost), else mpmath at the digits that floor needs (its guard digits then make it
    wider than bk). For float64 that is long double on small problems (below about 1e5
    multiply-adds, where each operation's overhead decides) and float64x2 on larger ones
    (a fifth of long double's cost a multiply-add)."""
    digits = math.ceil(-math.log10(DIGIT_SAFETY * positive_number("tol", tol)))
    while _floor(digits) > tol:  # the logarithm rounded down
        digits += 1
    if _variable(bk):
        return bk.widened(max(0, digits - bk.digits))
    if TOLERANCE_FLOOR * bk.unit_roundoff <= tol:
        return bk
    reaching = [
        c
        for c in registered(fixed_only=True)
        if c.unit_roundoff < bk.unit_roundoff
        and c.largest >= bk.largest
        and TOLERANCE_FLOOR * c.unit_roundoff <= tol
    ]
    if reaching:
        return min(reaching, key=lambda c: (_seconds(c, work), -c.unit_roundoff))
    return backend("mpmath", max(digits, 5))


def _seconds(bk: Backend, work: int) -> float:
    """A fixed format's modelled time for a field evaluation of `work` multiply-adds."""
    fixed, per_multiply_add = bk.evaluation_cost
    return fixed + per_multiply_add * work


def _variable(bk: Backend) -> bool:
    """Whether bk's precision can widen (mpmath, arb: those with digits), unlike a fixed
    format's."""
    return bk.digits is not None


def _floor(digits: int) -> float:
    """The least tolerance of a reference at `digits` decimal digits of a variable
    precision: 10^-digits / DIGIT_SAFETY."""
    return 10.0**-digits / DIGIT_SAFETY
