"""The high-order reference integrator, with event location for the ReLU kinks.

Gragg-Bulirsch-Stoer extrapolation of order 2 * levels on the flow's tangent field, then
the projection (docs/schemes.md section 3). With `events`, each step holds the activation
pattern of its start fixed and ends at the first zero crossing of a hidden
pre-activation, located by the Illinois iteration, so that the order survives the ReLU
kinks (docs/schemes.md section 4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solvers.backends import Array
from solvers.flow import LayerFlow
from solvers.integrators import extrapolation_step
from solvers.schemes import Span, Step, StepHook, SteppingMethod

MAX_ROOT_ITERATIONS = 200


@dataclass(frozen=True)
class Reference(SteppingMethod):
    """Extrapolated midpoint of order 2 * levels; `events` steps to every ReLU kink."""

    name: str = "reference"
    levels: int = 12
    events: bool = True

    @property
    def order(self) -> int:
        return 2 * self.levels

    def step(
        self, flow: LayerFlow, n: int, t: Array, u: Array, h: Array, pattern: Array | None = None
    ) -> Array:
        def field(s: Array, v: Array) -> Array:
            return flow.tangent(n, s, v, flow.total(n, s, v, pattern))

        return flow.project(n, t + h, extrapolation_step(flow.bk, field, t, u, h, self.levels))

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
        # a hidden unit whose row of W2 is zero (at every time) changes nothing when it switches
        silent = ~np.any([w.w2.any(axis=1) for w in flow.controls.acting_on(n)], axis=0)
        while bk.to_float64(end - t) > 0:
            size = h if bk.to_float64(end - t - h) > 0 else end - t
            pattern = bk.asarray(positive.astype(np.float64))
            stepped = self.step(flow, n, t, u, size, pattern)
            crossed = (bk.to_float64(flow.preactivations(n, t + size, stepped)) > 0) != positive
            flipped = None
            if (crossed & ~silent).any():
                size, stepped, flipped = self._locate(
                    flow, n, t, u, size, pattern, positive, silent
                )
            if on_step is not None:
                on_step(Step(n, t, size, u, stepped, pattern))
            t, u = t + size, stepped
            if flipped is not None:
                positive = positive.copy()
                positive[flipped] = ~positive[flipped]
        return u

    def _locate(self, flow, n, t, u, size, pattern, positive, silent):
        """The earliest sign change of a pre-activation in (t, t + size]: its time offset,
        the state there, and the index of the component that crosses."""
        bk = flow.bk
        z0 = flow.preactivations(n, t, u)
        while True:
            z1 = flow.preactivations(n, t + size, self.step(flow, n, t, u, size, pattern))
            a, b = bk.to_float64(z0), bk.to_float64(z1)
            crossed = ((b > 0) != positive) & ~silent
            # linear estimate of each crossing time, to pick the earliest candidate
            estimate = np.where(crossed, a / np.where(crossed, a - b, 1.0), np.inf)
            index = np.unravel_index(int(np.argmin(estimate)), estimate.shape)
            offset, stepped = self._root(flow, n, t, u, size, pattern, z0[index], z1[index], index)
            z = bk.to_float64(flow.preactivations(n, t + offset, stepped))
            others = ((z > 0) != positive) & ~silent & ~_only(index, z.shape)
            if not others.any():
                return offset, stepped, index
            size = offset  # another component crossed earlier: search before this event

    def _root(self, flow, n, t, u, size, pattern, z_start, z_end, index):
        """Illinois iteration for z_index(tau) = 0 on (0, size] along the frozen-pattern flow.

        Stops when an update moves tau by less than 16 u * size (u the unit roundoff).
        """
        bk = flow.bk
        lo, hi, z_lo, z_hi = bk.asarray(0), size, z_start, z_end
        side, previous = 0, None
        tolerance = bk.to_float64(size) * bk.unit_roundoff * 16
        for _ in range(MAX_ROOT_ITERATIONS):
            tau = hi - z_hi * (hi - lo) / (z_hi - z_lo)
            stepped = self.step(flow, n, t, u, tau, pattern)
            z = flow.preactivations(n, t + tau, stepped)[index]
            if previous is not None and abs(bk.to_float64(tau - previous)) <= tolerance:
                break
            if bk.to_float64(z) == 0:
                break
            previous = tau
            if (bk.to_float64(z) > 0) == (bk.to_float64(z_hi) > 0):
                hi, z_hi = tau, z
                if side == 1:
                    z_lo = z_lo / 2
                side = 1
            else:
                lo, z_lo = tau, z
                if side == -1:
                    z_hi = z_hi / 2
                side = -1
        return tau, stepped


def _only(index: tuple, shape: tuple) -> np.ndarray:
    mask = np.zeros(shape, dtype=bool)
    mask[index] = True
    return mask
