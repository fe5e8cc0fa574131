"""What a depth family says about the two claims on depth (docs/depth.md sections 5 to 7),
with the thresholds it is judged against. A family named "smooth" (trained from weights
smooth in depth) speaks to Claim.DEPTH_SMOOTH_FLOW, one named "independent" (independent
per-layer initialisations) to Claim.DEPTH_INDEPENDENT_ROUGH; other families have their
verdicts only."""

from __future__ import annotations

from convergence.depth_family import DepthFamily, FamilyVerdict
from reports.claims import Claim, ClaimVerdict, Evidence

SMOOTH, INDEPENDENT = "smooth", "independent"
"""The family names that carry a claim."""
EXPECTED_RATE = 1.0
"""The Lie step's order: the rate 1 / L the smooth claim names."""
RATE_TOLERANCE = 0.2
"""A rate agrees with EXPECTED_RATE when its 95% interval contains it or lies within this
of it."""


def family_evidence(family: str, result: DepthFamily) -> Evidence | None:
    """The evidence of the family named `family` (module docstring); None for another name
    or where the family's data cannot decide."""
    if family == SMOOTH:
        return _smooth(result)
    if family == INDEPENDENT:
        return _independent(result)
    return None


def _smooth(result: DepthFamily) -> Evidence | None:
    """Verified when the family approaches the flow of weights smooth in depth with a family
    rate that agrees with 1; qualified when it approaches it at another rate; refuted when
    its outputs converge while its weights do not, or it does not converge. Where the
    family's verdict is undecided (its distances not yet fitted), the weights decide what
    they can: qualified when their increments shrink (smooth in depth, the family's
    convergence open), refuted when they do not (no theta(t) to approach); no evidence when
    the increments cannot tell either."""
    verdict, rate, increments = result.verdict, result.family_rate, result.increment_rate
    if verdict == FamilyVerdict.SMOOTH:
        agrees = rate.agrees(EXPECTED_RATE, RATE_TOLERANCE)
        found = ClaimVerdict.VERIFIED if agrees else ClaimVerdict.QUALIFIED
    elif verdict != FamilyVerdict.UNDECIDED:
        found = ClaimVerdict.REFUTED
    elif increments.shrinks or increments.stays:
        found = ClaimVerdict.QUALIFIED if increments.shrinks else ClaimVerdict.REFUTED
    else:
        return None
    distances = ", ".join(_value(m.family_distance) for m in result.members[:-1])
    agreement = rate.text
    if rate.fitted_by is not None:
        agreement += (
            f" against {EXPECTED_RATE:g} (agreement: its interval contains it or lies within "
            f"{RATE_TOLERANCE:g} of it)"
        )
    return Evidence(
        Claim.DEPTH_SMOOTH_FLOW,
        found,
        f"{_family(result)}, verdict {verdict} ({result.reason}); family distances {distances}, "
        f"family rate {agreement}; weight increments at rate {increments.text} "
        f"({increments.verdict}); own-flow rate {result.own_flow_rate.text}",
    )


def _independent(result: DepthFamily) -> Evidence | None:
    """Verified when the weight increments do not shrink; qualified when they shrink at a
    rate whose interval lies below 1 - RATE_TOLERANCE (the weights become continuous in
    depth, rougher than smooth); refuted when they shrink at a rate whose interval reaches
    it (as samples of a smooth function would); no evidence when the increments' fit
    cannot tell (docs/depth.md section 7)."""
    rate = result.increment_rate
    if rate.stays:
        found = ClaimVerdict.VERIFIED
    elif rate.shrinks:
        rough = rate.interval[1] < EXPECTED_RATE - RATE_TOLERANCE
        found = ClaimVerdict.QUALIFIED if rough else ClaimVerdict.REFUTED
    else:
        return None
    return Evidence(
        Claim.DEPTH_INDEPENDENT_ROUGH,
        found,
        f"{_family(result)}: weight increments at rate {rate.text} ({rate.verdict}: "
        f"{rate.reason}), largest increment "
        f"{', '.join(_value(m.weight_increment) for m in result.members)} at L = "
        f"{', '.join(str(m.depth) for m in result.members)}; the family's verdict: "
        f"{result.verdict}",
    )


def _family(result: DepthFamily) -> str:
    first, last = result.members[0], result.members[-1]
    return f"{len(result.members)} members, L = {first.depth} to {last.depth}"


def _value(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"
