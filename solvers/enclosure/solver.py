"""`enclose`: balls that contain the exact solution of a smooth flow at every layer
boundary (docs/enclosures.md section 4).

One step from the set X = {x : ||x - m||_2 <= r} at time t to t + h, on layer n:

1. an a priori box B holding every solution from X on [t, t + h] (bounds.a_priori_box);
2. the Taylor coefficients u_0 .. u_{K-1} of the solution through the point m, and u_K
   over ([t, t + h], B), which encloses the Lagrange remainder: component i of u(t + h)
   is sum_{j<K} u_{i,j} h^j + u_{i,K}(xi_i) h^K for some xi_i in (t, t + h), and the
   solution at xi_i lies in B;
3. the spread of X carried by the logarithmic Euclidean norm mu of the Jacobian on B:
   every solution from X ends within exp(h mu) r of the one from m in the Euclidean norm
   (bounds.log_norm_bound).

The solution from m lies in the balls P = sum_{j<K} u_j h^j + u_K h^K (midpoints m',
radii r_P), so the new set is {x : ||x - m'||_2 <= ||r_P||_2 + exp(h mu) r}, and each
component lies in its ball of P widened by exp(h mu) r, every operation in arb balls, so
rounding is bounded with the rest.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import flint
import numpy as np

from solvers.backends import Array, Backend
from solvers.backends import backend as number_system
from solvers.enclosure.bounds import UNIT, a_priori_box, euclidean_radius, log_norm_bound
from solvers.enclosure.scope import check_scope
from solvers.enclosure.taylor_flow import field_jacobian, solution_coefficients
from solvers.equation.flow import LayerFlow
from solvers.equation.problem import Problem
from solvers.errors import IntegrationError, InvalidInputError

SAFETY = 0.7
"""The proposed step is this fraction of the one the point coefficients suggest."""
GROWTH = 2.0
"""A step is at most this many times the previous accepted one."""
REMAINDER_SLACK = 4.0
"""A step is rejected when its remainder bound exceeds the local tolerance by this factor
(the proposals aim at the tolerance itself)."""
MAX_REJECTIONS = 30
"""Rejected attempts allowed in a row before the enclosure gives up (IntegrationError)."""


@dataclass(frozen=True)
class Enclosure:
    """Balls containing the exact solution at t = 0, 1, ..., t_final (`states`, object
    arrays of the state's shape); `width[n]` the largest radius at boundary n relative to
    max(1, max |u|); the work, summed over the inputs of a batch (each enclosed on its
    own): accepted `steps`, `rejected` attempts, Taylor evaluations of the field
    (`taylor_evaluations`, each of `order` + 1 coefficients or a Jacobian) and `seconds`;
    `digits` of arb, the local `tolerance` and the Taylor `order` K."""

    states: list[Array]
    width: list[float]
    steps: int
    rejected: int
    taylor_evaluations: int
    order: int
    digits: int
    tolerance: float
    seconds: float

    def contains(self, states: list[Array]) -> list[np.ndarray]:
        """Per boundary, a boolean array: whether each component of `states` (balls,
        decimal strings or floats, read at this enclosure's precision) lies in its ball."""
        arb = number_system("arb", self.digits)
        inside = np.frompyfunc(lambda ball, x: ball.contains(x), 2, 1)
        with arb.active():
            return [
                np.asarray(inside(ours, arb.asarray(other)), dtype=bool)
                for ours, other in zip(self.states, states, strict=True)
            ]


def enclose(
    problem: Problem,
    backend: Backend | None = None,
    *,
    tol: float | None = None,
    order: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Enclosure:
    """Enclosures of the exact solution of `problem` at every layer boundary.

    `backend` is arb at the working digits D (backend("arb", 40) by default); `tol` the
    local truncation allowed per unit time, relative to max(1, |u|) (10^-(D - 5) by
    default); `order` the Taylor order K (by default about -ln(tol) / 2, Jorba and Zou's
    choice). Problems outside docs/enclosures.md section 5 (ReLU, post-LN, forcing) raise
    OutOfScopeError; a step that cannot be validated even when short raises
    IntegrationError. `progress` receives a line per layer.
    """
    started = time.perf_counter()
    arb = backend if backend is not None else number_system("arb", 40)
    taylor = arb.taylor_series()
    check_scope(problem)
    tol = default_tolerance(arb.digits) if tol is None else float(tol)
    if not 0 < tol < 1:
        raise InvalidInputError(f"tol must lie in (0, 1), got {tol!r}")
    order = default_order(tol) if order is None else int(order)
    if order < 2:
        raise InvalidInputError(f"order must be at least 2, got {order!r}")
    inputs = _inputs(problem)

    def said(b: int) -> Callable[[str], None] | None:
        if progress is None or len(inputs) == 1:
            return progress
        return lambda line: progress(f"input {b + 1} of {len(inputs)}: {line}")

    parts = [
        _enclose_input(p, arb, taylor, tol, order, started, said(b)) for b, p in enumerate(inputs)
    ]
    with taylor.active():
        states = [
            np.stack(boundary) if problem.u0.ndim == 3 else boundary[0]
            for boundary in zip(*(states for states, _ in parts), strict=True)
        ]
        width = [_width(taylor, s) for s in states]
    return Enclosure(
        states,
        width,
        sum(stepper.steps for _, stepper in parts),
        sum(stepper.rejected for _, stepper in parts),
        sum(stepper.evaluations for _, stepper in parts),
        order,
        arb.digits,
        tol,
        time.perf_counter() - started,
    )


def default_tolerance(digits: int) -> float:
    """The local truncation per unit time allowed by default at `digits`: 10^-(digits - 5)."""
    return 10.0 ** -(digits - 5)


def default_order(tol: float) -> int:
    """The Taylor order K by default: max(8, ceil(-ln(tol) / 2)), Jorba and Zou's choice."""
    return max(8, math.ceil(-math.log(tol) / 2))


def _inputs(problem: Problem) -> list[Problem]:
    """The inputs of a batch as problems of their own (the problem itself for one (N, d)
    input): they do not interact, so each is enclosed with its own steps and its own
    spread, and one input's wide set never widens another's."""
    if problem.u0.ndim == 2:
        return [problem]
    mask = problem.mask
    return [
        dataclasses.replace(
            problem, u0=u0, mask=mask if mask is None or np.ndim(mask) == 1 else mask[b]
        )
        for b, u0 in enumerate(problem.u0)
    ]


def _enclose_input(
    problem: Problem,
    arb: Backend,
    taylor: Backend,
    tol: float,
    order: int,
    started: float,
    progress: Callable[[str], None] | None,
) -> tuple[list[Array], _Stepper]:
    """The balls at every boundary of one input, and the stepper that made them."""
    stepper = _Stepper(problem, taylor, tol, order)
    with taylor.active():
        state = problem.initial_state(arb)
        states = [state]
        ends = [Fraction(n) for n in range(1, math.ceil(problem.t_final))]
        ends.append(Fraction(problem.t_final))
        start = Fraction(0)
        for n, end in enumerate(ends):
            state = stepper.layer(n, start, end, state)
            states.append(state)
            start = end
            if progress is not None:
                progress(
                    f"layer {n}: {stepper.steps} steps, width {_width(taylor, state):.3g}, "
                    f"{time.perf_counter() - started:.1f} s"
                )
    return states, stepper


class _Stepper:
    """The validated steps of one enclosure (see the module docstring)."""

    def __init__(self, problem: Problem, taylor: Backend, tol: float, order: int) -> None:
        with taylor.active():
            self.flow = LayerFlow.from_problem(problem, taylor)
        self.bk = taylor
        self.tol, self.order = tol, order
        self.steps = self.rejected = self.evaluations = 0
        self.next_step: float | None = None
        self.spread: flint.arb | None = None
        """r, the Euclidean radius of the set around the midpoints of the last state."""

    def layer(self, n: int, t: Fraction, end: Fraction, state: Array) -> Array:
        while t < end:
            state, h = self._step(n, t, end, state)
            t += h
        return state

    def _step(self, n: int, t: Fraction, end: Fraction, state: Array) -> tuple[Array, Fraction]:
        middle = self.bk.midpoints(state)
        spread = euclidean_radius(state) if self.spread is None else self.spread
        scale = self.bk.error_scale(middle)
        coefficients = solution_coefficients(self.flow, n, _ball(t), middle, self.order)
        self.evaluations += 1
        h = self._proposal(coefficients, scale)
        box = middle + UNIT * spread
        for _ in range(MAX_REJECTIONS):
            if not h > 0:  # a coefficient beyond float64's range, or an underflow: a step
                break  # of length 0 would be accepted (box and remainder vanish) forever
            step = min(Fraction(h), end - t)
            accepted, excess = self._attempt(n, t, step, middle, box, spread, coefficients, scale)
            factor = _step_factor(excess, self.order)
            if accepted is not None:
                self.steps += 1
                self.next_step = float(step) * min(GROWTH, factor)
                state, self.spread = accepted
                return state, step
            self.rejected += 1
            h = float(step) * min(0.5, factor)
        raise IntegrationError(
            f"no step from t = {float(t):.6g} on layer {n} could be validated down to h = "
            f"{h:.3g} (the a priori box or the remainder failed; docs/enclosures.md section 4)"
        )

    def _proposal(self, coefficients: list[Array], scale: float) -> float:
        """h with |u_j| h^j <= tol h scale for j = K - 1 and K (Jorba and Zou), times
        SAFETY, at most what the last step's remainder allows."""
        candidates = []
        for j in (self.order - 1, self.order):
            size = float(np.max(np.abs(self.bk.to_float64(coefficients[j]))))
            if size > 0:
                candidates.append((self.tol * scale / size) ** (1 / (j - 1)))
        h = SAFETY * min(candidates, default=1.0)
        if self.next_step is not None:
            h = min(h, self.next_step)
        return float(np.float64(h))

    def _attempt(
        self,
        n: int,
        t: Fraction,
        h: Fraction,
        middle: Array,
        box: Array,
        spread: flint.arb,
        coefficients: list[Array],
        scale: float,
    ) -> tuple[tuple[Array, flint.arb] | None, float]:
        """The balls at t + h with the set's Euclidean radius around their midpoints, and
        the remainder bound over the local tolerance (inf where the a priori box failed);
        None for the set where the step is rejected."""
        length = _ball(h)
        step = (UNIT + 1) * (length / 2)  # [0, h]
        times = _ball(t) + step
        a_priori = a_priori_box(lambda s, u: self.flow.field(n, s, u), times, box, step, scale)
        self.evaluations += 1
        if a_priori is None:
            return None, math.inf
        remainder = solution_coefficients(self.flow, n, times, a_priori, self.order)[-1]
        self.evaluations += 1
        remainder = remainder * length**self.order
        allowed = REMAINDER_SLACK * self.tol * float(h) * scale
        if not all(x.is_finite() for x in np.ravel(remainder)):
            return None, math.inf
        size = float(np.max(np.abs(self.bk.to_float64(remainder))))
        excess = (size + self.bk.max_radius(remainder)) / allowed
        if excess > 1:
            return None, excess
        mu = log_norm_bound(field_jacobian(self.flow, n, times, a_priori))
        self.evaluations += 1
        if not mu.is_finite():
            return None, math.inf
        total = coefficients[self.order - 1]
        for k in range(self.order - 2, -1, -1):
            total = total * length + coefficients[k]
        point = total + remainder  # the solution from m; x + UNIT g keeps x's midpoints
        growth = (mu * length).exp() * spread
        return (point + UNIT * growth, (euclidean_radius(point) + growth).upper()), excess


def _step_factor(excess: float, order: int) -> float:
    """The next step over this one: the remainder grows like h^(K + 1), so SAFETY
    excess^(-1 / (K + 1)) aims at the tolerance; a failed a priori box (excess inf) halves
    the step, a zero remainder lets it grow by GROWTH."""
    if math.isinf(excess):
        return 0.5
    return SAFETY * excess ** (-1 / (order + 1)) if excess > 0 else GROWTH


def _ball(x: Fraction) -> flint.arb:
    return flint.arb(flint.fmpq(x.numerator, x.denominator))


def _width(bk: Backend, state: Array) -> float:
    """The largest radius relative to max(1, max |midpoint|)."""
    return bk.max_radius(state) / bk.error_scale(state)
