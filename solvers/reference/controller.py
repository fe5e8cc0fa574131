"""The error-controlled reference: extrapolation whose own error estimate drives the step
size and the order, steps to every layer boundary and ReLU kink, and knows its error
(docs/schemes.md sections 3, 7 and 8).

`Controller.cross` is the loop; each of its parts is small and separate: an attempt at a
step (solvers.reference.stepper), the step size and column (solvers.reference.step_control),
the dense output of a step (solvers.integrators.dense_output), the first kink along it
and the switch of the units that cross there (solvers.methods.kinks), the softmax's
reach that caps a step (solvers.reference.softmax_reach) and the global estimate
(solvers.reference.global_error). A step that will not come
within tolerance, a step size below the floor, or a run past its budget raises
IntegrationError naming the layer, the time and the step size. `ControlledReference` is
the method "reference" of `solve`; `solvers.reference.solution.solve_reference` returns
the error estimates too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from solvers.backends import Array
from solvers.equation.flow import LayerFlow
from solvers.errors import IntegrationError
from solvers.integrators.dense_output import DenseOutput, dense_output
from solvers.integrators.tableaux import DENSE, EVEN
from solvers.methods.kinks import ActivationPattern
from solvers.methods.stepping import Span, Step, StepHook, SteppingMethod
from solvers.reference.global_error import GlobalError
from solvers.reference.guard_digits import tolerance_for
from solvers.reference.softmax_reach import softmax_reach
from solvers.reference.step_control import StepControl
from solvers.reference.stepper import Attempt, attempt_step

MAX_REJECTIONS = 30
"""Consecutive rejections after which the step is declared impossible (stiff or unstable)."""
MAX_STEPS = 100_000
"""The default budget of steps (accepted and rejected) of one run."""
MERGE_SHARE = 0.1
"""Units that cross shortly after a located kink switch with it while the error of holding
them on the wrong side meanwhile stays within this share of the step's tolerance
(docs/schemes.md section 8): crossings closer than a step can resolve become one event."""
DENSE_LIMIT = 10.0
"""A step whose dense output's own error estimate exceeds this many tolerances is redone
shorter (ODEX's rule): the kink search must look along a curve close to the solution."""
FIT_EXTRA_DEGREE = 4
"""The pre-activations along a step accepted at column kappa are fitted at degree
2 kappa + FIT_EXTRA_DEGREE: the dense output's own degree (2 kappa + 1) and room for the
norm's curvature."""
REACH_SHARE = 0.5
"""Steps are at most this share of the softmax's reach (solvers.reference.softmax_reach):
the h^2 expansion of the extrapolation converges on a step about as (h / reach)^2 a
column, and its differences stop describing the error of the step as h nears the reach
(docs/schemes.md section 7)."""
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
    """What a run of the controller did: steps accepted, rejected, and cut at a kink (an
    accepted step whose dense output showed a crossing: it is redone to the crossing),
    field evaluations, located events."""

    accepted: int = 0
    rejected: int = 0
    cut: int = 0
    evaluations: int = 0
    events: list[ReferenceEvent] = field(default_factory=list)


@dataclass(frozen=True)
class ControlledReference(SteppingMethod):
    """The error-controlled extrapolation as a method: a run of it (`run`) crosses every
    layer to `tol` (None: the working precision) with one controller, in steps of at most
    1 / steps_per_unit, so steps_per_unit caps the step size and does not set the error.
    Its order is infinite: its error does not depend on the step count. `solve` and
    `solve_layers` hand it to `solve_reference`, which adds the guard digits, certifies
    and rounds back (solvers.reference.solution)."""

    name: str = "reference"
    tol: float | None = None
    max_steps: int = MAX_STEPS
    free_order: float = math.inf

    def controller(self, flow: LayerFlow, work: Work, max_step: float = 1.0) -> Controller:
        """A controller of this method's tolerance and budget on `flow`."""
        return Controller(flow, tolerance_for(flow.bk, self.tol), self.max_steps, work, max_step)

    def run(self, flow: LayerFlow, steps_per_unit: int) -> ReferenceRun:
        """One run over the layers: one controller, its steps at most 1 / steps_per_unit."""
        return ReferenceRun(self.controller(flow, Work(), 1.0 / steps_per_unit))

    def step(
        self, flow: LayerFlow, n: int, t: Array, u: Array, h: Array, pattern: Array | None = None
    ) -> Array:
        """u(t + h) to the tolerance, in as many controlled steps as that needs; with
        `pattern`, along the flow with that activation pattern held (no events)."""
        return self.controller(flow, Work()).cross(n, t, u, h, pattern)


class ReferenceRun(SteppingMethod):
    """One run of the reference over a whole problem, as the layer loop crosses it: one
    controller across the layers (its step size, column and global estimate carry over),
    its global estimate recorded at every layer boundary (`errors`), its work in `work`.
    It only crosses spans: a single step of the reference is ControlledReference.step."""

    name = "reference"
    free_order = math.inf

    def __init__(self, controller: Controller) -> None:
        self.controller = controller
        self.errors = [0.0]

    @property
    def work(self) -> Work:
        return self.controller.work

    def advance(
        self, flow: LayerFlow, span: Span, u: Array, on_step: StepHook | None = None
    ) -> Array:
        """u at the end of the span, with every ReLU kink located; `on_step` sees every
        accepted step with the pattern it held."""
        u = self.controller.cross(span.layer, span.start, u, span.length, on_step=on_step)
        self.errors.append(self.controller.error)
        return u


@dataclass
class Taken:
    """An accepted step: its size, the state it reached (a point), its error estimate
    (absolute) and signed T_jj - T_j,j-1 (float64), the attempt that made it, the field
    at its start and, when known, at its end under the same pattern."""

    size: Array
    state: Array
    estimate: float
    difference: np.ndarray
    attempt: Attempt
    start: Array
    end: Array | None = None


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
        by the steps' estimates. Each step is at most REACH_SHARE of the softmax's reach
        at its start. Without `pattern`, a ReLU layer's steps hold the pattern of their
        start and end at the first kink on their dense output (docs/schemes.md section
        8)."""
        bk, flow = self.bk, self.flow
        end = t + length
        kinks = ActivationPattern.start(flow, n, t, u) if pattern is None else None
        sliver = 4 * STEP_FLOOR * bk.unit_roundoff * max(1.0, abs(bk.to_float64(end)))
        start = None  # the field at (t, u) under the pattern held, once known
        while bk.to_float64(end - t) > 0:
            remaining = bk.to_float64(end - t)
            if remaining <= sliver:
                return self._sliver(n, t, u, end - t, pattern)
            if kinks is not None:
                pattern = kinks.held()
            if start is None:
                start = flow.field(n, t, u, pattern=pattern)
                self.work.evaluations += 1
            h = min(self.control.next_size(), REACH_SHARE * softmax_reach(flow, n, t, u, start))
            size = bk.asarray(h) if h < remaining - sliver else end - t
            if kinks is None:
                taken = self._step(n, t, u, size, pattern, start)
            else:
                taken = self._kinked_step(kinks, n, t, u, size, pattern, start, sliver)
                if taken is None:  # the units switched where the step starts
                    start = None
                    continue
            self.work.accepted += 1
            step = Step(n, t, taken.size, u, taken.state, pattern)
            if on_step is not None:
                on_step(step)
            self.work.evaluations += self.carried.carry(
                flow, step, taken.estimate, taken.difference, taken.start
            )
            t, u, start = t + taken.size, taken.state, taken.end
        return u

    def _kinked_step(
        self,
        kinks: ActivationPattern,
        n: int,
        t: Array,
        u: Array,
        size: Array,
        pattern: Array,
        start: Array,
        sliver: float,
    ) -> Taken | None:
        """A step that holds `pattern` and ends at the first kink: an accepted step of at
        most `size` and its dense output (redone shorter while the dense output's own
        estimate exceeds DENSE_LIMIT tolerances), the first crossing along it, then one
        step to the crossing, where the crossing units switch (docs/schemes.md section 8).
        A clear step (every unit far from zero for its rate) is taken without the dense
        output, and kept if its end confirms it. None when the crossing is within
        `sliver` of t: the units switch at (t, u)."""
        bk, flow = self.bk, self.flow
        scale = flow.error_scale(u)
        margins = kinks.margins(t, u, start)
        if margins.clear(bk.to_float64(size)):
            taken = self._step(n, t, u, size, pattern, start)
            if margins.kept(kinks.distance(t + taken.size, taken.state), bk.to_float64(taken.size)):
                return taken
            self.work.cut += 1  # a unit came near zero after all: redone with the dense output
            size = taken.size
        while True:
            taken = self._step(n, t, u, size, pattern, start, dense=True)
            start = taken.start
            dense = self._dense_output(n, t, u, taken, pattern)
            if dense.error <= DENSE_LIMIT * self.tol * scale:
                break
            self.work.rejected += 1
            ratio = dense.error / (DENSE_LIMIT * self.tol * scale)
            self.control.rejected(bk.to_float64(taken.size), ratio, taken.attempt.column)
            size = bk.asarray(self.control.next_size())
        degree = 2 * taken.attempt.column + FIT_EXTRA_DEGREE
        budget = MERGE_SHARE * self.tol * scale
        crossing = kinks.first_kink(t, taken.size, dense, degree, budget)
        if crossing is None:
            return taken  # its end's field, computed for the dense output, starts the next
        self.work.cut += 1
        tau = bk.midpoints(crossing.theta * taken.size)
        if bk.to_float64(tau) <= sliver:
            units, cost = kinks.switch(t, u, crossing, taken.size)
            self.carried.add(cost)
            self._record(n, t, units)
            return None
        column = self.control.column_for(
            bk.to_float64(tau), bk.to_float64(taken.size), taken.attempt.ratio
        )
        kinked = self._step(n, t, u, tau, pattern, start, target=column)
        if bk.to_float64(kinked.size) < bk.to_float64(tau):
            return kinked  # shrunk by a rejection: the crossing is still ahead
        units, cost = kinks.switch(t + tau, kinked.state, crossing, taken.size)
        kinked.estimate += cost
        self._record(n, t + tau, units)
        return kinked

    def _record(self, n: int, t: Array, units: list[tuple[int, ...]]) -> None:
        time = float(self.bk.to_float64(t))
        self.work.events.extend(ReferenceEvent(n, time, unit) for unit in units)

    def _dense_output(
        self, n: int, t: Array, u: Array, taken: Taken, pattern: Array
    ) -> DenseOutput:
        """The dense output of an accepted step; f at its end (one more field evaluation)
        is kept in `taken.end`."""
        bk, flow = self.bk, self.flow
        taken.end = flow.field(n, t + taken.size, taken.state, pattern=pattern)
        self.work.evaluations += 1
        ends, slopes = (u, taken.state), (taken.start, taken.end)
        samples = taken.attempt.samples
        return dense_output(bk, samples, DENSE, ends, slopes, taken.size, flow.size)

    def _step(
        self,
        n: int,
        t: Array,
        u: Array,
        size: Array,
        pattern: Array | None,
        start: Array,
        target: int | None = None,
        dense: bool = False,
    ) -> Taken:
        """One accepted step from (t, u) of at most `size` (shrunk on rejection), at the
        target column (the control's unless given), with the rows of DENSE and their
        samples when `dense`. `start`: the field at (t, u)."""
        bk, flow = self.bk, self.flow
        scale = flow.error_scale(u)
        numbers = DENSE if dense else EVEN
        rejections = 0
        while True:
            done = self.work.accepted + self.work.rejected + self.work.cut
            if done >= self.max_steps:
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
            attempt = attempt_step(
                flow,
                n,
                t,
                u,
                size,
                pattern,
                self.tol,
                scale,
                self.control,
                target,
                numbers,
                dense,
                start,
            )
            self.work.evaluations += attempt.evaluations
            if attempt.value is not None:
                self.control.accepted(h, attempt.column, attempt.ratio, numbers)
                # the radii (arb: this step's rounding, with the projection's) join its
                # estimate, and the balls start the next step as points: radii do not
                # compound step after step
                state = flow.project(n, t + size, attempt.value)
                estimate = attempt.estimate + bk.max_radius(state)
                return Taken(
                    size, bk.midpoints(state), estimate, attempt.difference, attempt, start
                )
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
            target = None

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
        self.carried.add(
            bk.to_float64(h) * drift / 2 + self.control.rounding(1) * flow.error_scale(u)
        )
        self.carried.add(bk.max_radius(state))
        return bk.midpoints(state)
