"""The decisions of a network's limit against the network's own: which changed, which the
limit's own error leaves uncertain, how near a tie they were, and which classes they fall
on (docs/networks.md section 7).

The limit is known to within its assessed error E (max-abs over the final states). A
decision of the limit whose leader could be overtaken by another class when every state
entry moves by E (Readout.margins, to first order in E) is uncertain: it is counted
apart, neither changed nor unchanged. The network's own decisions are a float64 solve of
the network itself, exact to its rounding. A change on a near tie (random logits) says
less than one on a decisive margin, so the medians of the network's own gaps over the
changed and the unchanged decisions are kept beside the counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from convergence.network_limit.batch import Share, Spread, share, spread
from solvers.network.readout import Readout

TOP_CLASSES = 10
"""How many of the most decided classes a record names (an LM's vocabulary is large)."""


@dataclass(frozen=True)
class Classes:
    """Which classes a set of decisions falls on: the most decided first."""

    top: list[tuple[int, int]]
    """(class, decisions) of the TOP_CLASSES most decided classes."""
    others: int
    """Decisions on the other classes."""

    @property
    def leader_share(self) -> float:
        """The most decided class's share of all the decisions."""
        total = self.others + sum(count for _, count in self.top)
        return self.top[0][1] / total


def classes(decisions: np.ndarray) -> Classes:
    """The histogram of `decisions` (class indices), most decided first, ties by class."""
    values, counts = np.unique(np.asarray(decisions), return_counts=True)
    ranked = sorted(zip(values.tolist(), counts.tolist(), strict=True), key=lambda p: (-p[1], p[0]))
    top = [(int(c), int(n)) for c, n in ranked[:TOP_CLASSES]]
    return Classes(top, int(sum(n for _, n in ranked[TOP_CLASSES:])))


@dataclass(frozen=True)
class LimitDecisions:
    """The limit's decisions against the network's own, split by the limit's margin."""

    changed: Share
    """Decisions that differ from the network's own where the limit's margin exceeds what
    its error can move, with the Wilson interval of their share."""
    uncertain: int
    """Decisions whose leader the limit's error could change: neither changed nor kept."""
    unchanged: int
    score_error: float
    """The largest first-order bound of a score's error from the limit's error,
    max over decisions and classes of E b_v (Readout.sensitivity)."""
    own_gap: Spread
    """The network's own leader-over-runner-up gaps, over every decision."""
    changed_gap: float | None
    """The median of the network's own gap over the changed decisions (None: none changed)."""
    unchanged_gap: float | None
    """The median of the network's own gap over the unchanged decisions (None: none)."""


def limit_decisions(
    readout: Readout,
    network: np.ndarray,
    limit: np.ndarray,
    mask: np.ndarray | None,
    error: float,
) -> LimitDecisions:
    """The split of the limit's decisions (final states `limit`, max-abs error `error`)
    against the network's own (final states `network`), on the judged positions of `mask`."""
    own, there = readout.margins(network, mask), readout.margins(limit, mask, error)
    own_choice = readout.judge(network, mask).decisions
    differ = readout.judge(limit, mask).decisions != own_choice
    changed = differ & ~there.uncertain
    kept = ~differ & ~there.uncertain
    sensitivity = readout.sensitivity(limit, mask)

    def median(selected: np.ndarray) -> float | None:
        return float(np.median(own.gap[selected])) if selected.any() else None

    return LimitDecisions(
        share(int(changed.sum()), len(differ)),
        int(there.uncertain.sum()),
        int(kept.sum()),
        float(error * sensitivity.max()),
        spread(own.gap),
        median(changed),
        median(kept),
    )
