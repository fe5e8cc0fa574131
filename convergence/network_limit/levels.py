"""One method refined level by level towards the limit, and what its sequence of distances
shows: whether it decreases, where its asymptotic range starts, and its order there
(docs/networks.md sections 3 and 7).

Far from the limit a refined network's distance need not behave like C dt^p: it may sit
on a plateau (0.86, 0.83, 0.83 up to 64 steps per unit, then 0.052 at 256) or rise and
fall. With a budget (`max_steps_per_unit`) the levels are doubled past the finest one
asked for until FIT_LEVELS of them lie within ASYMPTOTIC of the limit, so that an order
can be fitted there; without one, the levels asked for are all there is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from convergence.network_limit.batch import Share, Spread
from convergence.network_limit.decisions import Classes
from convergence.order import OrderEstimate, estimate_order

ASYMPTOTIC = 0.1
"""A level whose relative distance from the limit exceeds this is far outside the range
where the error behaves like C dt^p: it is left out of the order fit (docs/networks.md
section 3)."""
FIT_LEVELS = 3
"""How many levels within ASYMPTOTIC an order fit needs (the estimator's minimum)."""


@dataclass(frozen=True)
class Level:
    """What one solve of the network (a method at a level, or the limit) measured."""

    distance: float | None
    """max |U - U_limit| / max |U_limit| over the real tokens (None without a limit)."""
    spread: Spread | None
    """The same per input, over the batch (batch.per_input_distance)."""
    changed: Share | None
    """Decisions that differ from the network's own (None when the readout takes none)."""
    classes: Classes | None
    accuracy: float | None
    loss: float | None


@dataclass(frozen=True)
class MethodLevels:
    """One method at each level of steps per unit."""

    method: str
    steps_per_unit: list[int]
    """The levels measured: those asked for, then the doublings the refinement added."""
    refined: int
    """How many of the levels the refinement added past the finest one asked for."""
    relative_distance: list[float] | None
    """max |U_m - U_limit| / max |U_limit| at the final time (None without a limit)."""
    distance_spread: list[Spread] | None
    """Per level, the median and range over the batch of each input's distance."""
    decisions_changed: list[Share] | None
    """How many of the judged decisions differ from the network's own (dt = 1)."""
    classes: list[Classes] | None
    """Per level, which classes the decisions fall on."""
    accuracy: list[float] | None
    """The share of decisions equal to their targets (None without targets)."""
    loss: list[float] | None
    """The readout's cross-entropy against the targets, in nats (None without targets)."""
    rises: list[int]
    """The levels whose distance exceeds the next coarser level's: the sequence is not
    monotone where this is not empty."""
    asymptotic_from: int | None
    """The coarsest level from which every level is within ASYMPTOTIC and none rises (None
    when the finest does not qualify, or without a limit)."""
    order: OrderEstimate | None
    """The fitted order of the relative distances against dt = 1/m over the levels within
    ASYMPTOTIC of the limit, the limit's own relative error as the floor (None without a
    limit, or with fewer than FIT_LEVELS such levels)."""
    expected_order: float | None = None
    """The method's order on the network's flow (SteppingMethod.order), which `order` is
    judged against and the report's slope guide draws."""


def refine(
    steps: Sequence[int], measure: Callable[[int], Level], max_steps_per_unit: int | None
) -> tuple[list[int], list[Level], int]:
    """Every level of `steps` measured, then (with a budget, and a limit to measure against)
    the finest one doubled while fewer than FIT_LEVELS levels lie within ASYMPTOTIC and the
    next doubling is within `max_steps_per_unit`. Returns the levels, their measurements and
    how many were added."""
    levels, measured = list(steps), [measure(m) for m in steps]
    added = 0

    def near() -> int:
        return sum(level.distance <= ASYMPTOTIC for level in measured)

    while (
        max_steps_per_unit is not None
        and measured[0].distance is not None
        and near() < FIT_LEVELS
        and 2 * levels[-1] <= max_steps_per_unit
    ):
        levels.append(2 * levels[-1])
        measured.append(measure(levels[-1]))
        added += 1
    return levels, measured, added


def method_levels(
    method: str,
    steps: list[int],
    measured: list[Level],
    added: int,
    expected: float,
    floor: float | None,
) -> MethodLevels:
    """One method's record from its measured levels: the rises, the start of the asymptotic
    range, and the order over the levels within ASYMPTOTIC (`floor`: the limit's own
    relative error; `expected`: the method's order)."""
    distances = [level.distance for level in measured]
    limited = distances[0] is not None
    rises = (
        []
        if not limited
        else [
            m
            for m, e, coarser in zip(steps[1:], distances[1:], distances[:-1], strict=True)
            if e > coarser
        ]
    )
    order = None
    near = [(m, e) for m, e in zip(steps, distances, strict=True) if limited and e <= ASYMPTOTIC]
    if len(near) >= FIT_LEVELS:
        order = estimate_order(
            [1 / m for m, _ in near],
            [e for _, e in near],
            expected=expected,
            floor=floor,
            floor_name="limit's own error",
        )

    def column(name: str) -> list | None:
        values = [getattr(level, name) for level in measured]
        return None if values[0] is None else values

    return MethodLevels(
        method,
        list(steps),
        added,
        distances if limited else None,
        column("spread"),
        column("changed"),
        column("classes"),
        column("accuracy"),
        column("loss"),
        rises,
        _asymptotic_from(steps, distances) if limited else None,
        order,
        expected,
    )


def _asymptotic_from(steps: list[int], distances: list[float]) -> int | None:
    """The coarsest level from which every distance is within ASYMPTOTIC and decreases."""
    start = None
    for k in range(len(steps) - 1, -1, -1):
        finer_ok = k == len(steps) - 1 or distances[k + 1] <= distances[k]
        if distances[k] > ASYMPTOTIC or not finer_ok:
            break
        start = steps[k]
    return start
