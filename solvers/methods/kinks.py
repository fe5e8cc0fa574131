"""The one event path: the activation pattern a ReLU layer's steps hold, and the cut of a
step at its first kink (docs/schemes.md section 4). The fixed extrapolation and the
error-controlled reference both step through `ActivationPattern.cut`; what a trial step
is stays theirs, where the crossing lies is found by solvers.integrators.events."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from solvers.backends import Array
from solvers.equation.flow import LayerFlow
from solvers.integrators.events import crossings, locate_event

TrialStep = Callable[[Array], Array]
"""tau -> the state at t + tau along the step's frozen-pattern flow."""


def silent_units(flow: LayerFlow, n: int) -> np.ndarray:
    """Hidden units whose crossings are not events, broadcastable against the
    pre-activations: units whose row of W2 is zero at every time of layer n (they change
    nothing when they switch), and every unit of a masked token (its row is seen by
    nobody, docs/model.md section 6: it keeps the pattern its layer started with)."""
    silent = ~np.any([w.w2.any(axis=1) for w in flow.controls.acting_on(n)], axis=0)
    if flow.real_tokens is None:
        return silent
    return silent | ~flow.real_tokens[..., None]


class ActivationPattern:
    """Which hidden units of layer n are on (pre-activation > 0) from the last kink on.

    `start` gives None for a layer without ReLU: a smooth field has no events."""

    def __init__(self, flow: LayerFlow, n: int, positive: np.ndarray) -> None:
        self.flow, self.n, self.positive = flow, n, positive
        self.silent = silent_units(flow, n)

    @classmethod
    def start(cls, flow: LayerFlow, n: int, t: Array, u: Array) -> ActivationPattern | None:
        """The pattern at (t, u), or None when no control of layer n uses ReLU."""
        if not any(w.activation == "relu" for w in flow.controls.acting_on(n)):
            return None
        return cls(flow, n, flow.bk.to_float64(flow.preactivations(n, t, u)) > 0)

    def held(self) -> Array:
        """The pattern as 0/1 per hidden unit, in the backend: what a step holds fixed."""
        return self.flow.bk.asarray(self.positive.astype(np.float64))

    def cut(
        self, t: Array, u: Array, size: Array, stepped: Array, trial: TrialStep
    ) -> tuple[Array, Array, tuple | None]:
        """The step from (t, u) of `size` to `stepped`, cut at its first kink: (its size, the
        state, the unit that switched or None when no unit crosses). At a kink the pattern
        flips that unit for the steps that follow."""
        flow, n, bk = self.flow, self.n, self.flow.bk
        z_end = flow.preactivations(n, t + size, stepped)
        if not crossings(bk, z_end, self.positive, self.silent).any():
            return size, stepped, None

        def located(tau: Array) -> tuple[Array, Array]:
            state = trial(tau)
            return state, flow.preactivations(n, t + tau, state)

        where = f"layer {n}, t = {bk.to_float64(t):.6g}"
        z_start = flow.preactivations(n, t, u)
        size, stepped, unit = locate_event(
            bk, located, z_start, size, self.positive, self.silent, where
        )
        self.positive = self.positive.copy()
        self.positive[unit] = ~self.positive[unit]
        return size, stepped, unit
