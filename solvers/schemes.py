"""Time-stepping schemes as data: splittings, unsplit Runge-Kutta, and the paper's layer.

A layer is two sub-steps, attention then feed-forward, each with the layer norm placed
by `norm`; the Lie scheme takes each as an explicit Euler step, and at dt = 1 it is one
standard encoder layer (docs/model.md section 2). Lie and Strang splittings are sequences
of (term, fraction of the step, whether the clock advances) with a sub-solver on the
ambient or tangent sub-field (docs/schemes.md sections 1 and 5); an unsplit method applies
a tableau to the whole field, then projects (docs/schemes.md section 2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from solvers.backends import Array, Backend
from solvers.controls import PiecewiseControls
from solvers.errors import InvalidInputError
from solvers.flow import LayerFlow
from solvers.integrators import EULER, RK2, RK4, Tableau, extrapolation_step, rk_step, scaled
from solvers.operators import attention, layer_norm
from solvers.weights import BackendLayer, LayerWeights

SUB_FIELDS = ("ambient", "tangent")
ACCURATE_SUB_FLOW_LEVELS = 6  # one extrapolated step of order 12 per sub-step


@dataclass(frozen=True)
class Step:
    """One committed step of a method in layer n: from `before` at t to `after` at t + h.

    `pattern` is the hidden activation pattern the step held fixed (the reference with
    event location), None when the step used the activation itself. Replaying the step
    is method.step(flow, layer, t, v, h, pattern) for any v.
    """

    layer: int
    t: Array
    h: Array
    before: Array
    after: Array
    pattern: Array | None = None


StepHook = Callable[[Step], None]
"""Called by a method after every step it commits (instrumented studies)."""


@dataclass(frozen=True)
class Span:
    """The interval [start, start + length] of layer `layer`, to cross in `steps` equal
    steps (a method may cut a step short, never skip past the end)."""

    layer: int
    start: Array
    length: Array
    steps: int


class SteppingMethod:
    """A method that advances the flow over [t, t + h] in one step."""

    name: str
    order: int
    enters_constraint_set = True
    """Whether the driver projects onto the layer's constraint set at each layer start
    (the continuous problem starts from u(0) = P(f)); the Lie scheme does not, so that at
    dt = 1 it is the Transformer, whose input is not normalised."""

    def step(
        self, flow: LayerFlow, n: int, t: Array, u: Array, h: Array, pattern: Array | None = None
    ) -> Array:
        """u(t + h) from u(t) with layer n's controls; `pattern` (0/1 per hidden unit)
        replaces the activation's kink by a fixed linear piece (docs/schemes.md section 4)."""
        raise NotImplementedError

    def enter(self, flow: LayerFlow, n: int, u: Array) -> Array:
        """The state at the start of layer n: projected onto its constraint set if the
        method enters it (post-LN), else u."""
        return flow.project(n, flow.bk.asarray(n), u) if self.enters_constraint_set else u

    def advance(
        self, flow: LayerFlow, span: Span, u: Array, on_step: StepHook | None = None
    ) -> Array:
        """u at the end of `span` from u at its start: span.steps equal steps, all with
        the controls of layer span.layer."""
        n, h = span.layer, span.length / span.steps
        for i in range(span.steps):
            t = span.start + h * i
            after = self.step(flow, n, t, u, h)
            if on_step is not None:
                on_step(Step(n, t, h, u, after))
            u = after
        return u


@dataclass(frozen=True)
class Splitting(SteppingMethod):
    """Sub-steps (term, fraction of h, whether its clock advances) in order."""

    name: str
    order: int
    sequence: tuple[tuple[str, Fraction, bool], ...]
    sub_solver: Tableau | None  # None: an accurate sub-flow
    sub_field: str = "ambient"
    transformer: bool = False
    """The Transformer's own layer (the Lie scheme "lie"): raw input, the layer's FFN term,
    and P1 after attention, P2 after the FFN. Every other splitting steps the flow: it
    enters the constraint set of norm2, uses the flow's FFN term and projects each
    sub-step onto that set (docs/limits.md section 3)."""

    @property
    def enters_constraint_set(self) -> bool:
        return not self.transformer

    def step(
        self, flow: LayerFlow, n: int, t: Array, u: Array, h: Array, pattern: Array | None = None
    ) -> Array:
        bk = flow.bk
        clock = t
        for term, fraction, advances in self.sequence:
            size = scaled(bk, h, fraction)
            frozen = clock

            def field(s: Array, v: Array, term=term, frozen=frozen, advances=advances):
                clock_time = s if advances else frozen
                if term == "attention":
                    g = flow.attention_term(n, clock_time, v)
                elif self.transformer:
                    g = flow.ffn_term(n, clock_time, v, pattern)
                else:
                    g = flow.field_ffn_term(n, clock_time, v, pattern)
                if self.sub_field == "ambient":
                    return g
                return flow.tangent(n, s, v, g, moving=advances)

            if self.sub_solver is None:
                u = extrapolation_step(bk, field, clock, u, size, ACCURATE_SUB_FLOW_LEVELS)
            else:
                u = rk_step(bk, field, clock, u, size, self.sub_solver)
            if advances:
                clock = clock + size
            u = flow.project(n, clock, u, 1 if self.transformer and term == "attention" else 2)
        return u


@dataclass(frozen=True)
class Unsplit(SteppingMethod):
    """A tableau on the whole field (tangent or ambient), then the projection."""

    name: str
    order: int
    tableau: Tableau
    field: str = "tangent"

    def step(
        self, flow: LayerFlow, n: int, t: Array, u: Array, h: Array, pattern: Array | None = None
    ) -> Array:
        def field(s: Array, v: Array) -> Array:
            g = flow.total(n, s, v, pattern)
            return flow.tangent(n, s, v, g) if self.field == "tangent" else g

        return flow.project(n, t + h, rk_step(flow.bk, field, t, u, h, self.tableau))


HALF = Fraction(1, 2)
LIE_SEQUENCE = (("attention", Fraction(1), True), ("ffn", Fraction(1), False))
STRANG_SEQUENCE = (
    ("attention", HALF, True),
    ("ffn", Fraction(1), False),
    ("attention", HALF, True),
)

LIE = Splitting("lie", 1, LIE_SEQUENCE, EULER, "ambient", transformer=True)


def _splitting(kind: str, sub_solver: Tableau | None, sub_field: str) -> Splitting:
    """Lie or Strang with a sub-solver (None: the accurate sub-flow) on a sub-field."""
    solver = "exact" if sub_solver is None else sub_solver.name
    name = f"{kind}-{solver}" + ("" if sub_field == "tangent" else "-ambient")
    # Lie is first order whatever its sub-solvers; Strang is order 2 only with sub-solvers
    # of order >= 2 on the tangent sub-fields (docs/orders.md section 1)
    lifted = (sub_solver is None or sub_solver.order >= 2) and sub_field == "tangent"
    order = 2 if kind == "strang" and lifted else 1
    sequence = STRANG_SEQUENCE if kind == "strang" else LIE_SEQUENCE
    return Splitting(name, order, sequence, sub_solver, sub_field)


SUB_SOLVERS = (EULER, RK2, RK4, None)
LIES = tuple(_splitting("lie", solver, field) for solver in SUB_SOLVERS for field in SUB_FIELDS)
"""Lie with every sub-solver, stepping the flow (with one norm per layer, lie-euler-ambient
is the Transformer's own step, but projects the initial data first)."""
STRANGS = tuple(
    _splitting("strang", solver, field) for solver in SUB_SOLVERS for field in SUB_FIELDS
)
SPLITTINGS = (LIE, *LIES, *STRANGS)
UNSPLIT = (
    Unsplit("projected-rk4", 4, RK4, "tangent"),
    Unsplit("ambient-rk4", 1, RK4, "ambient"),
    Unsplit("projected-rk2", 2, RK2, "tangent"),
)


def lie_step(
    bk: Backend,
    u: Array,
    layer: LayerWeights,
    dt: Array,
    norm: str,
    score_bias: Array | None = None,
) -> Array:
    """One Lie step of size dt of a single layer's flow: the Transformer layer at dt = 1."""
    flow = LayerFlow(bk, PiecewiseControls([layer]), norm, score_bias=score_bias)
    return LIE.step(flow, 0, bk.asarray(0), u, dt)


def paper_six_substeps(
    bk: Backend, u: Array, layer: BackendLayer, score_bias: Array | None = None
) -> Array:
    """The paper's six sub-steps for one post-LN layer (square FFN, m = d):

        u1 = u + A(u); u2 = P1(u1); u3 = relu(u2 + u2 W1' + b1);
        u4 = u3 + u3 W2' + b2; u5 = (u4 + u2) / 2; u6 = P2(u5),

    with W1' = W1 - I and W2' = W2 - I. In exact arithmetic this is the post-LN Lie step
    with dt = 1 when the norms are projections (P(cV) = P(V) for c > 0 absorbs the 1/2);
    with eps > 0 the halving changes the result.
    """
    d = layer.w1.shape[0]
    if layer.w1.shape != (d, d):
        raise InvalidInputError(
            f"the six sub-step form needs a square FFN (d_ff = d = {d}), "
            f"got w1 of shape {layer.w1.shape}"
        )
    identity = bk.asarray(np.eye(d))
    w1_shifted, w2_shifted = layer.w1 - identity, layer.w2 - identity
    u1 = u + attention(bk, u, layer, score_bias)
    u2 = layer_norm(bk, u1, *layer.norm1, layer.eps)
    u3 = bk.relu_(u2 + bk.matmul(u2, w1_shifted) + layer.b1)
    u4 = u3 + bk.matmul(u3, w2_shifted) + layer.b2
    u5 = (u4 + u2) / 2
    return layer_norm(bk, u5, *layer.norm2, layer.eps)
