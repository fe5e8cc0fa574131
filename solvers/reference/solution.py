"""solve_reference: the error-controlled reference over a whole problem, with its own
estimate of its error at every layer boundary (docs/schemes.md section 7)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from solvers.backends import Array, Backend, convert
from solvers.backends import backend as resolve_backend
from solvers.equation.flow import LayerFlow
from solvers.equation.problem import Problem
from solvers.errors import InvalidInputError
from solvers.methods.driver import integrate
from solvers.methods.solvable import check_solvable
from solvers.methods.stepping import Span, StepHook, SteppingMethod
from solvers.reference.controller import (
    MAX_STEPS,
    ControlledReference,
    Controller,
    ReferenceEvent,
    Work,
)
from solvers.reference.guard_digits import reference_precision
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
    tolerance `tol` on each step's max-abs error relative to max(1, max |u|). In a fixed
    format (float16 .. longdouble) the tolerance is by default, and at least,
    TOLERANCE_FLOOR unit roundoffs. In mpmath or arb at D digits it is by default, and at
    least, 10^-D / 10, and the run works at D + G digits, G guard digits that let the
    order grow with D (solvers.reference.guard_digits); the states come back rounded to D
    digits, and `error` includes that rounding.

    `error[n]` is the estimated global max-abs error at layer boundary n: each accepted
    step's estimate (its truncation from the tableau's differences, its rounding, modelled
    or, in arb, the ball radii) added to the error carried from before, which is stretched
    by the flow's growth along its direction (docs/schemes.md section 7). Steps are at most
    1 / steps_per_unit long; at most `max_steps` steps (accepted and rejected) in all. In
    arb the states come back as points (radius 0): each step's radii went into `error`,
    and certification runs again with more guard bits only when a step's radii alone pass
    the tolerance.
    """
    if not isinstance(problem, Problem):
        raise InvalidInputError(f"problem must be a Problem, got {type(problem).__name__}")
    check_solvable(problem, ControlledReference())
    bk = resolve_backend(backend)
    working, tol = reference_precision(bk, None if tol is None else positive_number("tol", tol))
    cap = 1.0 / positive_int("steps_per_unit", steps_per_unit)
    max_steps = positive_int("max_steps", max_steps)
    attempts: list[tuple[Work, list[float]]] = []  # certification may run it again

    def computation(working: Backend) -> Array:
        work = Work()
        flow = LayerFlow.from_problem(problem, working)
        run = _Run(Controller(flow, tol, max_steps, work, max_step=cap))
        attempts.append((work, run.errors))
        return integrate(problem, run, steps_per_unit, flow)

    computed = working.certify(computation, tolerance=tol)
    work, errors = attempts[-1]
    if working is not bk:
        states = _rounded(computed, working, bk, errors, problem.real_tokens())
    else:
        states = computed
    return ReferenceSolution(
        states=bk.to_output(states),
        error=list(errors),
        accepted=work.accepted,
        rejected=work.rejected,
        evaluations=work.evaluations,
        events=list(work.events),
        tolerance=tol,
        precision=repr(working),
    )


def _rounded(
    computed: Array, working: Backend, bk: Backend, errors: list[float], real: np.ndarray
) -> Array:
    """The states of the guard-digit run rounded to bk (points), each boundary's rounding,
    measured at the working precision over the `real` tokens' rows (as every estimate is),
    added to its error estimate (in place). In balls the measure is the difference's
    midpoint plus its radius, which covers a conversion that went through decimals."""
    with bk.active():
        states = bk.midpoints(convert(computed, working, bk))
    with working.active():
        difference = computed - convert(states, bk, working)
        for n in range(len(errors)):
            state = difference[n]
            rows = state[real] if real.ndim == state.ndim - 1 else state[..., real, :]
            size = np.max(np.abs(working.to_float64(rows))) + working.max_radius(rows)
            errors[n] += float(size) * (1 + 1e-15)  # float64's own rounding
    return states


class _Run(SteppingMethod):
    """The reference over a whole problem as one method of the layer loop: one controller
    across the layers (its step size, column and global estimate carry over), its global
    estimate recorded at every layer boundary. It only crosses spans: a single step of the
    reference is ControlledReference.step."""

    name = "reference"
    order = math.inf

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self.errors = [0.0]

    def advance(
        self, flow: LayerFlow, span: Span, u: Array, on_step: StepHook | None = None
    ) -> Array:
        u = self.controller.cross(span.layer, span.start, u, span.length, on_step=on_step)
        self.errors.append(self.controller.error)
        return u
