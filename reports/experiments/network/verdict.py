"""The network-limit study's verdict on the claim that a trained network is close to its
own time-step limit, with the thresholds it is judged against (docs/networks.md sections
3 and 7)."""

from __future__ import annotations

from pathlib import Path

from convergence.network_limit import NetworkLimit
from convergence.order import OrderVerdict
from reports.claims import Claim, ClaimVerdict, Evidence, verified_or

CLOSE_TO_OWN_LIMIT = 1e-2
"""A network is close to its limit when its relative distance from it (dt = 1) is below this
and no decision of its readout changes in the limit."""
JUDGEABLE = 0.1
"""The limit's own error must be below this share of CLOSE_TO_OWN_LIMIT (relative) for a
distance below that threshold to verify the claim."""


def network_evidence(result: NetworkLimit) -> Evidence | None:
    """Refuted when a decision changes in the limit beyond the limit's own error, or when
    there is no limit (NO-LIMIT); qualified when no decision changes but the distance is
    above CLOSE_TO_OWN_LIMIT, or some decision is uncertain (the limit's error could move
    it), or the limit check finds a Cauchy sequence the suite has no flow for; verified
    otherwise. Where an enclosure of the limit certified its decisions (docs/networks.md
    section 8), its counts replace the estimate's: changed means certified changed, and
    uncertain means not certified. A readout that takes no decisions leaves the outputs
    alone to judge; a limit check that cannot decide is no evidence (None)."""
    name = Path(result.source).name
    if result.no_limit is not None:
        check = result.no_limit
        if check.verdict == OrderVerdict.UNDECIDED:
            return None
        verdict = (
            ClaimVerdict.REFUTED
            if check.verdict == OrderVerdict.NO_LIMIT
            else ClaimVerdict.QUALIFIED
        )
        return Evidence(
            Claim.TRAINED_NEAR_LIMIT,
            verdict,
            f"{name}: no limit to measure against (post-LN per-feature norms): the refined "
            f"network's sequence is {check.verdict} ({check.reason})",
        )
    split, distance = result.limit_decisions, result.network_distance
    changed = None if split is None else split.changed.count
    uncertain = 0 if split is None else split.uncertain
    proved = result.certified
    proved = proved if proved is not None and proved.decisions is not None else None
    if proved is not None:  # a proof outranks the estimate's margin test
        changed, uncertain = proved.certified_changed, proved.uncertain
    if changed:
        verdict = ClaimVerdict.REFUTED
    else:  # an uncertain decision may have changed: not shown close
        verdict = verified_or(close(result) and not uncertain, ClaimVerdict.QUALIFIED)
    if split is None:
        judged = " (outputs alone: the readout takes none)"
        rule = f"close: below {CLOSE_TO_OWN_LIMIT:g}"
    else:
        rule = f"close: below {CLOSE_TO_OWN_LIMIT:g}, none changed and none uncertain"
        judged = (
            f", {changed} of {result.decisions} decisions changed and {uncertain} uncertain "
            "(within the limit's error)"
            if proved is None
            else f", {changed} of {result.decisions} decisions certified changed, "
            f"{proved.certified_same} certified the network's own and {uncertain} uncertain "
            f"(proved by an enclosure of the limit at {proved.digits} digits)"
        )
    return Evidence(
        Claim.TRAINED_NEAR_LIMIT,
        verdict,
        f"{name}: relative distance {distance:.3g} from its limit at dt = 1 (median "
        f"{result.network_spread.median:.3g} over its {result.batch} inputs){judged} "
        f"({rule}, with the limit's own error below {JUDGEABLE:g} of that: "
        f"{result.limit_error:.2g} absolute against |U_limit| = {result.limit_size:.3g})",
    )


def close(result: NetworkLimit) -> bool:
    """Whether the network's outputs are close to its limit: the relative distance at
    dt = 1 below CLOSE_TO_OWN_LIMIT, with the limit's own error small enough to tell."""
    judgeable = result.limit_error <= JUDGEABLE * CLOSE_TO_OWN_LIMIT * result.limit_size
    return result.network_distance <= CLOSE_TO_OWN_LIMIT and judgeable
