"""The error-controlled reference: extrapolation whose own error estimate drives the step
size and the order, steps to every layer boundary and ReLU kink, and knows its error
(docs/schemes.md sections 3, 4 and 7).

Each step builds the Gragg-Bulirsch-Stoer tableau row by row and accepts the first
diagonal entry T_jj (j near the target column k) whose estimate is within the tolerance,
as Hairer and Wanner's ODEX does: the truncation (from the differences T_jj - T_j,j-1),
the rounding (modelled from the Lebesgue constant of T_jj, or the ball radii in arb),
relative to max(1, max |u|). The next step size and column come from the same estimates
and the work per unit step; the global estimate carries the errors made so far with the
flow's stretching. A step that will not come within tolerance, a step size below the
floor, or a run past its budget raises IntegrationError naming the layer, the time and
the step size. `ControlledReference` is the method "reference" of `solve`;
`solvers.reference_solution.solve_reference` returns the error estimates too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from solvers.backends import Array, Backend
from solvers.errors import IntegrationError, NumericalBreakdownError, WideBallsError
from solvers.events import crossings, locate_event, silent_units
from solvers.extrapolation import Extrapolation
from solvers.flow import LayerFlow
from solvers.integrators import (
    extrapolation_amplification,
    extrapolation_evaluations,
    extrapolation_rows,
)
from solvers.schemes import Span, Step, StepHook, SteppingMethod
from solvers.validation import positive_number

SAFETY, SAFETY_ERROR = 0.94, 0.65
"""ODEX's safety factors: h_new = h SAFETY (SAFETY_ERROR / err)^(1 / (2j - 1))."""
GROWTH_LIMITS = (0.02, 4.0)
"""The factor between one step size and the next stays in this range."""
MAX_REJECTIONS = 30
"""Consecutive rejections after which the step is declared impossible (stiff or unstable)."""
MAX_COLUMNS = 40
"""The most columns (order 80) a step may use, at any precision."""
ROUNDING_FACTOR = 4.0
"""A step at column j adds at most ROUNDING_FACTOR (Lambda_j + 2) unit roundoffs of the
state's size (Lambda_j: the Lebesgue constant of T_jj; the 2: the projection and the last
addition): measured 0.3 to 1.8 of (Lambda_j + 2) per step of float64 columns 3 to 13
against the same steps at 36 digits (docs/schemes.md section 7)."""
TRUNCATION_SAFETY = 2.0
"""The truncation error of the accepted T_jj is estimated as this times the larger of
d_j = |T_jj - T_j,j-1| and the d_j that d_j-1 and d_j-2 predict (`_truncation`): the
differences alternate in size, and one that cancels by chance is no sign of convergence
(on a post-LN GELU step of 0.5, d_8 = 4.5e-13 while T_88 is off by 3.6e-12); far from the
asymptotic regime T_jj is off by about d_j, not far less (0.3 to 1.3 times over columns
2 to 16 of a step of length 1 on the exact linear-FFN solution; docs/schemes.md
section 7)."""
ROUNDING_SHARE = 0.5
"""A column is usable while its rounding is within this share of the tolerance."""
MAX_STEPS = 100_000
"""The default budget of steps (accepted and rejected) of one run."""
TOLERANCE_FLOOR = 1000
"""The tolerance is at least this many unit roundoffs: there the rounding share leaves
columns up to 8 (order 16) usable; at 100 it would leave 4."""
STEP_FLOOR = 64
"""The smallest step, in unit roundoffs of max(1, |t|); a remainder of a layer below
4 STEP_FLOOR of them (left by a kink just before its end) is crossed by one Heun step."""
RADIUS_SHARE = 0.5
"""In arb, ball radii above this share of the tolerance cannot be stepped away (a shorter
step does not narrow them): the run stops and certification adds guard bits."""


def tolerance_for(bk: Backend, tol: float | None) -> float:
    """The tolerance a run in bk works to: `tol`, raised to TOLERANCE_FLOOR unit roundoffs
    (the working precision, also the default)."""
    floor = TOLERANCE_FLOOR * bk.unit_roundoff
    return floor if tol is None else max(positive_number("tol", tol), floor)


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

    def step(
        self, flow: LayerFlow, n: int, t: Array, u: Array, h: Array, pattern: Array | None = None
    ) -> Array:
        """u(t + h) to the tolerance, in as many controlled steps as that needs; with
        `pattern`, along the flow with that activation pattern held (no events)."""
        controller = Controller(flow, tolerance_for(flow.bk, self.tol), self.max_steps, Work())
        return controller.cross(n, t, u, h, pattern)

    def advance(
        self, flow: LayerFlow, span: Span, u: Array, on_step: StepHook | None = None
    ) -> Array:
        """u at the end of the span, with every ReLU kink located; `on_step` sees every
        accepted step with the pattern it held."""
        bk = flow.bk
        controller = Controller(
            flow, tolerance_for(bk, self.tol), self.max_steps, Work(),
            max_step=bk.to_float64(span.length) / span.steps,
        )  # fmt: skip
        return controller.cross(span.layer, span.start, u, span.length, on_step=on_step)


class Controller:
    """Step size and column control over one flow (ODEX's rules, simplified).

    The largest column j is the last whose modelled rounding (`rounding`) is within
    ROUNDING_SHARE of the tolerance: beyond it the tableau's differences are rounding,
    and no step size brings them down. The first column is ODEX's, about
    0.6 log10(1 / tol) + 1.5 (order twice that), below the largest. `work` collects the
    counts over every call; `error` is the global estimate so far.
    """

    def __init__(
        self, flow: LayerFlow, tol: float, max_steps: int, work: Work, max_step: float = 1.0
    ) -> None:
        self.flow, self.bk, self.tol, self.max_steps, self.work = (
            flow, flow.bk, tol, max_steps, work,
        )  # fmt: skip
        self.max_columns = 3  # the rounding grows with the column: the first too many ends it
        while (
            self.max_columns < MAX_COLUMNS
            and self.rounding(self.max_columns + 1) <= ROUNDING_SHARE * tol
        ):
            self.max_columns += 1
        start = int(0.6 * -math.log10(tol) + 1.5)
        self.columns = min(self.max_columns - 1, max(3, start))
        self.max_step = max_step
        self.h = max_step
        self.error = 0.0
        """The estimated global max-abs error of the state reached so far."""
        self.direction: np.ndarray | None = None
        """The signed direction of that error (see `_carry`)."""

    def rounding(self, columns: int) -> float:
        """The rounding error a step at `columns` may add, relative to the state's size:
        ROUNDING_FACTOR (Lambda_j + 2) unit roundoffs."""
        return ROUNDING_FACTOR * (extrapolation_amplification(columns) + 2) * self.bk.unit_roundoff

    def cross(
        self,
        n: int,
        t: Array,
        u: Array,
        length: Array,
        pattern: Array | None = None,
        on_step: StepHook | None = None,
    ) -> Array:
        """u at t + length from u at t under layer n's controls; `error` grows by the steps'
        estimates (see `_carry`). Without `pattern`, a ReLU layer's steps hold the pattern
        of their start and stop at the first kink (docs/schemes.md section 4)."""
        bk, flow = self.bk, self.flow
        relu = any(w.activation == "relu" for w in flow.controls.acting_on(n))
        silent = silent_units(flow, n)
        end = t + length
        positive = None
        if relu and pattern is None:
            positive = bk.to_float64(flow.preactivations(n, t, u)) > 0
        sliver = 4 * STEP_FLOOR * bk.unit_roundoff * max(1.0, abs(bk.to_float64(end)))
        while bk.to_float64(end - t) > 0:
            remaining = bk.to_float64(end - t)
            if remaining <= sliver:
                return self._sliver(n, t, u, end - t, pattern)
            h = min(self.h, self.max_step)
            size = bk.asarray(h) if h < remaining - sliver else end - t
            if positive is not None:
                pattern = bk.asarray(positive.astype(np.float64))
            size, stepped, estimate, difference, columns = self._step(n, t, u, size, pattern)
            if positive is not None:
                z_end = flow.preactivations(n, t + size, stepped)
                if crossings(bk, z_end, positive, silent).any():
                    size, stepped, unit = self._event(
                        n, t, u, size, pattern, columns, positive, silent
                    )
                    estimate += bk.max_radius(stepped)  # the trial step's rounding (arb)
                    stepped = bk.midpoints(stepped)
                    self.work.events.append(
                        ReferenceEvent(n, float(bk.to_float64(t + size)), tuple(map(int, unit)))
                    )
                    positive = positive.copy()
                    positive[unit] = ~positive[unit]
            if on_step is not None:
                on_step(Step(n, t, size, u, stepped, pattern))
            self._carry(n, t, u, size, pattern, estimate, difference)
            t, u = t + size, stepped
        return u

    def _carry(self, n, t, u, size, pattern, estimate: float, difference: np.ndarray) -> None:
        """The global estimate after a step: the error carried in, times the step's growth
        factor exp(h max(rho, 0)), plus the step's own estimate. rho = <e, J e> / <e, e> is
        the rate at which the flow stretches the carried error's direction e (the signed
        sum of the steps' T_jj - T_j,j-1), the largest over the members of a batch, from a
        difference quotient of the field at the step's start taken in the working
        precision: two field evaluations (docs/schemes.md section 7)."""
        bk, flow = self.bk, self.flow
        growth = 1.0
        norm = float(np.linalg.norm(self.direction)) if self.direction is not None else 0.0
        if self.error > 0 and norm > 0:
            unit = self.direction / norm
            delta = math.sqrt(bk.unit_roundoff) * flow.scale(u)
            shifted = u + bk.asarray(delta * unit)
            field = partial(flow.field, n, t, pattern=pattern)
            stretch = bk.to_float64(field(shifted) - field(u)) / delta
            self.work.evaluations += 2
            along = np.sum(unit * stretch, axis=(-2, -1)).ravel()
            length = np.sum(unit * unit, axis=(-2, -1)).ravel()
            rates = along[length > 0] / length[length > 0]
            if not np.all(np.isfinite(rates)):
                raise NumericalBreakdownError(
                    f"layer {n}, t = {bk.to_float64(t):.6g}: the flow's stretching of the "
                    "error is not finite"
                )
            rho = float(np.max(rates))
            growth = math.exp(min(bk.to_float64(size) * max(rho, 0.0), 700.0))
        self.error = self.error * growth + estimate
        carried = 0.0 if self.direction is None else self.direction * growth
        self.direction = carried + difference

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
            outcome = self._attempt(n, t, u, size, pattern, scale)
            if outcome is not None:
                value, estimate, difference, columns = outcome
                self.work.accepted += 1
                # the radii (arb: this step's rounding, with the projection's) join its
                # estimate, and the balls start the next step as points: radii do not
                # compound step after step
                state = flow.project(n, t + size, value)
                estimate += bk.max_radius(state)
                return size, bk.midpoints(state), estimate, difference, columns
            self.work.rejected += 1
            rejections += 1
            if rejections >= MAX_REJECTIONS:
                raise IntegrationError(
                    f"layer {n}, t = {bk.to_float64(t):.6g}: {rejections} rejections in a row, "
                    f"step size {self.h:.3g}; the error estimate will not come down (a stiff "
                    "or unstable field)"
                )
            size = bk.asarray(min(self.h, self.max_step))

    def _attempt(self, n, t, u, size, pattern, scale):
        """Rows up to the target column + 1; accept the first of columns k - 1, k, k + 1
        whose estimate is within tol (ODEX's convergence monitor), and set the next step
        size and column; None (with a smaller step size set) when none is."""
        bk, flow = self.bk, self.flow
        h, target = bk.to_float64(size), self.columns
        last = min(target + 1, self.max_columns)
        field = partial(flow.field, n, pattern=pattern)
        ratio, differences, rows = {}, [], last
        for j, (value, neighbour) in enumerate(
            extrapolation_rows(bk, field, t, u, size, last), start=1
        ):
            if j == 1:
                continue
            difference = value - neighbour
            differences.append(flow.size(bk.to_float64(difference)))
            truncation = _truncation(differences)
            if not math.isfinite(truncation):
                rows = j
                break
            radius = bk.max_radius(value)
            if radius > RADIUS_SHARE * self.tol * scale and truncation <= self.tol * scale:
                # the radii, not the truncation, are what fails: a shorter step won't help
                self.work.evaluations += extrapolation_evaluations(j)
                raise WideBallsError(
                    f"layer {n}, t = {bk.to_float64(t):.6g}, step {h:.3g}: ball radii "
                    f"{radius:.3g} exceed {RADIUS_SHARE:g} of the tolerance; more guard bits",
                    radius, RADIUS_SHARE * self.tol * scale,
                )  # fmt: skip
            # truncation, and the step's rounding: measured by the radii in balls (added
            # after the projection, _step), modelled otherwise; the step size controls the
            # truncation within what the rounding leaves
            modelled = 0.0 if bk.measures_rounding else self.rounding(j) * scale
            estimate = truncation + modelled
            ratio[j] = (truncation + radius) / (self.tol * scale - modelled)
            if j >= target - 1 and ratio[j] <= 1:
                self.work.evaluations += extrapolation_evaluations(j)
                self._plan(h, j, ratio)
                if not bk.all_finite(value):
                    raise NumericalBreakdownError(f"{bk!r} produced inf or NaN in layer {n}")
                return value, estimate, flow.judged(bk.to_float64(difference)), j
        self.work.evaluations += extrapolation_evaluations(rows)
        worst = ratio.get(min(target, last), math.inf) if ratio else math.inf
        self.h = h * _factor(worst, min(target, last), low=0.1, high=0.5)
        return None

    def _plan(self, h: float, j: int, ratio: dict[int, float]) -> None:
        """The next column and step size: the column of least work per unit step among
        j - 1, j (and j + 1 when the target was met at its own column)."""
        optimal = {i: h * _factor(r, i) for i, r in ratio.items()}
        work = {i: extrapolation_evaluations(i) / optimal[i] for i in optimal}
        column = j
        if j - 1 in work and work[j - 1] < 0.9 * work[j]:
            column = j - 1
        elif j == self.columns and j < self.max_columns:
            column = j + 1
            optimal[column] = min(
                h * GROWTH_LIMITS[1],
                optimal[j] * extrapolation_evaluations(j + 1) / extrapolation_evaluations(j),
            )
        self.columns = max(2, column)
        self.h = optimal.get(column, optimal[j])

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
        self.error += bk.to_float64(h) * drift / 2 + self.rounding(1) * flow.scale(u)
        self.error += bk.max_radius(state)
        return bk.midpoints(state)

    def _event(self, n, t, u, size, pattern, columns, positive, silent):
        """The first kink in (t, t + size] along the accepted step's frozen pattern, by trial
        steps of the accepted column (shorter than the accepted step, so no less accurate)."""
        bk, flow = self.bk, self.flow
        fixed = Extrapolation(levels=columns)

        def trial(tau: Array) -> tuple[Array, Array]:
            self.work.evaluations += extrapolation_evaluations(columns)
            state = fixed.step(flow, n, t, u, tau, pattern)
            return state, flow.preactivations(n, t + tau, state)

        where = f"layer {n}, t = {bk.to_float64(t):.6g}"
        z_start = flow.preactivations(n, t, u)
        return locate_event(bk, trial, z_start, size, positive, silent, where)


def _truncation(differences: list[float]) -> float:
    """TRUNCATION_SAFETY max(d_j, d_j-1 min(1, d_j-1 / d_j-2)) from d_2, ..., d_j: the last
    difference, or the one its two predecessors predict if that is larger."""
    *earlier, last = differences
    predicted = 0.0
    if len(earlier) == 1:
        predicted = earlier[-1]
    elif len(earlier) >= 2:
        previous, before = earlier[-1], earlier[-2]
        predicted = previous * min(1.0, previous / before) if before > 0 else previous
    return TRUNCATION_SAFETY * max(last, predicted)


def _factor(ratio: float, column: int, low: float = GROWTH_LIMITS[0], high: float = 4.0):
    """h_new / h for an estimate `ratio` (error / tolerance) at column j (order 2j)."""
    if not ratio > 0:
        return high
    if not math.isfinite(ratio):
        return low
    factor = SAFETY * (SAFETY_ERROR / ratio) ** (1 / (2 * column - 1))
    return min(high, max(low, factor))
