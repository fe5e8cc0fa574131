"""ClaimCheck: the verdict on one claim in one configuration, with the measured defect."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

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
    verdict: str = field(init=False)

    def __post_init__(self) -> None:
        holds = math.isfinite(self.defect) and self.defect <= self.tolerance
        object.__setattr__(self, "verdict", HOLDS if holds else FAILS)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; floats are written with repr, so nothing is lost."""
        record = asdict(self)
        record["defect"] = repr(float(self.defect))
        record["tolerance"] = repr(float(self.tolerance))
        return record
