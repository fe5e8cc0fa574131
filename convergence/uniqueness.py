"""Uniqueness of the time-step limit: different methods and precisions converge together.

Each run (method, precision) solves the problem at increasing steps_per_unit m_k. For
two runs of different methods the differences D_k = max|u_a(m_k) - u_b(m_k)| must
shrink at the order min(p_a, p_b), fitted by `estimate_order` with the rounding floor
the two runs' allowances at the finest level (SOLVE_ALLOWANCE roundings of the
state's size per step, a stated allowance, not a proven bound); PASS, SUPERCONVERGENT or
FLOOR (the differences reach rounding) mean the same limit. Two runs of one method in
different precisions compute the same discrete solutions: their differences stay within
the sum of the two runs' rounding allowances at every level. Verdicts: `LimitVerdict`.

The methods' orders are their orders on the problem's norm placement
(SteppingMethod.order).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import combinations
from typing import Any

import numpy as np

from convergence.order import OrderEstimate, OrderVerdict
from convergence.refinement import Refinement
from solvers import Problem, backend, solve
from solvers.backends import Backend
from solvers.errors import InvalidInputError
from solvers.methods.driver import layer_lengths
from solvers.methods.stepping import SteppingMethod
from solvers.results.allowances import solve_allowance
from solvers.results.provenance import Provenance, timed
from solvers.solving import METHODS
from solvers.validation import choice, positive_int

SAME_LIMIT_VERDICTS = frozenset(
    {OrderVerdict.PASS, OrderVerdict.SUPERCONVERGENT, OrderVerdict.FLOOR}
)
"""Verdicts of estimate_order that show two runs share their limit."""


class LimitVerdict(StrEnum):
    """Whether two runs (or all of them) converge to the same limit."""

    SAME = "same limit"
    DIFFERENT = "different limits"


@dataclass(frozen=True)
class PairDifference:
    """Two runs' differences max|u_a(m_k) - u_b(m_k)| over the levels, and the verdict.

    Different methods: `estimate` (estimate_order's result, expected order
    min(p_a, p_b)); same method: `allowance` (the rounding allowance at every level).
    """

    first: str
    second: str
    expected_order: float | None
    differences: list[float]
    estimate: OrderEstimate | None
    allowance: list[float] | None
    verdict: LimitVerdict
    reason: str


@dataclass(frozen=True)
class Uniqueness(Provenance):
    """Every run (method @ precision) at every level, and every pair's differences."""

    runs: list[str]
    orders: dict[str, int]
    steps_per_unit: list[int]
    pairs: list[PairDifference]
    verdict: LimitVerdict
    inputs: dict[str, Any]

    def pair(self, first: str, second: str) -> PairDifference:
        """The pair of these two run labels (in either order)."""
        for entry in self.pairs:
            if {entry.first, entry.second} == {first, second}:
                return entry
        raise InvalidInputError(f"no pair {first!r}, {second!r}; runs: {self.runs}")


@timed
def uniqueness_study(
    problem: Problem,
    *,
    methods: Sequence[str | SteppingMethod] = ("lie", "strang-rk2", "projected-rk4"),
    precisions: Sequence[str | Backend] | None = None,
    steps_per_unit: Sequence[int] = (4, 8, 16, 32, 64),
) -> Uniqueness:
    """Do different methods and precisions converge to the same limit? (module docstring)

    `precisions` default to float64 and mpmath with 30 digits. At least two runs, and at
    least 3 distinct positive step counts.
    """
    if not isinstance(problem, Problem):
        raise InvalidInputError(f"problem must be a Problem, got {type(problem).__name__}")
    resolved = []
    for method in methods:
        if isinstance(method, SteppingMethod):
            resolved.append(method)
        else:
            resolved.append(METHODS[choice("method", method, tuple(METHODS))])
    if not resolved:
        raise InvalidInputError("methods must name at least one method, got none")
    chosen = ("float64", backend("mpmath", 30)) if precisions is None else tuple(precisions)
    if not chosen:
        raise InvalidInputError("precisions must name at least one precision, got none")
    backends = [backend(p) for p in chosen]
    levels = [positive_int("steps_per_unit entry", m) for m in steps_per_unit]
    levels = sorted(set(levels))
    if len(levels) < 3:
        raise InvalidInputError(
            f"steps_per_unit needs at least 3 distinct step counts (to fit an order), got {levels}"
        )
    runs = [(m, bk) for m in resolved for bk in backends]
    if len(runs) < 2:
        raise InvalidInputError("a uniqueness study needs at least two runs (methods x precisions)")
    labels = [f"{m.name}@{bk!r}" for m, bk in runs]

    lengths = layer_lengths(problem.t_final)
    solutions, allowances = {}, {}
    for label, (method, bk) in zip(labels, runs, strict=True):
        solutions[label] = [solve(problem, method, m, bk) for m in levels]
        size = max(float(np.max(np.abs(np.asarray(u, dtype=float)))) for u in solutions[label])
        allowances[label] = [
            solve_allowance(bk.unit_roundoff, sum(math.ceil(x * m) for x in lengths), size)
            for m in levels
        ]
    pairs = []
    for (a, (method_a, _)), (b, (method_b, _)) in combinations(zip(labels, runs, strict=True), 2):
        differences = [
            float(np.max(np.abs(np.asarray(x - y, dtype=float))))
            for x, y in zip(solutions[a], solutions[b], strict=True)
        ]
        floor = [x + y for x, y in zip(allowances[a], allowances[b], strict=True)]
        if method_a is method_b:
            within = all(x <= y for x, y in zip(differences, floor, strict=True))
            verdict = LimitVerdict.SAME if within else LimitVerdict.DIFFERENT
            pairs.append(
                PairDifference(
                    a,
                    b,
                    None,
                    differences,
                    None,
                    floor,
                    verdict,
                    "one method in two precisions: differences "
                    + ("within" if within else "above")
                    + " the rounding allowance",
                )
            )
            continue
        expected = float(min(method_a.order(problem.norm), method_b.order(problem.norm)))
        paired = Refinement(levels, solutions[a], solutions[b], differences, max(floor))
        estimate = paired.estimate(expected)
        same = estimate.verdict in SAME_LIMIT_VERDICTS
        pairs.append(
            PairDifference(
                a,
                b,
                expected,
                differences,
                estimate,
                None,
                LimitVerdict.SAME if same else LimitVerdict.DIFFERENT,
                f"differences shrink at order {estimate.order:.3g} (expected {expected:g}): "
                f"{estimate.verdict}",
            )
        )
    return Uniqueness(
        runs=labels,
        orders={
            label: method.order(problem.norm)
            for label, (method, _) in zip(labels, runs, strict=True)
        },
        steps_per_unit=levels,
        pairs=pairs,
        verdict=(
            LimitVerdict.SAME
            if all(p.verdict == LimitVerdict.SAME for p in pairs)
            else LimitVerdict.DIFFERENT
        ),
        inputs={
            "norm": problem.norm,
            "shape": list(problem.u0.shape),
            "t_final": problem.t_final,
            "methods": [m.name for m in resolved],
            "precisions": [repr(bk) for bk in backends],
        },
    )
