"""Does refining the time step lead anywhere? The Cauchy test and the collapse test.

`limit_check` solves a problem with one method at increasing steps_per_unit m_1 < m_2 <
... and measures, at the final time:

- the Cauchy differences c_i = max |u_{m_i+1} - u_{m_i}|, whose order `estimate_order`
  fits on h = 1 / m_i: a sequence that converges at order p has c_i ~ C h_i^p; one whose
  differences do not decrease (NO-LIMIT) is not Cauchy at these steps;
- the token spread s_i = max_{b,i,k} |u_bik - mean_i u_bik| / max |u|, relative to the
  solution's size: a meaningful limit has the spread of its own solution, while a
  refinement that drives every token onto the same point (s_i -> 0) has a degenerate
  limit that has forgotten the data (docs/limits.md section 4: per-feature LN gain and bias);
- for post-LN problems, the fixed-point defect max |P2(P1(u)) - u| of the last layer's
  two norms: how far the state is from a fixed point of the norm maps.

The verdict is NO-LIMIT with reason "degenerate" when the finest spread is below
`collapse` and below `collapse` times the largest spread of the sequence (the tokens
fell together under refinement, not in the flow); NO-LIMIT with reason "not Cauchy" when
the differences do not decrease; otherwise the verdict of the differences' order
estimate (PASS, PRE-ASYMPTOTIC, ...). A genuine flow whose tokens cluster to a relative
spread below `collapse` at the final time would be misread as degenerate; choose the
horizon or `collapse` accordingly.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from convergence.order import OrderEstimate, OrderVerdict, estimate_order
from solvers import Problem, backend, solve
from solvers.backends import Backend
from solvers.errors import InvalidInputError
from solvers.flow import LayerFlow
from solvers.provenance import Provenance

COLLAPSE = 1e-6
"""Relative token spread below which (and this far below its largest) the limit is degenerate."""


@dataclass(frozen=True)
class LimitCheck(Provenance):
    """Cauchy differences, token spreads and fixed-point defects per refinement level."""

    method: str
    steps_per_unit: list[int]
    cauchy_differences: list[float]
    spread: list[float]
    fixed_point_defect: list[float] | None
    estimate: OrderEstimate
    verdict: OrderVerdict
    reason: str
    precision: str


def token_spread(u: np.ndarray) -> float:
    """max |u_i - mean_j u_j| over tokens i (and batch entries), relative to max |u|."""
    return float(np.abs(u - u.mean(axis=-2, keepdims=True)).max() / np.abs(u).max())


def _fixed_point_defect(problem: Problem, bk: Backend, u: np.ndarray) -> float:
    """max |P2(P1(u)) - u| for the last layer's norms P1, P2, in bk (active)."""
    flow, last = LayerFlow.from_problem(problem, bk), len(problem.controls) - 1
    start = bk.asarray(last)
    normed = flow.project(last, start, flow.project(last, start, u, 1), 2)
    return float(np.abs(bk.to_float64(normed - u)).max())


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
    started = time.perf_counter()
    bk = backend(precision)
    runs = [solve(problem, method, m, bk) for m in steps]
    with bk.active():
        differences = [
            float(np.abs(bk.to_float64(fine - coarse)).max()) for coarse, fine in pairwise(runs)
        ]
        states = [bk.to_float64(u) for u in runs]
        defects = (
            [_fixed_point_defect(problem, bk, u) for u in runs] if problem.norm == "post" else None
        )
    spread = [token_spread(u) for u in states]
    estimate = estimate_order([1 / m for m in steps[:-1]], differences)
    if spread[-1] < collapse and spread[-1] < collapse * max(spread):
        verdict, reason = (
            OrderVerdict.NO_LIMIT,
            (
                f"degenerate: the token spread falls from {max(spread):.3g} to {spread[-1]:.3g} "
                "under refinement, every token is driven onto the same point"
            ),
        )
    elif estimate.verdict == OrderVerdict.NO_LIMIT:
        verdict, reason = (
            OrderVerdict.NO_LIMIT,
            (
                f"not Cauchy: successive differences {', '.join(f'{c:.3g}' for c in differences)} "
                "do not decrease"
            ),
        )
    else:
        verdict = estimate.verdict
        reason = f"Cauchy: successive differences fall at order {estimate.order:.3g}"
    return LimitCheck(
        method=method,
        steps_per_unit=steps,
        cauchy_differences=differences,
        spread=spread,
        fixed_point_defect=defects,
        estimate=estimate,
        verdict=verdict,
        reason=reason,
        precision=repr(bk),
        wall_time=time.perf_counter() - started,
    )
