"""What every stepping method is: one step over [t, t + h] of a layer's flow, and the
equal-step crossing of a span that the layer loop asks for (docs/schemes.md section 5)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from solvers.backends import Array
from solvers.equation.flow import LayerFlow
from solvers.equation.norms import Placement, as_placement


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
    free_order: float
    """The order of convergence on a flow without a constraint set (pre-norm or no norm):
    the order of the method's own integrator (docs/orders.md section 1)."""
    on_ambient_field = False
    """Whether it steps the ambient field, before the tangent projection."""
    enters_constraint_set = True
    """Whether the driver projects onto the layer's constraint set at each layer start
    (the continuous problem starts from u(0) = P(f)); the Lie scheme does not, so that at
    dt = 1 it is the Transformer, whose input is not normalised."""

    def order(self, placement: Placement | str) -> float:
        """The order of convergence on a smooth flow with this norm placement (docs/orders.md
        section 1, which lists every method): `free_order`, except that a method on the
        ambient field of a constrained (post-norm) flow is of order 1, since an ambient
        step followed by the projection errs by O(h^2) in the normal part (docs/schemes.md
        section 2). The one place an expected order comes from."""
        if as_placement(placement).constrained and self.on_ambient_field:
            return 1
        return self.free_order

    def run(self, flow: LayerFlow, steps_per_unit: int) -> SteppingMethod:
        """The method that crosses the spans of one run of the layer loop on `flow`: itself,
        unless it carries state from layer to layer (the reference's controller,
        solvers.reference.method.ReferenceRun)."""
        return self

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
