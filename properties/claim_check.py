"""ClaimCheck: the verdict on one claim in one configuration, with the measured defect, and
the two measurements every check makes in a backend (its largest magnitude, and the refusal
of inf or NaN)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from solvers.backends import Array, Backend
from solvers.errors import NumericalBreakdownError


class CheckVerdict(StrEnum):
    """Whether a measured defect is within its tolerance."""

    HOLDS = "holds"
    FAILS = "fails"


@dataclass(frozen=True)
class ClaimCheck:
    """`defect` is what was measured; the claim holds when it is at most `tolerance`.

    The tolerance is derived from the unit roundoff of the precision the check ran in,
    so a failure means a defect above rounding, not a failed comparison of bits.
    """

    claim: str
    configuration: dict[str, Any]
    defect: float
    tolerance: float
    note: str = ""
    verdict: CheckVerdict = field(init=False)

    def __post_init__(self) -> None:
        holds = math.isfinite(self.defect) and self.defect <= self.tolerance
        object.__setattr__(self, "verdict", CheckVerdict.HOLDS if holds else CheckVerdict.FAILS)


def largest_magnitude(bk: Backend, x: Array) -> float:
    """max |x| as a float64 number (midpoints for balls; 0 for an empty array)."""
    return float(np.max(np.abs(bk.to_float64(x)), initial=0.0))


def require_finite(bk: Backend, value: Array, what: str) -> None:
    """Raise NumericalBreakdownError when `value` holds inf or NaN: the format overflowed,
    which is a breakdown of the precision, not a failed claim."""
    if not bk.all_finite(value):
        raise NumericalBreakdownError(
            f"{bk!r} produced inf or NaN in {what}: the values exceed what the format can hold"
        )
