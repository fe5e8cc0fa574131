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
from solvers.reference.controller import MAX_STEPS, ReferenceEvent, Work
from solvers.reference.guard_digits import (
    check_range,
    multiply_adds,
    reference_precision,
    tighter_precision,
)
from solvers.reference.method import ControlledReference
from solvers.validation import positive_int, positive_number

ASSESSMENT_RATIO = 100.0
"""An assessed reference runs a second time at the tolerance divided by this, and measures
the first run's error as the distance between the two (docs/schemes.md section 7)."""


@dataclass(frozen=True)
class ReferenceSolution:
    """The states at t = 0, 1, ..., t_final (like solve_layers) and the reference's own
    estimated max-abs error at each, with the work it took. `check`: for an assessed
    reference, the run at the tolerance asked for, which `error` was measured against
    (its own `error` is its carried estimate); None otherwise."""

    states: np.ndarray
    error: list[float]
    accepted: int
    rejected: int
    evaluations: int
    events: list[ReferenceEvent]
    tolerance: float
    precision: str
    check: ReferenceSolution | None = None


def solve_reference(
    problem: Problem,
    tol: float | None = None,
    backend: str | Backend = "float64",
    *,
    steps_per_unit: int = 1,
    max_steps: int = MAX_STEPS,
    assess: bool = False,
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

    The carried estimate can fall short where the flow stretches the error in directions
    the carried one does not see (docs/schemes.md section 7). With `assess`, the reference
    runs twice: at `tol` (returned as `check`) and at tol / ASSESSMENT_RATIO, in bk where
    its floor allows, else in the cheapest wider number system that does
    (solvers.reference.guard_digits.tighter_precision). The states of the tighter run come
    back, and `error[n]` is the larger of that run's carried estimate and the first run's
    plus the distance d_n between the two runs at boundary n. It bounds the tighter run's
    error wherever either carried estimate holds, or the first run is at least twice as
    far off as the tighter one (d_n is then at least the tighter run's error). The work
    counts, `tolerance` and `precision` are the tighter run's; `check` has the first
    run's. Each run has its own budget of `max_steps`.
    """
    if not isinstance(problem, Problem):
        raise InvalidInputError(f"problem must be a Problem, got {type(problem).__name__}")
    check_solvable(problem, ControlledReference())
    bk = resolve_backend(backend)
    tol = None if tol is None else positive_number("tol", tol)
    steps_per_unit = positive_int("steps_per_unit", steps_per_unit)
    max_steps = positive_int("max_steps", max_steps)
    real = problem.real_tokens()
    check_range(bk, tol, ASSESSMENT_RATIO if assess else None)  # before any run

    def run(number_system: Backend, tol: float | None) -> _Computed:
        working, tol = reference_precision(number_system, tol)
        attempts: list[tuple[Work, list[float]]] = []  # certification may run it again

        def computation(working: Backend) -> Array:
            flow = LayerFlow.from_problem(problem, working)
            stepping = ControlledReference(tol=tol, max_steps=max_steps).run(flow, steps_per_unit)
            attempts.append((stepping.work, stepping.errors))
            return integrate(problem, stepping, steps_per_unit, flow)

        states = working.certify(computation, tolerance=tol)
        work, errors = attempts[-1]
        return _Computed(states, working, tol, work, list(errors))

    first = run(bk, tol)
    if not assess:
        return first.solution(bk, real)
    tighter = first.tolerance / ASSESSMENT_RATIO
    second = run(tighter_precision(bk, tighter, multiply_adds(problem)), tighter)
    distances = _distances(first.states, first.working, second.states, second.working, real)
    second.errors = [
        max(own, math.nextafter(checked + distance, math.inf))
        for own, checked, distance in zip(second.errors, first.errors, distances, strict=True)
    ]
    return second.solution(bk, real, check=first.solution(bk, real))


@dataclass
class _Computed:
    """One run of the reference: its states in its working precision, that precision, its
    tolerance, its work and its carried estimate at each boundary."""

    states: Array
    working: Backend
    tolerance: float
    work: Work
    errors: list[float]

    def solution(
        self, bk: Backend, real: np.ndarray, check: ReferenceSolution | None = None
    ) -> ReferenceSolution:
        """The run's states as points of bk, the rounding to bk (measured over the `real`
        tokens' rows) added to each boundary's error."""
        errors = list(self.errors)
        states = self.states
        if self.working is not bk:
            with bk.active():
                states = bk.midpoints(convert(self.states, self.working, bk))
            rounding = _distances(states, bk, self.states, self.working, real)
            errors = [
                math.nextafter(error + size, math.inf)
                for error, size in zip(errors, rounding, strict=True)
            ]
        return ReferenceSolution(
            states=bk.to_output(states),
            error=errors,
            accepted=self.work.accepted,
            rejected=self.work.rejected,
            evaluations=self.work.evaluations,
            events=list(self.work.events),
            tolerance=self.tolerance,
            precision=repr(self.working),
            check=check,
        )


def _distances(
    states: Array, bk: Backend, other: Array, working: Backend, real: np.ndarray
) -> list[float]:
    """max |states[n] - other[n]| at each boundary n over the `real` tokens' rows, measured
    in `working`, which holds both (`states` convert into it exactly), rounded up. In balls
    the measure is the difference's midpoint plus its radius, which covers a conversion
    that went through decimals; in points, the subtraction's rounding (a unit roundoff of
    `working`) and float64's of the measure are allowed for."""
    with working.active():
        difference = other - convert(states, bk, working)
        sizes = []
        for state in difference:
            rows = state[real] if real.ndim == state.ndim - 1 else state[..., real, :]
            size = np.max(np.abs(working.to_float64(rows))) + working.max_radius(rows)
            sizes.append(float(size) * (1 + 2 * max(working.unit_roundoff, 2.0**-53)))
    return sizes
