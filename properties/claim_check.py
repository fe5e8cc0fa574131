"""ClaimCheck: the verdict on one claim in one configuration, with the measured defect."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


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
