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

import numpy as np

from solvers.backends import Array
from solvers.errors import IntegrationError
from solvers.events import crossings, locate_event, silent_units
from solvers.flow import LayerFlow
from solvers.integrators import extrapolation_rows
from solvers.schemes import Span, Step, StepHook, SteppingMethod

REFUSAL_SHARE = 0.1
"""A step whose own error estimate |T_LL - T_L,L-1| exceeds this share of the state's size
is refused: its tableau has not converged, and what it returns is no approximation of the
flow (on a field with eigenvalues to -80, steps of 0.125 give an estimate 1.5 times the
state's size while the state grows 300-fold)."""


@dataclass(frozen=True)
class Extrapolation(SteppingMethod):
    """Extrapolated midpoint of order 2 * levels; `events` steps to every ReLU kink."""

    name: str = "extrapolation"
    levels: int = 12
    events: bool = True

    @property
    def order(self) -> int:
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
        size = flow.scale(u)
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
        n = span.layer
        kinks = any(w.activation == "relu" for w in flow.controls.acting_on(n))
        if not self.events or not kinks:  # GELU layers are smooth: nothing to locate
            return super().advance(flow, span, u, on_step)
        bk = flow.bk
        h = span.length / span.steps
        end = span.start + span.length
        t = span.start
        positive = bk.to_float64(flow.preactivations(n, t, u)) > 0
        silent = silent_units(flow, n)
        while bk.to_float64(end - t) > 0:
            size = h if bk.to_float64(end - t - h) > 0 else end - t
            pattern = bk.asarray(positive.astype(np.float64))
            stepped = self.step(flow, n, t, u, size, pattern)
            flipped = None
            z_end = flow.preactivations(n, t + size, stepped)
            if crossings(bk, z_end, positive, silent).any():

                def trial(tau: Array, t=t, u=u, pattern=pattern) -> tuple[Array, Array]:
                    state = self.step(flow, n, t, u, tau, pattern)
                    return state, flow.preactivations(n, t + tau, state)

                where = f"layer {n}, t = {bk.to_float64(t):.6g}"
                z_start = flow.preactivations(n, t, u)
                size, stepped, flipped = locate_event(
                    bk, trial, z_start, size, positive, silent, where
                )
            if on_step is not None:
                on_step(Step(n, t, size, u, stepped, pattern))
            t, u = t + size, stepped
            if flipped is not None:
                positive = positive.copy()
                positive[flipped] = ~positive[flipped]
        return u
