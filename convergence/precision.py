"""The precision ladder: one scheme in several number systems, each one's floor located.

Errors against a reference (the exact solution, or the extrapolation reference at
`reference_precision`) fall with the step size until rounding stops them; the level
where they stop decreasing is that number system's floor. `estimate_order` finds it
(levels at the end that no longer decrease by 10% are dropped as "floor"); the floor
reported is the smallest error reached there; the smallest error of all when the errors
never decrease (verdict NO-LIMIT or FLOOR: the coarsest step is already at the floor);
None when the errors were still decreasing at the finest level (no floor above the
smallest error).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from convergence.order import OrderEstimate, OrderVerdict
from convergence.refinement import refine
from solvers import Problem, backend, solve
from solvers.backends import Array, Backend, convert
from solvers.equation.exact import uniform_attention_solution
from solvers.results.provenance import Provenance, timed


@dataclass(frozen=True)
class PrecisionLadder(Provenance):
    """Errors per precision (keyed by repr) over steps_per_unit, floors and orders."""

    method: str
    steps_per_unit: list[int]
    errors: dict[str, list[float]]
    floors: dict[str, float | None]
    estimates: dict[str, OrderEstimate]
    reference: str


@timed
def precision_ladder(
    problem: Problem,
    method: str,
    steps_per_unit: Sequence[int],
    precisions: Sequence[str | Backend],
    *,
    reference_precision: str | Backend | None = None,
    reference_steps: int = 8,
) -> PrecisionLadder:
    """Solve with `method` at each step count in each precision; locate every floor.

    The reference is the problem's exact solution (manufactured or uniform attention)
    when it has one, else the error-controlled reference (steps at most 1 /
    reference_steps) at `reference_precision` (mpmath at 60 digits by default).
    """
    steps = sorted(int(m) for m in steps_per_unit)
    high = backend("mpmath", 60) if reference_precision is None else backend(reference_precision)
    with high.active():
        if problem.manufactured is not None:
            exact = problem.manufactured.state(high, high.asarray(problem.t_final))
            source = "manufactured solution"
        else:
            try:
                exact = uniform_attention_solution(problem, high)
                source = "uniform-attention solution"
            except ValueError:
                exact = solve(problem, "reference", reference_steps, high)
                source = f"error-controlled reference, steps at most 1/{reference_steps}"
        scale = float(np.abs(high.to_float64(exact)).max())
    errors, floors, estimates = {}, {}, {}
    for precision in precisions:
        bk = backend(precision)
        name = repr(bk)
        # no floor is assumed: the ladder locates each number system's own
        refinement = refine(
            partial(_solved_in, problem, method, bk, high),
            steps,
            partial(_relative_distance, high, scale),
            truth=exact,
        )
        errors[name] = refinement.distances
        estimate = refinement.estimate()
        at_floor = [i for i, reason in estimate.dropped.items() if reason.startswith("floor")]
        estimates[name] = estimate
        if at_floor:
            floors[name] = min(errors[name][i] for i in at_floor)
        elif estimate.verdict in (OrderVerdict.NO_LIMIT, OrderVerdict.FLOOR):
            # never decreasing: all of it is rounding
            floors[name] = min(errors[name])
        else:
            floors[name] = None
    return PrecisionLadder(
        method=method,
        steps_per_unit=steps,
        errors=errors,
        floors=floors,
        estimates=estimates,
        reference=f"{source} in {high!r}",
    )


def _solved_in(problem: Problem, method: str, bk: Backend, high: Backend, steps: int) -> Array:
    """The method's final state in bk, converted exactly into the reference's `high`: the
    difference is taken there, not after rounding."""
    return convert(solve(problem, method, steps, bk), bk, high)


def _relative_distance(high: Backend, scale: float, got: Array, exact: Array) -> float:
    """max |got - exact| / scale, the difference taken in `high`."""
    with high.active():
        return float(np.abs(high.to_float64(got - exact)).max()) / scale
