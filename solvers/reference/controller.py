"""The error-controlled reference's controller: extrapolation whose own error estimate
drives the step size and the order, steps to the end of a span and to every kink, and
knows its error (docs/schemes.md sections 3, 7 and 8).

It steps a System (solvers.reference.system): a field, its projection and error measure,
and the providers passed in with it, caps on a step (a Transformer's softmax reach) and
events (a ReLU pattern); it knows no Transformer. `Controller.cross` is the loop; each of
its parts is small and separate: an attempt at a step (solvers.reference.stepper), the
step size and column (solvers.reference.step_control), the dense output of a step
(solvers.integrators.dense_output), the first kink along it and the switch of the units
that cross there (the system's events) and the global estimate
(solvers.reference.global_error). A step that will not come within tolerance, a step
size below the floor, or a run past its budget raises IntegrationError naming the
system, the time and the step size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from solvers.backends import Array, Backend
from solvers.errors import IntegrationError
from solvers.integrators.dense_output import DenseOutput, dense_output
from solvers.integrators.tableaux import DENSE
from solvers.methods.stepping import Step, StepHook
from solvers.reference.global_error import GlobalError
from solvers.reference.step_control import StepControl
from solvers.reference.stepper import Attempt, attempt
from solvers.reference.system import Events, System

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
STEP_FLOOR = 64
"""The smallest step, in unit roundoffs of max(1, |t|); a remainder of a layer below
4 STEP_FLOOR of them (left by a kink just before its end) is crossed by one Heun step."""


@dataclass(frozen=True)
class ReferenceEvent:
    """A located kink: the layer (the system's), the time, and the unit that switched."""

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
    """Controlled steps in one number system to a tolerance; `work` collects the counts
    over every call, `carried` the global error estimate (its `error` so far), across
    every system crossed (a Transformer's layers, one after the other)."""

    def __init__(
        self, bk: Backend, tol: float, max_steps: int, work: Work, max_step: float = 1.0
    ) -> None:
        self.bk, self.tol = bk, tol
        self.max_steps, self.work = max_steps, work
        self.control = StepControl(bk.unit_roundoff, tol, max_step)
        self.carried = GlobalError()

    @property
    def error(self) -> float:
        """The estimated global max-abs error of the state reached so far."""
        return self.carried.error

    def cross(
        self,
        system: System,
        t: Array,
        u: Array,
        length: Array,
        pattern: Array | None = None,
        on_step: StepHook | None = None,
    ) -> Array:
        """u at t + length from u at t along `system`; the global estimate grows by the
        steps' estimates. Each step is at most the system's cap at its start. Without
        `pattern`, the steps of a system with events hold the pattern of their start and
        end at the first kink on their dense output (docs/schemes.md section 8); with it,
        they hold `pattern` throughout."""
        bk = self.bk
        end = t + length
        kinks = system.watch(t, u) if pattern is None else None
        sliver = 4 * STEP_FLOOR * bk.unit_roundoff * max(1.0, abs(bk.to_float64(end)))
        start = None  # the field at (t, u) under the pattern held, once known
        while bk.to_float64(end - t) > 0:
            remaining = bk.to_float64(end - t)
            if remaining <= sliver:
                return self._sliver(system, t, u, end - t, pattern)
            if kinks is not None:
                pattern = kinks.held()
            if start is None:
                start = system.field(t, u, pattern)
                self.work.evaluations += 1
            h = min(self.control.next_size(), system.cap(t, u, start))
            size = bk.asarray(h) if h < remaining - sliver else end - t
            if kinks is None:
                taken = self._step(system, t, u, size, pattern, start)
            else:
                taken = self._kinked_step(system, kinks, t, u, size, pattern, start, sliver)
                if taken is None:  # the units switched where the step starts
                    start = None
                    continue
            self.work.accepted += 1
            step = Step(system.layer, t, taken.size, u, taken.state, pattern)
            if on_step is not None:
                on_step(step)
            self.work.evaluations += self.carried.carry(
                system, step, taken.estimate, taken.difference, taken.start
            )
            t, u, start = t + taken.size, taken.state, taken.end
        return u

    def _kinked_step(
        self,
        system: System,
        kinks: Events,
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
        bk = self.bk
        scale = system.error_scale(u)
        margins = kinks.margins(t, u, start)
        if margins.clear(bk.to_float64(size)):
            taken = self._step(system, t, u, size, pattern, start)
            if margins.kept(kinks.distance(t + taken.size, taken.state), bk.to_float64(taken.size)):
                return taken
            self.work.cut += 1  # a unit came near zero after all: redone with the dense output
            size = taken.size
        while True:
            taken = self._step(system, t, u, size, pattern, start, dense=True)
            start = taken.start
            dense = self._dense_output(system, t, u, taken, pattern)
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
            self._record(system, t, units)
            return None
        column = self.control.column_for(
            bk.to_float64(tau), bk.to_float64(taken.size), taken.attempt.ratio
        )
        kinked = self._step(system, t, u, tau, pattern, start, target=column)
        if bk.to_float64(kinked.size) < bk.to_float64(tau):
            return kinked  # shrunk by a rejection: the crossing is still ahead
        units, cost = kinks.switch(t + tau, kinked.state, crossing, taken.size)
        kinked.estimate += cost
        self._record(system, t + tau, units)
        return kinked

    def _record(self, system: System, t: Array, units: list[tuple[int, ...]]) -> None:
        time = float(self.bk.to_float64(t))
        self.work.events.extend(ReferenceEvent(system.layer, time, unit) for unit in units)

    def _dense_output(
        self, system: System, t: Array, u: Array, taken: Taken, pattern: Array
    ) -> DenseOutput:
        """The dense output of an accepted step; f at its end (one more field evaluation)
        is kept in `taken.end`."""
        taken.end = system.field(t + taken.size, taken.state, pattern)
        self.work.evaluations += 1
        ends, slopes = (u, taken.state), (taken.start, taken.end)
        samples = taken.attempt.samples
        return dense_output(self.bk, samples, DENSE, ends, slopes, taken.size, system.size)

    def _step(
        self,
        system: System,
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
        bk = self.bk
        scale = system.error_scale(u)
        rejections = 0
        while True:
            done = self.work.accepted + self.work.rejected + self.work.cut
            if done >= self.max_steps:
                raise IntegrationError(
                    f"{_where(system, t)}: the reference used its budget of {self.max_steps} "
                    f"steps (step size {bk.to_float64(size):.3g})"
                )
            h = bk.to_float64(size)
            if h < STEP_FLOOR * bk.unit_roundoff * max(1.0, abs(bk.to_float64(t))):
                raise IntegrationError(
                    f"{_where(system, t)}: the step size fell to {h:.3g}, below the floor of the "
                    "number format (a stiff or unstable field)"
                )
            tried = attempt(
                system,
                t,
                u,
                size,
                pattern=pattern,
                tol=self.tol,
                scale=scale,
                control=self.control,
                target=target,
                dense=dense,
                start=start,
            )
            self.work.evaluations += tried.evaluations
            if tried.value is not None:
                self.control.accepted(h, tried.column, tried.ratio, tried.numbers)
                # the radii (arb: this step's rounding, with the projection's) join its
                # estimate, and the balls start the next step as points: radii do not
                # compound step after step
                state = system.project(t + size, tried.value)
                estimate = tried.estimate + bk.max_radius(state)
                return Taken(size, bk.midpoints(state), estimate, tried.difference, tried, start)
            self.work.rejected += 1
            worst = tried.ratio.get(tried.column, math.inf)
            self.control.rejected(h, worst, tried.column)
            rejections += 1
            if rejections >= MAX_REJECTIONS:
                raise IntegrationError(
                    f"{_where(system, t)}: {rejections} rejections in a row, step size "
                    f"{self.control.h:.3g}; the error estimate will not come down (a stiff "
                    "or unstable field)"
                )
            size = bk.asarray(self.control.next_size())
            target = None

    def _sliver(self, system: System, t: Array, u: Array, h: Array, pattern: Array | None) -> Array:
        """u at t + h for h below 4 STEP_FLOOR unit roundoffs of t: one Heun step, its
        error bounded by h |k2 - k1| / 2 (the Euler-Heun difference) plus rounding."""
        bk = self.bk
        k1 = system.field(t, u, pattern)
        k2 = system.field(t + h, u + k1 * h, pattern)
        self.work.evaluations += 2
        self.work.accepted += 1
        state = system.project(t + h, u + (k1 + k2) * h / 2)
        drift = system.size(bk.to_float64(k2 - k1))
        self.carried.add(
            bk.to_float64(h) * drift / 2 + self.control.rounding(1) * system.error_scale(u)
        )
        self.carried.add(bk.max_radius(state))
        return bk.midpoints(state)


def _where(system: System, t: Array) -> str:
    """The system and the time, as error messages name them."""
    return f"{system.label}, t = {system.bk.to_float64(t):.6g}"
