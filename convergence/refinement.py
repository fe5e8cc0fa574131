"""One refinement engine: a computation evaluated at levels n (steps per unit, grid
points per axis) refined towards its limit, each level measured against a truth (a
reference, an exact solution, or the next finer level), with the floor below which a
level's distance is rounding and not discretisation (docs/orders.md section 4).

The time-step, grid and precision studies build their levels with `refine` and fit
their orders with `Refinement.estimate`; a floor is `rounding_floor` of the number
system the levels were computed in, never a number written for float64.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from convergence.order import OrderEstimate, estimate_order
from solvers.errors import InvalidInputError

FLOOR_ROUNDOFFS = 100
"""A level within a factor 10 (estimate_order's floor_factor) of this many unit roundoffs
of the solution's size is at the precision floor: the rounding of a solve of tens to
thousands of operations per entry, each of at most one unit roundoff."""


def rounding_floor(unit_roundoff: float, size: float, roundoffs: float = FLOOR_ROUNDOFFS) -> float:
    """`roundoffs` unit roundoffs of a solution of max-abs `size`: the distance below which
    a level is rounding in a number system of that unit roundoff."""
    return roundoffs * unit_roundoff * size


@dataclass(frozen=True)
class Refinement:
    """Levels (coarse to fine), the value computed at each, what each was measured against
    and the distance between the two, with the floor (absolute) the order fit leaves out.
    Against successive differences the finest level has no entry of its own: it is the
    truth of the one before."""

    levels: list[int]
    values: list[Any]
    truths: list[Any]
    distances: list[float]
    floor: float = 0.0
    floor_name: str = "precision floor"

    @property
    def hs(self) -> list[float]:
        """The step of each level, 1 / n."""
        return [1 / n for n in self.levels]

    def floored(self, floor: float, name: str = "precision floor") -> Refinement:
        """This refinement with its floor set."""
        return dataclasses.replace(self, floor=floor, floor_name=name)

    def estimate(self, expected: float | None = None, **options) -> OrderEstimate:
        """The order of the distances in h = 1 / n (estimate_order, its floor this one's)."""
        return estimate_order(
            self.hs,
            self.distances,
            expected=expected,
            floor=self.floor,
            floor_name=self.floor_name,
            **options,
        )


def refine(
    compute: Callable[[int], Any],
    levels: Sequence[int],
    distance: Callable[[Any, Any], float],
    *,
    truth: Any = None,
    successive: bool = False,
) -> Refinement:
    """`compute(n)` at each level n (sorted coarse to fine), each measured by
    `distance(value, truth)` against `truth`, or with `successive` against the next finer
    level (the finest level then has no entry: n_i's distance is to n_i+1)."""
    if successive == (truth is not None):
        raise InvalidInputError("a refinement needs either a truth or successive=True")
    levels = sorted(int(n) for n in levels)
    values = [compute(n) for n in levels]
    if successive:
        truths, values, levels = values[1:], values[:-1], levels[:-1]
    else:
        truths = [truth] * len(values)
    distances = [float(distance(v, t)) for v, t in zip(values, truths, strict=True)]
    return Refinement(levels, values, truths, distances)
