"""Does refining the time step lead anywhere? The Cauchy test and the collapse test.

`limit_check` solves a problem with one method at increasing steps per unit and
measures at the final time, on the real tokens (a padding mask's others are seen by
nobody), the Cauchy differences of successive levels (their order fitted by
`estimate_order`) and the evidence of a collapse (docs/limits.md section 4): the token
spread, the number of distinct final tokens, the fixed-point defect of the last layer's
two norms (post-LN), and the sensitivity of the final state to u0. A refinement whose
final state forgets u0, or whose tokens fall onto one point, has no meaningful limit:
NO-LIMIT "degenerate", whether the tokens meet at one point or at several. Differences
that do not shrink are "not Cauchy" only where the levels can tell (docs/limits.md
section 7); otherwise the verdict is UNDECIDED with what would decide it, and with
`max_steps_per_unit` the check first refines on its own, doubling the finest level up to
that budget.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage

from convergence.order import OrderEstimate, OrderVerdict, estimate_order
from solvers import Problem, backend, solve
from solvers.backends import Backend
from solvers.equation.flow import LayerFlow
from solvers.errors import InvalidInputError
from solvers.results.provenance import Provenance, timed

COLLAPSE = 1e-6
"""Relative token spread below which (and this far below its largest) the tokens have
fallen onto one point."""
FORGETS = 1e-2
"""Sensitivity to u0 at the finest level below this fraction of its largest over the
levels: the refined solutions forget the data."""
PERTURBATION = 1e-6
"""Size of the perturbation of u0 (relative to max |u0|) that measures the sensitivity."""
DISTINCT = 1e-6
"""Two final tokens are one point when they differ by at most this, relative to max |u|."""
RESOLVED = 0.1
"""Successive refinements that land more than this share of max |u| apart do not resolve
the flow yet: differences that do not shrink there are no evidence against a limit."""
SETTLED = 0.5
"""A collapse indicator (spread, sensitivity, fixed-point defect) whose finest value is
below this share of its largest over the last three levels is still falling: a collapse
may be under way, and the check cannot call the sequence not Cauchy."""


@dataclass(frozen=True)
class LimitCheck(Provenance):
    """Per refinement level: Cauchy differences to the next level, token spread, number
    of distinct final tokens, fixed-point defect (post-LN, else None) and sensitivity to
    u0; the order estimate of the differences and the verdict with its reason. Levels
    the check added on its own (up to `max_steps_per_unit`) are in `steps_per_unit` and
    `refined`."""

    method: str
    steps_per_unit: list[int]
    cauchy_differences: list[float]
    spread: list[float]
    clusters: list[int]
    fixed_point_defect: list[float] | None
    sensitivity: list[float]
    estimate: OrderEstimate
    verdict: OrderVerdict
    reason: str
    precision: str
    refined: list[int]
    """The levels added on its own beyond the requested ones (empty if none)."""
    max_steps_per_unit: int | None
    """The budget of that refinement (None: the requested levels only)."""


def _real(u: np.ndarray, real: np.ndarray | None) -> np.ndarray:
    """Which rows of u (..., N, d) are real tokens: `real` (a padding mask) broadcast, or
    all."""
    return np.ones(u.shape[:-1], bool) if real is None else np.broadcast_to(real, u.shape[:-1])


def token_spread(u: np.ndarray, real: np.ndarray | None = None) -> float:
    """max |u_i - mean_j u_j| over real tokens i (and batch entries), the mean over the real
    tokens j of each entry, relative to max |u| on the real tokens."""
    real = _real(u, real)
    mean = (u * real[..., None]).sum(axis=-2, keepdims=True) / real.sum(-1)[..., None, None]
    return float(np.abs(u - mean)[real].max() / np.abs(u[real]).max())


def distinct_tokens(
    u: np.ndarray, tolerance: float = DISTINCT, real: np.ndarray | None = None
) -> int:
    """How many distinct points the real final tokens (rows of every batch entry) form:
    rows closer than `tolerance` max |u| in max-norm, chained, are one point."""
    rows = u[_real(u, real)]
    if len(rows) == 1:
        return 1
    tree = linkage(rows, method="single", metric="chebyshev")
    return int(fcluster(tree, tolerance * np.abs(rows).max(), criterion="distance").max())


def _fixed_point_defect(problem: Problem, bk: Backend, u: np.ndarray) -> float:
    """max |P2(P1(u)) - u| on the real tokens for the last layer's norms P1, P2, in bk
    (active)."""
    flow, last = LayerFlow.from_problem(problem, bk), len(problem.controls) - 1
    start = bk.asarray(last)
    normed = flow.project(last, start, flow.project(last, start, u, 1), 2)
    defect = np.abs(bk.to_float64(normed - u))
    return float(defect[_real(defect, problem.mask)].max())


def _perturbed(problem: Problem) -> tuple[Problem, float]:
    """The problem from u0 + delta (a seeded direction, max |delta| = PERTURBATION max |u0|)."""
    direction = np.random.default_rng(0).uniform(-1, 1, problem.u0.shape)
    delta = PERTURBATION * np.abs(problem.u0).max() * direction / np.abs(direction).max()
    return dataclasses.replace(problem, u0=problem.u0 + delta), float(np.abs(delta).max())


@timed
def limit_check(
    problem: Problem,
    steps_per_unit: Sequence[int],
    *,
    method: str = "lie",
    precision: str | Backend = "float64",
    collapse: float = COLLAPSE,
    max_steps_per_unit: int | None = None,
) -> LimitCheck:
    """Classify the sequence of refined solutions (see the module docstring). With
    `max_steps_per_unit`, an UNDECIDED sequence is refined further, one doubling of the
    finest level at a time, until it is decided or the next level would pass the budget."""
    steps = sorted(int(m) for m in steps_per_unit)
    if len(steps) < 4 or len(set(steps)) != len(steps):
        raise InvalidInputError(
            f"a limit check needs at least 4 distinct step counts (3 differences), got {steps}"
        )
    if not 0 < collapse < 1:
        raise InvalidInputError(f"collapse must lie in (0, 1), got {collapse!r}")
    if max_steps_per_unit is not None and max_steps_per_unit < steps[-1]:
        raise InvalidInputError(
            f"max_steps_per_unit must be at least the finest level {steps[-1]}, got "
            f"{max_steps_per_unit}"
        )
    if problem.manufactured is not None:
        raise InvalidInputError("a limit check needs a problem without a manufactured forcing")
    bk = backend(precision)
    shifted, size = _perturbed(problem)
    real = _real(problem.u0, problem.mask)
    levels: list[_Level] = []
    for m in steps:
        levels.append(_Level.measure(problem, shifted, size, method, m, bk, real, levels))
    requested = len(steps)
    while True:
        verdict, estimate, reason = _verdict(levels, collapse)
        finer = 2 * steps[-1]
        if verdict != OrderVerdict.UNDECIDED or max_steps_per_unit is None:
            break
        if finer > max_steps_per_unit:
            reason += f"; undecided up to the budget of {max_steps_per_unit} steps per unit"
            break
        steps.append(finer)
        levels.append(_Level.measure(problem, shifted, size, method, finer, bk, real, levels))
    if len(steps) > requested:
        reason += (
            f" (refined on its own from {steps[requested - 1]} to {steps[-1]} steps per unit, "
            f"budget {max_steps_per_unit})"
        )
    differences = [level.difference for level in levels[1:]]
    return LimitCheck(
        method=method,
        steps_per_unit=steps,
        cauchy_differences=differences,
        spread=[level.spread for level in levels],
        clusters=[level.clusters for level in levels],
        fixed_point_defect=None if not problem.norm.constrained else [lv.defect for lv in levels],
        sensitivity=[level.sensitivity for level in levels],
        estimate=estimate,
        verdict=verdict,
        reason=reason,
        precision=repr(bk),
        refined=steps[requested:],
        max_steps_per_unit=max_steps_per_unit,
    )


@dataclass(frozen=True)
class _Level:
    """What one refinement level measures at the final time, on the real tokens."""

    steps: int
    run: object
    """The final state in the working precision (for the next level's difference)."""
    difference: float | None
    """max |u_m - u_previous| (None at the coarsest level)."""
    size: float
    """max |u_m|."""
    spread: float
    clusters: int
    defect: float | None
    sensitivity: float

    @classmethod
    def measure(cls, problem, shifted, size, method, m, bk, real, before) -> _Level:
        run, moved = solve(problem, method, m, bk), solve(shifted, method, m, bk)
        with bk.active():
            state = bk.to_float64(run)
            difference = (
                None
                if not before
                else float(np.abs(bk.to_float64(run - before[-1].run))[real].max())
            )
            sensitivity = float(np.abs(bk.to_float64(moved - run))[real].max()) / size
            defect = _fixed_point_defect(problem, bk, run) if problem.norm.constrained else None
        return cls(
            m,
            run,
            difference,
            float(np.abs(state[real]).max()),
            token_spread(state, real),
            distinct_tokens(state, real=real),
            defect,
            sensitivity,
        )


def _verdict(levels: list[_Level], collapse: float) -> tuple[OrderVerdict, OrderEstimate, str]:
    """Degenerate (the tokens fell onto one point, or the final state forgot u0: its
    sensitivity fell below FORGETS of its largest); else the order estimate of the Cauchy
    differences when they shrink; else not Cauchy where the levels can tell (the
    refinements resolve the flow: successive ones land within RESOLVED of the state's size;
    and no collapse indicator is still falling: SETTLED), UNDECIDED otherwise
    (docs/limits.md section 7)."""
    spread = [level.spread for level in levels]
    sensitivity = [level.sensitivity for level in levels]
    defects = None if levels[0].defect is None else [level.defect for level in levels]
    differences = [level.difference for level in levels[1:]]
    estimate = estimate_order([1 / level.steps for level in levels[:-1]], differences)
    one_point = spread[-1] < collapse and spread[-1] < collapse * max(spread)
    forgets = sensitivity[-1] <= FORGETS * max(sensitivity)
    if one_point or forgets:
        evidence = []
        if forgets:
            evidence.append(
                f"the final state forgets u0 (its sensitivity to u0 falls from "
                f"{max(sensitivity):.3g} to {sensitivity[-1]:.3g}, below {FORGETS:g} of its "
                "largest)"
            )
        if one_point:
            evidence.append(
                f"the tokens fall onto one point (spread {max(spread):.3g} -> {spread[-1]:.3g})"
            )
        elif levels[-1].clusters < levels[0].clusters:
            evidence.append(
                f"the tokens fall onto {levels[-1].clusters} distinct points (from "
                f"{levels[0].clusters})"
            )
        if defects is not None:
            evidence.append(
                f"the fixed-point defect |P2(P1(u)) - u| falls from {max(defects):.3g} to "
                f"{defects[-1]:.3g}"
            )
        return OrderVerdict.NO_LIMIT, estimate, "degenerate: " + "; ".join(evidence)
    if estimate.verdict != OrderVerdict.NO_LIMIT:
        return estimate.verdict, estimate, f"Cauchy: {estimate.reason}"
    listed = ", ".join(f"{c:.3g}" for c in differences)
    apart = differences[-1] / levels[-1].size
    if apart > RESOLVED:
        return (
            OrderVerdict.UNDECIDED,
            estimate,
            (
                f"undecided at these levels: the successive differences {listed} do not shrink, "
                f"but the finest pair still lands {apart:.2g} of the state's size apart (more "
                f"than {RESOLVED:g}), so the steps do not resolve the flow yet; finer levels "
                "would decide"
            ),
        )
    falling = [
        f"the {name} falls from {max(values[-3:]):.3g} to {values[-1]:.3g}"
        for name, values in (
            ("token spread", spread),
            ("sensitivity to u0", sensitivity),
            ("fixed-point defect", defects),
        )
        if values is not None and values[-1] < SETTLED * max(values[-3:])
    ]
    if falling:
        return (
            OrderVerdict.UNDECIDED,
            estimate,
            (
                f"undecided at these levels: the successive differences {listed} do not shrink, "
                f"but a collapse may be under way ({'; '.join(falling)} over the last three "
                "levels); finer levels would decide"
            ),
        )
    return (
        OrderVerdict.NO_LIMIT,
        estimate,
        (
            f"not Cauchy: the successive differences {listed} do not shrink ({estimate.reason}), "
            f"although the finest pair lands within {apart:.2g} of the state's size and no "
            "collapse indicator is falling"
        ),
    )
