"""The error-controlled reference: extrapolation whose own error estimate drives the step
size and the order, steps to every layer boundary and ReLU kink, and reports its error
(docs/schemes.md sections 3, 4 and 7).

Each step builds the Gragg-Bulirsch-Stoer tableau row by row and accepts the first
diagonal entry T_jj (j near the target column k) whose estimate |T_jj - T_j,j-1| is
within the tolerance, as Hairer and Wanner's ODEX does; the next step size and column
come from the same estimates and the work per unit step. A step that will not come
within tolerance, a step size below the floor, or a run past its budget raises
IntegrationError naming the layer, the time and the step size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from solvers.backends import Array, Backend
from solvers.backends import backend as resolve_backend
from solvers.driver import layer_lengths
from solvers.errors import IntegrationError, NumericalBreakdownError
from solvers.events import crossings, locate_event, silent_units
from solvers.flow import LayerFlow
from solvers.integrators import extrapolation_evaluations, extrapolation_rows
from solvers.methods import checked_method
from solvers.problem import Problem
from solvers.reference import Reference
from solvers.validation import positive_int, positive_number

SAFETY, SAFETY_ERROR = 0.94, 0.65
"""ODEX's safety factors: h_new = h SAFETY (SAFETY_ERROR / err)^(1 / (2j - 1))."""
GROWTH_LIMITS = (0.02, 4.0)
"""The factor between one step size and the next stays in this range."""
MAX_REJECTIONS = 30
"""Consecutive rejections after which the step is declared impossible (stiff or unstable)."""
ROUNDING_PER_EVALUATION = 4
"""Unit roundoffs of the state's size that each field evaluation of a step may add to its
error (the midpoint sub-steps and the extrapolation's combination of them)."""
TOLERANCE_FLOOR = 100
"""The tolerance is at least this many unit roundoffs: the estimate cannot resolve less."""


@dataclass(frozen=True)
class ReferenceEvent:
    """A located ReLU kink: the layer, the time, and the hidden unit that switched."""

    layer: int
    time: float
    unit: tuple[int, ...]


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


@dataclass
class _Work:
    accepted: int = 0
    rejected: int = 0
    evaluations: int = 0
    events: list[ReferenceEvent] = field(default_factory=list)


def solve_reference(
    problem: Problem,
    tol: float | None = None,
    backend: str | Backend = "float64",
    *,
    max_steps: int = 100_000,
) -> ReferenceSolution:
    """Integrate the problem's flow (the continuous limit: post-LN on each layer's S2) to a
    tolerance `tol` on the max-abs local error relative to max(1, max |u|), by default
    the working precision (TOLERANCE_FLOOR unit roundoffs; a smaller tol is raised to it).

    `error[n]` sums the accepted steps' estimates up to layer boundary n: the truncation
    estimate |T_jj - T_j,j-1| (which bounds the local error of the lower-order neighbour
    of the value taken), the ball radii in arb, and ROUNDING_PER_EVALUATION unit roundoffs
    per field evaluation; an upper estimate while the flow does not amplify errors. At
    most `max_steps` steps (accepted and rejected) in all.
    """
    checked_method(problem, "reference")
    bk = resolve_backend(backend)
    floor = TOLERANCE_FLOOR * bk.unit_roundoff
    tol = floor if tol is None else max(positive_number("tol", tol), floor)
    max_steps = positive_int("max_steps", max_steps)
    attempts: list[tuple[_Work, list[float]]] = []  # certification may run it again

    def computation(working: Backend) -> Array:
        work, errors = _Work(), [0.0]
        attempts.append((work, errors))
        flow = LayerFlow.from_problem(problem, working)
        stepper = _Controller(flow, tol, max_steps, work)
        u = problem.initial_state(working)
        states, total = [u], 0.0
        with np.errstate(over="ignore", invalid="ignore"):
            for n, length in enumerate(layer_lengths(problem.t_final)):
                u = flow.project(n, working.asarray(n), u)
                u, committed = stepper.layer(n, u, length)
                total += committed
                states.append(u)
                errors.append(total)
        return np.stack(states)

    states = bk.to_output(bk.certify(computation))
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


class _Controller:
    """Step size and column control over one flow (ODEX's rules, simplified)."""

    def __init__(self, flow: LayerFlow, tol: float, max_steps: int, work: _Work) -> None:
        self.flow, self.bk, self.tol, self.max_steps, self.work = (
            flow, flow.bk, tol, max_steps, work,
        )  # fmt: skip
        digits = -math.log10(self.bk.unit_roundoff)
        self.max_columns = int(min(40, max(8, digits // 2 + 4)))
        self.columns = min(self.max_columns, max(3, int(digits // 4)))
        self.h = 1.0

    def layer(self, n: int, u: Array, length) -> tuple[Array, float]:
        """u at the end of layer n from u at its start, and the error estimates committed."""
        bk, flow = self.bk, self.flow
        relu = any(w.activation == "relu" for w in flow.controls.acting_on(n))
        silent = silent_units(flow.controls, n)
        t, end = bk.asarray(n), bk.asarray(n) + bk.asarray(length)
        committed = 0.0
        positive = bk.to_float64(flow.preactivations(n, t, u)) > 0 if relu else None
        while bk.to_float64(end - t) > 0:
            remaining = bk.to_float64(end - t)
            size = bk.asarray(self.h) if self.h < remaining * (1 - 1e-12) else end - t
            pattern = None if positive is None else bk.asarray(positive.astype(np.float64))
            size, stepped, estimate, columns = self._step(n, t, u, size, pattern)
            if positive is not None:
                z_end = flow.preactivations(n, t + size, stepped)
                if crossings(bk, z_end, positive, silent).any():
                    size, stepped, unit = self._event(
                        n, t, u, size, pattern, columns, positive, silent
                    )
                    self.work.events.append(
                        ReferenceEvent(n, float(bk.to_float64(t + size)), tuple(map(int, unit)))
                    )
                    positive = positive.copy()
                    positive[unit] = ~positive[unit]
            committed += estimate
            t, u = t + size, stepped
        return u, committed

    def _step(self, n: int, t: Array, u: Array, size: Array, pattern: Array | None):
        """One accepted step from (t, u) of at most `size` (shrunk on rejection): its size,
        the state, its error estimate (absolute) and the column it was taken at."""
        bk, flow = self.bk, self.flow
        scale = max(1.0, float(np.max(np.abs(bk.to_float64(u)))))
        rejections = 0
        while True:
            if self.work.accepted + self.work.rejected >= self.max_steps:
                raise IntegrationError(
                    f"layer {n}, t = {bk.to_float64(t):.6g}: the reference used its budget of "
                    f"{self.max_steps} steps (step size {bk.to_float64(size):.3g})"
                )
            h = bk.to_float64(size)
            if h < 64 * bk.unit_roundoff * max(1.0, abs(bk.to_float64(t))):
                raise IntegrationError(
                    f"layer {n}, t = {bk.to_float64(t):.6g}: the step size fell to {h:.3g}, "
                    "below the floor of the number format (a stiff or unstable field)"
                )
            outcome = self._attempt(n, t, u, size, pattern, scale)
            if outcome is not None:
                value, estimate, columns = outcome
                self.work.accepted += 1
                return size, flow.project(n, t + size, value), estimate, columns
            self.work.rejected += 1
            rejections += 1
            if rejections >= MAX_REJECTIONS:
                raise IntegrationError(
                    f"layer {n}, t = {bk.to_float64(t):.6g}: {rejections} rejections in a row, "
                    f"step size {self.h:.3g}; the error estimate will not come down (a stiff "
                    "or unstable field)"
                )
            size = bk.asarray(self.h)

    def _attempt(self, n, t, u, size, pattern, scale):
        """Rows up to the target column + 1; accept the first of columns k - 1, k, k + 1
        whose estimate is within tol (ODEX's convergence monitor), and set the next step
        size and column; None (with a smaller step size set) when none is."""
        bk, flow = self.bk, self.flow
        h, target = bk.to_float64(size), self.columns
        last = min(target + 1, self.max_columns)

        def field(s: Array, v: Array) -> Array:
            return flow.tangent(n, s, v, flow.total(n, s, v, pattern))

        ratio = {}
        for j, (value, neighbour) in enumerate(
            extrapolation_rows(bk, field, t, u, size, last), start=1
        ):
            if j == 1:
                continue
            difference = value - neighbour
            truncation = float(np.max(np.abs(bk.to_float64(difference))))
            if not math.isfinite(truncation):
                break
            ratio[j] = truncation / (self.tol * scale)
            if j >= target - 1 and ratio[j] <= 1:
                evaluations = extrapolation_evaluations(j)
                self.work.evaluations += evaluations
                self._plan(h, j, ratio)
                # truncation, the ball radii (arb), and rounding: ROUNDING_PER_EVALUATION
                # unit roundoffs of the state's size for every field evaluation of the step
                rounding = ROUNDING_PER_EVALUATION * evaluations * bk.unit_roundoff * scale
                estimate = truncation + bk.max_radius(value) + rounding
                if not bk.all_finite(value):
                    raise NumericalBreakdownError(f"{bk!r} produced inf or NaN in layer {n}")
                return value, estimate, j
        self.work.evaluations += extrapolation_evaluations(last)
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
            optimal[column] = (
                optimal[j] * extrapolation_evaluations(j + 1) / extrapolation_evaluations(j)
            )
        self.columns = max(2, column)
        self.h = optimal.get(column, optimal[j])

    def _event(self, n, t, u, size, pattern, columns, positive, silent):
        """The first kink in (t, t + size] along the accepted step's frozen pattern, by trial
        steps of the accepted column (shorter than the accepted step, so no less accurate)."""
        bk, flow = self.bk, self.flow
        fixed = Reference(levels=columns)

        def trial(tau: Array) -> tuple[Array, Array]:
            self.work.evaluations += extrapolation_evaluations(columns)
            state = fixed.step(flow, n, t, u, tau, pattern)
            return state, flow.preactivations(n, t + tau, state)

        where = f"layer {n}, t = {bk.to_float64(t):.6g}"
        z_start = flow.preactivations(n, t, u)
        return locate_event(bk, trial, z_start, size, positive, silent, where)


def _factor(ratio: float, column: int, low: float = GROWTH_LIMITS[0], high: float = 4.0):
    """h_new / h for an estimate `ratio` (error / tolerance) at column j (order 2j)."""
    if not ratio > 0:
        return high
    if not math.isfinite(ratio):
        return low
    factor = SAFETY * (SAFETY_ERROR / ratio) ** (1 / (2 * column - 1))
    return min(high, max(low, factor))
