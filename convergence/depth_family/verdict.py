"""What a depth family's rates say, in words the numbers support (docs/depth.md
section 5): the family does not converge, approaches the flow of weights smooth in
depth, has outputs that converge while its weights do not, or is undecided (and then
what would decide it)."""

from __future__ import annotations

from enum import StrEnum

from convergence.depth_family.rates import FittedRate
from convergence.order import OrderVerdict


class FamilyVerdict(StrEnum):
    SMOOTH = "approaches the flow of weights smooth in depth"
    AVERAGED = "the outputs converge but the weights do not"
    DIVERGES = "does not converge"
    UNDECIDED = "undecided"


def family_verdict(family: FittedRate, increments: FittedRate) -> tuple[FamilyVerdict, str]:
    """The verdict of docs/depth.md section 5 from the family rate (the members' distances
    from the next deeper member) and the increment rate, with its reason."""
    if family.stays:
        return FamilyVerdict.DIVERGES, f"the family distances do not shrink: {family.reason}"
    if family.shrinks and increments.shrinks:
        return FamilyVerdict.SMOOTH, (
            f"the family distances shrink at rate {family.text} and the weight increments "
            f"at rate {increments.text}, both intervals above 0"
        )
    if family.shrinks and increments.stays:
        return FamilyVerdict.AVERAGED, (
            f"the family distances shrink at rate {family.text} while the weight "
            f"increments do not (rate {increments.text}: {increments.reason}): the limit "
            "is the flow of a depth-averaged field, not of weights theta(t)"
        )
    sequences = (("family distances", family), ("weight increments", increments))
    open_ = [(name, rate) for name, rate in sequences if not (rate.shrinks or rate.stays)]
    told = "; ".join(
        f"the {name} cannot tell ({rate.verdict or 'not fitted'}: {rate.reason})"
        for name, rate in open_
    )
    at_floor = all(rate.verdict == OrderVerdict.FLOOR for _, rate in open_)
    decide = (
        "members above the floor (shallower ones) would decide"
        if at_floor
        else "deeper members would decide"
    )
    return FamilyVerdict.UNDECIDED, f"{told}; {decide}"
