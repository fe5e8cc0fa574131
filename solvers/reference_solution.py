"""solve_reference: the error-controlled reference over a whole problem, with its own
estimate of its error at every layer boundary (docs/schemes.md section 7)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solvers.backends import Array, Backend
from solvers.backends import backend as resolve_backend
from solvers.controlled_reference import (
    MAX_STEPS,
    Controller,
    ReferenceEvent,
    Work,
    tolerance_for,
)
from solvers.driver import layer_lengths
from solvers.flow import LayerFlow
from solvers.methods import checked_method
from solvers.problem import Problem
from solvers.validation import positive_int, positive_number


@dataclass(frozen=True)
class ReferenceSolution:
    """The states at t = 0, 1, ..., t_final (like solve_layers) and the reference's own
    estimated max-abs error at each, with the work it took."""

    states: np.ndarray
    error: list[float]
    accepted: int
    rejected: int
    evaluations: int
    events: list[ReferenceEvent]
    tolerance: float
    precision: str


def solve_reference(
    problem: Problem,
    tol: float | None = None,
    backend: str | Backend = "float64",
    *,
    steps_per_unit: int = 1,
    max_steps: int = MAX_STEPS,
) -> ReferenceSolution:
    """Integrate the problem's flow (the continuous limit: post-LN on each layer's S2) to a
    tolerance `tol` on each step's max-abs error relative to max(1, max |u|), by default
    and at least TOLERANCE_FLOOR unit roundoffs of the working precision.

    `error[n]` is the estimated global max-abs error at layer boundary n: each accepted
    step's estimate (its truncation from the tableau's differences, its rounding, modelled
    or, in arb, the ball radii) added to the error carried from before, which is stretched
    by the flow's growth along its direction (docs/schemes.md section 7). Steps are at most
    1 / steps_per_unit long; at most `max_steps` steps (accepted and rejected) in all. In
    arb the states come back as points (radius 0): each step's radii went into `error`,
    and certification runs again with more guard bits only when a step's radii alone pass
    the tolerance.
    """
    checked_method(problem, "reference")
    bk = resolve_backend(backend)
    tol = tolerance_for(bk, None if tol is None else positive_number("tol", tol))
    cap = 1.0 / positive_int("steps_per_unit", steps_per_unit)
    max_steps = positive_int("max_steps", max_steps)
    attempts: list[tuple[Work, list[float]]] = []  # certification may run it again

    def computation(working: Backend) -> Array:
        work, errors = Work(), [0.0]
        attempts.append((work, errors))
        flow = LayerFlow.from_problem(problem, working)
        controller = Controller(flow, tol, max_steps, work, max_step=cap)
        u = problem.initial_state(working)
        states = [u]
        with np.errstate(over="ignore", invalid="ignore"):
            for n, length in enumerate(layer_lengths(problem.t_final)):
                start = working.asarray(n)
                u = flow.project(n, start, u)
                u = controller.cross(n, start, u, working.asarray(length))
                states.append(u)
                errors.append(controller.error)
        return np.stack(states)

    states = bk.to_output(bk.certify(computation, tolerance=tol))
    work, errors = attempts[-1]
    return ReferenceSolution(
        states=states,
        error=list(errors),
        accepted=work.accepted,
        rejected=work.rejected,
        evaluations=work.evaluations,
        events=list(work.events),
        tolerance=tol,
        precision=repr(bk),
    )
