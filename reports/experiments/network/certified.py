"""What an enclosure of the limit proves, in words (docs/enclosures.md sections 4 and 7,
docs/networks.md section 8): the certified decisions against the network's own, and the
true error of the float64 limit against its assessed error. Every clause from a measured
value; an enclosure not asked for is said to be absent, never counted as zero."""

from __future__ import annotations

from enum import StrEnum

from convergence.network_limit import NetworkLimit
from convergence.network_limit.certified import CertifiedLimit


class ErrorBound(StrEnum):
    """How the limit's assessed error E stands against the bracket [low, high] of its true
    error that the enclosure proves."""

    BOUNDS = "bounds"
    """E >= high: the estimate is proved to bound the true error."""
    FALLS_SHORT = "falls short"
    """E < low: the estimate is proved to fall short of the true error."""
    UNDECIDED = "undecided"
    """low <= E < high: the enclosure is too wide to tell."""


def error_bound(certified: CertifiedLimit, assessed: float) -> ErrorBound:
    """The verdict on the assessed error `assessed` (ErrorBound; the thresholds are the
    bracket's ends)."""
    low, high = certified.reference_error
    if assessed >= high:
        return ErrorBound.BOUNDS
    if assessed < low:
        return ErrorBound.FALLS_SHORT
    return ErrorBound.UNDECIDED


_BOUND_TEXT = {
    ErrorBound.BOUNDS: "so its assessed error {E} is proved to bound it",
    ErrorBound.FALLS_SHORT: "above its assessed error {E}: the estimate is proved to fall short",
    ErrorBound.UNDECIDED: "and its assessed error {E} lies inside: the enclosure is too wide to "
    "tell whether the estimate bounds it",
}


def certified_sentence(result: NetworkLimit) -> str:
    """The enclosure's sentence for a record with a limit."""
    found = result.certified
    unproved = (
        "its error is assessed, not bounded"
        if result.decisions is None
        else "none of its decisions is proved, and its error is assessed, not bounded"
    )
    if found is None:
        return f"No enclosure of the limit was asked for (`certify`): {unproved}."
    how = (
        f"An enclosure of the limit in arb at {found.digits} digits (Taylor order "
        f"{found.order}, local tolerance {found.tolerance:.2g}"
    )
    if found.failure is not None:
        return (
            f"{how}; docs/enclosures.md) stopped short after {found.seconds:.0f} s: "
            f"{found.failure}. It proves nothing: {unproved}."
        )
    low, high = found.reference_error
    verdict = error_bound(found, result.limit_error)
    said = (
        f"{how}; {found.steps} steps and {found.rejected} rejected in {found.seconds:.0f} s; "
        f"docs/enclosures.md) has relative width {found.width:.2g} at the final time."
    )
    if found.decisions is not None:
        certified = found.certified_same + found.certified_changed
        said += (
            f" Of the limit's {found.decisions} {result.decided_at}, {certified} are certified: "
            f"{found.certified_same} the network's own and {found.certified_changed} certified "
            f"changed; {found.uncertain} stay uncertain (their balls too wide to tell)."
        )
    return (
        f"{said} The float64 limit's true error lies in [{low:.2g}, {high:.2g}] (max-abs), "
        + _BOUND_TEXT[verdict].format(E=f"{result.limit_error:.2g}")
        + "."
    )
