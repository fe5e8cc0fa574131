"""Does refining the time step lead anywhere? The Cauchy test and the collapse test.

`limit_check` solves a problem with one method at increasing steps per unit and
measures at the final time the Cauchy differences of successive levels (their order
fitted by `estimate_order`) and the evidence of a collapse (docs/limits.md section 4): the
token spread, the number of distinct final tokens, the fixed-point defect of the last
layer's two norms (post-LN), and the sensitivity of the final state to u0. A refinement
whose final state forgets u0, or whose tokens fall onto one point, has no meaningful
limit: NO-LIMIT "degenerate", whether the tokens meet at one point or at several.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage

from convergence.order import OrderEstimate, OrderVerdict, estimate_order
from solvers import Problem, backend, solve
from solvers.backends import Backend
from solvers.errors import InvalidInputError
from solvers.flow import LayerFlow
from solvers.provenance import Provenance

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


@dataclass(frozen=True)
class LimitCheck(Provenance):
    """Per refinement level: Cauchy differences to the next level, token spread, number
    of distinct final tokens, fixed-point defect (post-LN, else None) and sensitivity to
    u0; the order estimate of the differences and the verdict with its reason."""

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


def token_spread(u: np.ndarray) -> float:
    """max |u_i - mean_j u_j| over tokens i (and batch entries), relative to max |u|."""
    return float(np.abs(u - u.mean(axis=-2, keepdims=True)).max() / np.abs(u).max())


def distinct_tokens(u: np.ndarray, tolerance: float = DISTINCT) -> int:
    """How many distinct points the final tokens (rows of every batch entry) form: rows
    closer than `tolerance` max |u| in max-norm, chained, are one point."""
    rows = u.reshape(-1, u.shape[-1])
    if len(rows) == 1:
        return 1
    tree = linkage(rows, method="single", metric="chebyshev")
    return int(fcluster(tree, tolerance * np.abs(rows).max(), criterion="distance").max())


def _fixed_point_defect(problem: Problem, bk: Backend, u: np.ndarray) -> float:
    """max |P2(P1(u)) - u| for the last layer's norms P1, P2, in bk (active)."""
    flow, last = LayerFlow.from_problem(problem, bk), len(problem.controls) - 1
    start = bk.asarray(last)
    normed = flow.project(last, start, flow.project(last, start, u, 1), 2)
    return float(np.abs(bk.to_float64(normed - u)).max())


def _perturbed(problem: Problem) -> tuple[Problem, float]:
    """The problem from u0 + delta (a seeded direction, max |delta| = PERTURBATION max |u0|)."""
    direction = np.random.default_rng(0).uniform(-1, 1, problem.u0.shape)
    delta = PERTURBATION * np.abs(problem.u0).max() * direction / np.abs(direction).max()
    return dataclasses.replace(problem, u0=problem.u0 + delta), float(np.abs(delta).max())


def limit_check(
    problem: Problem,
    steps_per_unit: Sequence[int],
    *,
    method: str = "lie",
    precision: str | Backend = "float64",
    collapse: float = COLLAPSE,
) -> LimitCheck:
    """Classify the sequence of refined solutions (see the module docstring)."""
    steps = sorted(int(m) for m in steps_per_unit)
    if len(steps) < 4 or len(set(steps)) != len(steps):
        raise InvalidInputError(
            f"a limit check needs at least 4 distinct step counts (3 differences), got {steps}"
        )
    if not 0 < collapse < 1:
        raise InvalidInputError(f"collapse must lie in (0, 1), got {collapse!r}")
    if problem.manufactured is not None:
        raise InvalidInputError("a limit check needs a problem without a manufactured forcing")
    started = time.perf_counter()
    bk = backend(precision)
    runs = [solve(problem, method, m, bk) for m in steps]
    shifted, size = _perturbed(problem)
    moved = [solve(shifted, method, m, bk) for m in steps]
    with bk.active():
        differences = [
            float(np.abs(bk.to_float64(fine - coarse)).max()) for coarse, fine in pairwise(runs)
        ]
        states = [bk.to_float64(u) for u in runs]
        sensitivity = [
            float(np.abs(bk.to_float64(v - u)).max()) / size
            for u, v in zip(runs, moved, strict=True)
        ]
        defects = (
            [_fixed_point_defect(problem, bk, u) for u in runs] if problem.norm == "post" else None
        )
    spread = [token_spread(u) for u in states]
    clusters = [distinct_tokens(u) for u in states]
    estimate = estimate_order([1 / m for m in steps[:-1]], differences)
    verdict, reason = _verdict(
        estimate, differences, spread, clusters, defects, sensitivity, collapse
    )
    return LimitCheck(
        method=method,
        steps_per_unit=steps,
        cauchy_differences=differences,
        spread=spread,
        clusters=clusters,
        fixed_point_defect=defects,
        sensitivity=sensitivity,
        estimate=estimate,
        verdict=verdict,
        reason=reason,
        precision=repr(bk),
        wall_time=time.perf_counter() - started,
    )


def _verdict(
    estimate: OrderEstimate,
    differences: list[float],
    spread: list[float],
    clusters: list[int],
    defects: list[float] | None,
    sensitivity: list[float],
    collapse: float,
) -> tuple[OrderVerdict, str]:
    """Degenerate (the tokens fell onto one point, or the final state forgot u0: its
    sensitivity fell below FORGETS of its largest), else not Cauchy, else the order
    estimate of the differences."""
    one_point = spread[-1] < collapse and spread[-1] < collapse * max(spread)
    forgets = sensitivity[-1] <= FORGETS * max(sensitivity)
    if one_point or forgets:
        defect = (
            ""
            if defects is None
            else f"; the fixed-point defect |P2(P1(u)) - u| falls from {max(defects):.3g} to "
            f"{defects[-1]:.3g}"
        )
        return OrderVerdict.NO_LIMIT, (
            f"degenerate: under refinement the tokens fall onto {clusters[-1]} point(s) "
            f"(spread {max(spread):.3g} -> {spread[-1]:.3g}){defect}; the sensitivity of the "
            f"final state to u0 falls from {max(sensitivity):.3g} to {sensitivity[-1]:.3g}"
        )
    if estimate.verdict == OrderVerdict.NO_LIMIT:
        listed = ", ".join(f"{c:.3g}" for c in differences)
        return OrderVerdict.NO_LIMIT, (
            f"not Cauchy: successive differences {listed} ({estimate.reason})"
        )
    return estimate.verdict, f"Cauchy: {estimate.reason}"
