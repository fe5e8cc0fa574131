"""The high-order reference integrator, with event location for the ReLU kinks.

Gragg-Bulirsch-Stoer extrapolation of order 2 * levels on the flow's tangent field, then
the projection (docs/schemes.md section 3). With `events`, each step holds the activation
pattern of its start fixed and ends at the first zero crossing of a hidden
pre-activation, located by the Illinois iteration, so that the order survives the ReLU
kinks (docs/schemes.md section 4).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from solvers.backends import Array
from solvers.equation.flow import LayerFlow
from solvers.errors import IntegrationError
from solvers.integrators.tableaux import extrapolation_rows
from solvers.methods.kinks import ActivationPattern
from solvers.methods.stepping import Span, Step, StepHook, SteppingMethod

REFUSAL_SHARE = 0.1
"""A step whose own error estimate |T_LL - T_L,L-1| exceeds this share of the state's size
is refused: its tableau has not converged, and what it returns is no approximation of the
flow (on a stiff field a step too long for it gives an estimate of the order of the
state's size while the state blows up)."""


@dataclass(frozen=True)
class Extrapolation(SteppingMethod):
    """Extrapolated midpoint of order 2 * levels; `events` steps to every ReLU kink."""

    name: str = "extrapolation"
    levels: int = 12
    events: bool = True

    @property
    def free_order(self) -> int:
        return 2 * self.levels

    def step(
        self, flow: LayerFlow, n: int, t: Array, u: Array, h: Array, pattern: Array | None = None
    ) -> Array:
        """One extrapolated step; raises IntegrationError when the tableau's own estimate
        |T_LL - T_L,L-1| exceeds REFUSAL_SHARE of the state's size (an unstable step: the
        field is too stiff for this step size, and the result would be garbage)."""
        bk, field = flow.bk, partial(flow.field, n, pattern=pattern)
        *_, (value, neighbour) = extrapolation_rows(bk, field, t, u, h, self.levels)
        estimate = flow.size(bk.to_float64(value - neighbour))
        size = flow.error_scale(u)
        if not estimate <= REFUSAL_SHARE * size:
            raise IntegrationError(
                f"layer {n}, t = {bk.to_float64(t):.6g}, step {bk.to_float64(h):.3g}: the "
                f"extrapolation's own error estimate {estimate:.3g} exceeds {REFUSAL_SHARE:g} "
                f"of the state's size {size:.3g} (a stiff or unstable field for this step: the "
                "step is too long; use more steps per unit, or solve_reference)"
            )
        return flow.project(n, t + h, value)

    def advance(
        self, flow: LayerFlow, span: Span, u: Array, on_step: StepHook | None = None
    ) -> Array:
        """Equal steps over the span; with `events`, each step that a pre-activation
        crosses zero in is cut at the crossing (docs/schemes.md section 4). `on_step` sees
        the committed steps only, never the trial steps of the search."""
        n, bk = span.layer, flow.bk
        kinks = ActivationPattern.start(flow, n, span.start, u) if self.events else None
        if kinks is None:  # GELU layers are smooth: nothing to locate
            return super().advance(flow, span, u, on_step)
        h = span.length / span.steps
        end = span.start + span.length
        t = span.start
        while bk.to_float64(end - t) > 0:
            size = h if bk.to_float64(end - t - h) > 0 else end - t
            pattern = kinks.held()
            stepped = self.step(flow, n, t, u, size, pattern)
            size, stepped, _ = kinks.cut(
                t, u, size, stepped, partial(self.step, flow, n, t, u, pattern=pattern)
            )
            if on_step is not None:
                on_step(Step(n, t, size, u, stepped, pattern))
            t, u = t + size, stepped
        return u
