"""A trained network run in other number systems: how far rounding moves its outputs and
its decisions, beside how far the limit moves them (docs/networks.md section 7).

The network (Lie at dt = 1) is solved in each precision asked for (bfloat16, float16,
float32, or more digits) from the same float64 initial states and compared with its
float64 solve: the relative distance max |U_p - U_64| / max |U_64| over the real tokens
(and per input, over the batch), and the decisions that differ from the float64
network's own. Rounding and the time step are then measured on one scale: a decision
that bfloat16 changes as often as the limit does is not evidence about the flow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from convergence.network_limit.batch import Share, Spread, per_input_distance, spread
from solvers import Problem, solve
from solvers.backends import Backend


@dataclass(frozen=True)
class RoundedNetwork:
    """The network at dt = 1 in one number system, against its float64 solve."""

    precision: str
    unit_roundoff: float
    relative_distance: float
    """max |U_p - U_64| / max |U_64| over the real tokens at the final time."""
    distance_spread: Spread
    """The same per input, over the batch."""
    decisions_changed: Share | None
    """Decisions that differ from the float64 network's own (None: the readout takes none)."""
    within_reach: int | None
    """Decisions of the float64 network whose leader a move of every state entry by the
    measured max |U_p - U_64| could change (Readout.margins, first order): the changes
    rounding of this size can make at all, on this batch."""
    accuracy: float | None
    loss: float | None


def rounded_networks(
    problem: Problem,
    precisions: Sequence[Backend],
    network: np.ndarray,
    real: np.ndarray,
    judge: Callable[[np.ndarray], tuple[Share | None, float | None, float | None]],
    reach: Callable[[float], int | None],
) -> list[RoundedNetwork]:
    """The network of `problem` at dt = 1 in each of `precisions`, against its float64 final
    states `network`; `judge` maps final states to (decisions changed against the float64
    network's own, accuracy, loss), `reach` a max-abs move of the states to the number of
    the float64 network's decisions it could change."""
    size = float(np.abs(network[real]).max())
    rounded = []
    for bk in precisions:
        states = np.asarray(solve(problem, "lie", 1, backend=bk), dtype=np.float64)
        per_input = per_input_distance(states, network, real, size)
        changed, accuracy, loss = judge(states)
        rounded.append(
            RoundedNetwork(
                repr(bk),
                float(bk.unit_roundoff),
                float(per_input.max()),
                spread(per_input),
                changed,
                reach(float(per_input.max()) * size),
                accuracy,
                loss,
            )
        )
    return rounded
