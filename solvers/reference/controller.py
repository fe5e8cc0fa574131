"""The error-controlled reference: extrapolation whose own error estimate drives the step
size and the order, steps to every layer boundary and ReLU kink, and knows its error
(docs/schemes.md sections 3, 4 and 7).

`Controller.cross` is the loop; each of its parts is small and separate: an attempt at a
step (solvers.reference.stepper), the step size and column (solvers.reference.step_control),
the cut at the first kink (solvers.methods.kinks, the path the fixed extrapolation takes
too) and the global estimate (solvers.reference.global_error). A step that will not come
within tolerance, a step size below the floor, or a run past its budget raises
IntegrationError naming the layer, the time and the step size. `ControlledReference` is
the method "reference" of `solve`; `solvers.reference.solution.solve_reference` returns
the error estimates too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import partial

from solvers.backends import Array, Backend
from solvers.equation.flow import LayerFlow
from solvers.errors import IntegrationError
from solvers.integrators.tableaux import extrapolation_evaluations
from solvers.methods.extrapolation import Extrapolation
from solvers.methods.kinks import ActivationPattern
from solvers.methods.stepping import Span, Step, StepHook, SteppingMethod
from solvers.reference.global_error import GlobalError
from solvers.reference.guard_digits import reference_precision, tolerance_for
from solvers.reference.step_control import StepControl
from solvers.reference.stepper import attempt_step

MAX_REJECTIONS = 30
"""Consecutive rejections after which the step is declared impossible (stiff or unstable)."""
MAX_STEPS = 100_000
"""The default budget of steps (accepted and rejected) of one run."""
STEP_FLOOR = 64
"""The smallest step, in unit roundoffs of max(1, |t|); a remainder of a layer below
4 STEP_FLOOR of them (left by a kink just before its end) is crossed by one Heun step."""


@dataclass(frozen=True)
class ReferenceEvent:
    """A located ReLU kink: the layer, the time, and the hidden unit that switched."""

    layer: int
    time: float
    unit: tuple[int, ...]


@dataclass
class Work:
    """What a run of the controller did: steps, field evaluations, located events."""

    accepted: int = 0
    rejected: int = 0
    evaluations: int = 0
    events: list[ReferenceEvent] = field(default_factory=list)


@dataclass(frozen=True)
class ControlledReference(SteppingMethod):
    """The error-controlled extrapolation as a method of `solve`: each span of a layer is
    crossed to `tol` (None: the working precision) in steps of at most span.length /
    span.steps, so steps_per_unit caps the step size and does not set the error. Its
    `order` is infinite: its error does not depend on the step count."""

    name: str = "reference"
    tol: float | None = None
    max_steps: int = MAX_STEPS
    order: float = math.inf

    def working_precision(self, bk: Backend, kinks: bool) -> tuple[Backend, SteppingMethod]:
        """bk widened by the reference's guard digits, and this method at the tolerance
        they serve (solvers.reference.guard_digits)."""
        working, tol = reference_precision(bk, self.tol, kinks)
        return working, replace(self, tol=tol)

    def controller(self, flow: LayerFlow, work: Work, max_step: float = 1.0) -> Controller:
        """A controller of this method's tolerance and budget on `flow`."""
        return Controller(flow, tolerance_for(flow.bk, self.tol), self.max_steps, work, max_step)

    def step(
        self, flow: LayerFlow, n: int, t: Array, u: Array, h: Array, pattern: Array | None = None
    ) -> Array:
        """u(t + h) to the tolerance, in as many controlled steps as that needs; with
        `pattern`, along the flow with that activation pattern held (no events)."""
        return self.controller(flow, Work()).cross(n, t, u, h, pattern)

    def advance(
        self, flow: LayerFlow, span: Span, u: Array, on_step: StepHook | None = None
    ) -> Array:
        """u at the end of the span, with every ReLU kink located; `on_step` sees every
        accepted step with the pattern it held."""
        max_step = flow.bk.to_float64(span.length) / span.steps
        controller = self.controller(flow, Work(), max_step)
        return controller.cross(span.layer, span.start, u, span.length, on_step=on_step)


class Controller:
    """Controlled steps over one flow; `work` collects the counts over every call, `carried`
    the global error estimate (its `error` so far)."""

    def __init__(
        self, flow: LayerFlow, tol: float, max_steps: int, work: Work, max_step: float = 1.0
    ) -> None:
        self.flow, self.bk, self.tol = flow, flow.bk, tol
        self.max_steps, self.work = max_steps, work
        self.control = StepControl(flow.bk.unit_roundoff, tol, max_step)
        self.carried = GlobalError()

    @property
    def error(self) -> float:
        """The estimated global max-abs error of the state reached so far."""
        return self.carried.error

    def cross(
        self,
        n: int,
        t: Array,
        u: Array,
        length: Array,
        pattern: Array | None = None,
        on_step: StepHook | None = None,
    ) -> Array:
        """u at t + length from u at t under layer n's controls; the global estimate grows
        by the steps' estimates. Without `pattern`, a ReLU layer's steps hold the pattern
        of their start and stop at the first kink (docs/schemes.md section 4)."""
        bk, flow = self.bk, self.flow
        end = t + length
        kinks = ActivationPattern.start(flow, n, t, u) if pattern is None else None
        sliver = 4 * STEP_FLOOR * bk.unit_roundoff * max(1.0, abs(bk.to_float64(end)))
        while bk.to_float64(end - t) > 0:
            remaining = bk.to_float64(end - t)
            if remaining <= sliver:
                return self._sliver(n, t, u, end - t, pattern)
            h = self.control.next_size()
            size = bk.asarray(h) if h < remaining - sliver else end - t
            if kinks is not None:
                pattern = kinks.held()
            size, stepped, estimate, difference, column = self._step(n, t, u, size, pattern)
            if kinks is not None:
                trial = partial(self._trial, column, n, t, u, pattern=pattern)
                size, stepped, unit = kinks.cut(t, u, size, stepped, trial)
                if unit is not None:
                    estimate += bk.max_radius(stepped)  # the trial step's rounding (arb)
                    stepped = bk.midpoints(stepped)
                    time = float(bk.to_float64(t + size))
                    self.work.events.append(ReferenceEvent(n, time, tuple(map(int, unit))))
            step = Step(n, t, size, u, stepped, pattern)
            if on_step is not None:
                on_step(step)
            self.work.evaluations += self.carried.carry(flow, step, estimate, difference)
            t, u = t + size, stepped
        return u

    def _trial(self, column: int, n: int, t: Array, u: Array, tau: Array, pattern: Array):
        """A trial step of the accepted column to t + tau (shorter than the accepted step,
        so no less accurate): what the kink search steps along."""
        self.work.evaluations += extrapolation_evaluations(column)
        return Extrapolation(levels=column).step(self.flow, n, t, u, tau, pattern)

    def _step(self, n: int, t: Array, u: Array, size: Array, pattern: Array | None):
        """One accepted step from (t, u) of at most `size` (shrunk on rejection): its size,
        the state, its error estimate (absolute), the signed T_jj - T_j,j-1 (float64) and the
        column it was taken at."""
        bk, flow = self.bk, self.flow
        scale = flow.scale(u)
        rejections = 0
        while True:
            if self.work.accepted + self.work.rejected >= self.max_steps:
                raise IntegrationError(
                    f"layer {n}, t = {bk.to_float64(t):.6g}: the reference used its budget of "
                    f"{self.max_steps} steps (step size {bk.to_float64(size):.3g})"
                )
            h = bk.to_float64(size)
            if h < STEP_FLOOR * bk.unit_roundoff * max(1.0, abs(bk.to_float64(t))):
                raise IntegrationError(
                    f"layer {n}, t = {bk.to_float64(t):.6g}: the step size fell to {h:.3g}, "
                    "below the floor of the number format (a stiff or unstable field)"
                )
            attempt = attempt_step(flow, n, t, u, size, pattern, self.tol, scale, self.control)
            self.work.evaluations += attempt.evaluations
            if attempt.value is not None:
                self.work.accepted += 1
                self.control.accepted(h, attempt.column, attempt.ratio)
                # the radii (arb: this step's rounding, with the projection's) join its
                # estimate, and the balls start the next step as points: radii do not
                # compound step after step
                state = flow.project(n, t + size, attempt.value)
                estimate = attempt.estimate + bk.max_radius(state)
                return size, bk.midpoints(state), estimate, attempt.difference, attempt.column
            self.work.rejected += 1
            worst = attempt.ratio.get(attempt.column, math.inf)
            self.control.rejected(h, worst, attempt.column)
            rejections += 1
            if rejections >= MAX_REJECTIONS:
                raise IntegrationError(
                    f"layer {n}, t = {bk.to_float64(t):.6g}: {rejections} rejections in a row, "
                    f"step size {self.control.h:.3g}; the error estimate will not come down (a "
                    "stiff or unstable field)"
                )
            size = bk.asarray(self.control.next_size())

    def _sliver(self, n: int, t: Array, u: Array, h: Array, pattern: Array | None) -> Array:
        """u at t + h for h below 4 STEP_FLOOR unit roundoffs of t: one Heun step, its
        error bounded by h |k2 - k1| / 2 (the Euler-Heun difference) plus rounding."""
        bk, flow = self.bk, self.flow
        field = partial(flow.field, n, pattern=pattern)
        k1 = field(t, u)
        k2 = field(t + h, u + k1 * h)
        self.work.evaluations += 2
        self.work.accepted += 1
        state = flow.project(n, t + h, u + (k1 + k2) * h / 2)
        drift = flow.size(bk.to_float64(k2 - k1))
        self.carried.add(bk.to_float64(h) * drift / 2 + self.control.rounding(1) * flow.scale(u))
        self.carried.add(bk.max_radius(state))
        return bk.midpoints(state)
