"""The activation pattern a ReLU layer's steps hold, and where it switches: the fixed
extrapolation cuts a step at its first kink by trial steps (`ActivationPattern.cut`,
solvers.integrators.events; docs/schemes.md section 4), the error-controlled reference
finds it on an accepted step's dense output and switches every unit that crosses there
at the cost it reports (`first_kink` and `switch`, solvers.integrators.dense_events;
section 8)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from solvers.backends import Array, Backend
from solvers.equation.flow import LayerFlow
from solvers.integrators.dense_events import Crossing, first_crossing
from solvers.integrators.dense_output import DenseOutput
from solvers.integrators.events import crossings, locate_event

MARGIN = 4.0
"""A step may skip the dense output when every watched unit starts further from zero than
MARGIN times its rate times the step (docs/schemes.md section 8, "Clear steps")."""

TrialStep = Callable[[Array], Array]
"""tau -> the state at t + tau along the step's frozen-pattern flow."""

Preactivations = Callable[[Array, Array], Array]
"""(t, u) -> the watched units' pre-activations z: a unit's kink is where its z is 0."""


def silent_units(flow: LayerFlow, n: int) -> np.ndarray:
    """Hidden units whose crossings are not events, broadcastable against the
    pre-activations: units whose row of W2 is zero at every time of layer n (they change
    nothing when they switch), and every unit of a masked token (its row is seen by
    nobody, docs/model.md section 6: it keeps the pattern its layer started with)."""
    silent = ~np.any([w.w2.any(axis=1) for w in flow.controls.acting_on(n)], axis=0)
    if flow.real_tokens is None:
        return silent
    return silent | ~flow.real_tokens[..., None]


def unit_weights(flow: LayerFlow, n: int) -> np.ndarray:
    """Each hidden unit's largest 2-norm of its row of W2 over the controls of layer n:
    how far the FFN term moves per unit of the unit's activation (the tangent projection
    of post-LN and the norms' statistics do not lengthen it)."""
    return np.max([np.linalg.norm(w.w2, axis=1) for w in flow.controls.acting_on(n)], axis=0)


@dataclass(frozen=True)
class Margins:
    """Each watched unit's distance from zero on its pattern's side at a step's start,
    side * z, and its rate side * dz/dt there (float64; silent units at +inf and 0)."""

    distance: np.ndarray
    rate: np.ndarray

    def clear(self, h: float) -> bool:
        """Whether no unit comes within reach of zero over a step of h at its initial rate,
        with the factor MARGIN."""
        return bool(np.all(self.distance > MARGIN * np.abs(self.rate) * h))

    def kept(self, distance: np.ndarray, h: float) -> bool:
        """Whether a step of h that ended at `distance` (side * z) kept every unit on its
        side: on the quadratic through the start's distance and rate and the end's, every
        unit stays above half its smaller end distance."""
        a, b = self.distance, self.rate * h
        lowest = np.minimum(a, distance)
        with np.errstate(divide="ignore", invalid="ignore"):  # silent units: inf - inf
            c = distance - a - b
            vertex = np.where(c > 0, -b / (2 * c), -1.0)
            dip = np.where((vertex > 0) & (vertex < 1), a - b * b / (4 * c), np.inf)
        return bool(np.all((distance > 0) & (np.minimum(lowest, dip) >= lowest / 2)))


class ActivationPattern:
    """Which watched units are on (pre-activation > 0) from the last kink on: the hidden
    units of a layer's ReLU FFN (`start`), or of any field written through its
    pre-activations z(t, u) (`watch`).

    `weights`: each unit's reach, how far the field moves per unit of the unit's
    activation (a Transformer's rows of W2); `silent` units are never events; `scale(u)`
    is the size a difference quotient's step is measured against; `label` names the
    field in error messages."""

    def __init__(
        self,
        bk: Backend,
        preactivations: Preactivations,
        positive: np.ndarray,
        silent: np.ndarray,
        weights: np.ndarray,
        scale: Callable[[Array], float],
        label: str,
    ) -> None:
        self.bk, self.z, self.positive = bk, preactivations, positive
        self.silent, self.weights, self.scale, self.label = silent, weights, scale, label

    @classmethod
    def watch(
        cls,
        bk: Backend,
        preactivations: Preactivations,
        t: Array,
        u: Array,
        weights: np.ndarray,
        scale: Callable[[Array], float],
        label: str = "the ODE",
    ) -> ActivationPattern:
        """The pattern of the units z(t, u) at (t, u), none of them silent."""
        positive = bk.to_float64(preactivations(t, u)) > 0
        return cls(bk, preactivations, positive, np.zeros_like(positive), weights, scale, label)

    @classmethod
    def start(cls, flow: LayerFlow, n: int, t: Array, u: Array) -> ActivationPattern | None:
        """The pattern of layer n's hidden units at (t, u), or None when no control of
        layer n uses ReLU or every unit is silent (the field is then smooth)."""
        if not any(w.activation == "relu" for w in flow.controls.acting_on(n)):
            return None
        z = partial(flow.preactivations, n)
        positive = flow.bk.to_float64(z(t, u)) > 0
        silent = silent_units(flow, n)
        if np.all(silent):
            return None
        weights = unit_weights(flow, n)
        return cls(flow.bk, z, positive, silent, weights, flow.error_scale, f"layer {n}")

    def held(self) -> Array:
        """The pattern as 0/1 per hidden unit, in the backend: what a step holds fixed."""
        return self.bk.asarray(self.positive.astype(np.float64))

    def cut(
        self, t: Array, u: Array, size: Array, stepped: Array, trial: TrialStep
    ) -> tuple[Array, Array, tuple | None]:
        """The step from (t, u) of `size` to `stepped`, cut at its first kink: (its size, the
        state, the unit that switched or None when no unit crosses). At a kink the pattern
        flips that unit for the steps that follow."""
        bk, z = self.bk, self.z
        z_end = z(t + size, stepped)
        if not crossings(bk, z_end, self.positive, self.silent).any():
            return size, stepped, None

        def located(tau: Array) -> tuple[Array, Array]:
            state = trial(tau)
            return state, z(t + tau, state)

        where = f"{self.label}, t = {bk.to_float64(t):.6g}"
        z_start = z(t, u)
        size, stepped, unit = locate_event(
            bk, located, z_start, size, self.positive, self.silent, where
        )
        self.positive = self.positive.copy()
        self.positive[unit] = ~self.positive[unit]
        return size, stepped, unit

    def margins(self, t: Array, u: Array, start: Array) -> Margins:
        """The units' Margins at (t, u), their rates from a difference quotient along the
        field `start` at (t, u) (two pre-activation evaluations, no field evaluation)."""
        bk = self.bk
        side = np.where(self.positive, 1.0, -1.0)
        z = bk.to_float64(self.z(t, u))
        speed = float(np.max(np.abs(bk.to_float64(start))))
        delta = math.sqrt(bk.unit_roundoff) * self.scale(u) / max(speed, 1e-300)
        moved = bk.to_float64(self.z(t, u + start * bk.asarray(delta)))
        distance = np.where(self.silent, np.inf, side * z)
        rate = np.where(self.silent, 0.0, side * (moved - z) / delta)
        return Margins(distance, rate)

    def distance(self, t: Array, state: Array) -> np.ndarray:
        """side * z of every unit at (t, state), silent units at +inf."""
        z = self.bk.to_float64(self.z(t, state))
        return np.where(self.silent, np.inf, np.where(self.positive, z, -z))

    def first_kink(
        self, t: Array, size: Array, dense: DenseOutput, degree: int, budget: float
    ) -> Crossing | None:
        """The first crossing along the dense output of a step of `size` from t, and the
        units that switch with it within `budget` (absolute, max-abs) of error
        (solvers.integrators.dense_events; fitted at `degree`); None when no unit leaves
        its side over the step."""

        def along(theta: Array) -> Array:
            return self.z(t + theta * size, dense(theta))

        weights = self.weights * abs(self.bk.to_float64(size))
        return first_crossing(self.bk, along, self.positive, self.silent, degree, weights, budget)

    def switch(
        self, t: Array, state: Array, crossing: Crossing, size: Array
    ) -> tuple[list[tuple[int, ...]], float]:
        """Flip, at (t, state), the units the crossing switches and any other unit found
        off its side there: (the units, the error this may commit). A unit switched where
        its z is not 0 is held on the wrong side until its true crossing, about
        |z| / |z'| away, which costs |W2 row| z^2 / (2 |z'|) (z' per unit time); the cost
        is summed over each token's units, and the largest token's sum returned.

        A unit switched before its crossing (with an earlier one, or where it dipped
        across zero on the dense output, within its error, and not on the solution) starts
        the next step off its new side: `first_kink` watches it there, and switches it
        back where that step starts if it does not come to its side during the step."""
        bk = self.bk
        z = bk.to_float64(self.z(t, state))
        switching = crossing.switching | (((z > 0) != self.positive) & ~self.silent)
        rate = np.abs(crossing.rates) / abs(bk.to_float64(size))
        cost = np.zeros_like(z)
        with np.errstate(divide="ignore"):  # a unit switched off its root with z' = 0: inf
            np.divide(self.weights * z**2, 2 * rate, out=cost, where=switching & (z != 0))
        self.positive = self.positive.copy()
        self.positive[switching] = ~self.positive[switching]
        units = [tuple(map(int, unit)) for unit in np.argwhere(switching)]
        return units, float(np.max(np.sum(cost, axis=-1)))
