"""Decisions of the limit that an enclosure proves (docs/enclosures.md section 7)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solvers.backends import backend as number_system
from solvers.enclosure.solver import Enclosure
from solvers.errors import InvalidInputError
from solvers.network.readout import Readout

_above = np.frompyfunc(lambda a, b: bool(a > b), 2, 1)


@dataclass(frozen=True)
class CertifiedDecisions:
    """Per judged decision, flat in the order of Judged.decisions (one per input, or one
    per real token for an LM head): `leader`, the class with the largest score midpoint
    in the limit, and `certified`, whether its score ball lies above every other class's
    ball, so that the exact limit's decision is the leader."""

    leader: np.ndarray
    certified: np.ndarray

    def against(self, decisions: np.ndarray) -> dict[str, int]:
        """Counts against another run's decisions (the network's): certified the same,
        certified changed (the limit provably decides otherwise), and uncertain."""
        same = self.leader == np.asarray(decisions)
        return {
            "certified": int(np.sum(self.certified)),
            "certified same": int(np.sum(self.certified & same)),
            "certified changed": int(np.sum(self.certified & ~same)),
            "uncertain": int(np.sum(~self.certified)),
        }


def certified_decisions(
    readout: Readout, enclosure: Enclosure, mask: np.ndarray | None = None
) -> CertifiedDecisions:
    """The readout's decisions at the enclosure's final boundary, each certified where the
    leader's score ball lies above every other (the scores computed in arb balls from the
    state balls, so they contain the exact limit's scores)."""
    if not readout.classifies:
        raise InvalidInputError("this readout has no classifier: no decisions to certify")
    arb = number_system("arb", enclosure.digits)
    with arb.active():
        scores = np.asarray(readout(enclosure.states[-1], mask, arb), dtype=object)
        leader = np.argmax(arb.to_float64(scores), axis=-1)
        best = np.take_along_axis(scores, leader[..., None], axis=-1)
        above = np.asarray(_above(best, scores), dtype=bool)
    others = np.arange(scores.shape[-1]) != leader[..., None]
    certified = np.all(above | ~others, axis=-1)
    if readout.next_token:  # the real positions, row-major, as Readout.judge takes them
        real = np.broadcast_to(True if mask is None else np.asarray(mask, bool), leader.shape)
        return CertifiedDecisions(leader[real], certified[real])
    return CertifiedDecisions(leader.ravel(), certified.ravel())
