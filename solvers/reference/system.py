"""What the reference's controller steps: an ODE u' = f(t, u) in one number system, with
the measure its errors are judged by and the providers that cap a step or locate its
events (docs/schemes.md section 7). The controller knows nothing else of it: a layer of
a Transformer flow is one such system (solvers.reference.layer_system), and so is a
scalar ODE written in a test.

A state is an array (..., N, d) of the backend; a plain ODE of k unknowns is one
member of shape (1, k). The carried error's growth rate is taken per member (the last
two axes), as for a batch of sequences.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from solvers.backends import Array, Backend
from solvers.integrators.dense_events import Crossing
from solvers.integrators.dense_output import DenseOutput

Field = Callable[[Array, Array, Array | None], Array]
"""(t, u, pattern) -> f(t, u), with `pattern` (0/1 per watched unit, or None) held fixed."""

Cap = Callable[[Array, Array, Array], float]
"""(t, u, f(t, u)) -> the longest step the provider allows from (t, u) (inf: no cap)."""


class StepMargins(Protocol):
    """How far the watched units start from their kinks (solvers.methods.kinks.Margins)."""

    def clear(self, h: float) -> bool: ...

    def kept(self, distance: np.ndarray, h: float) -> bool: ...


class Events(Protocol):
    """The kinks of a piecewise-smooth field, watched along the steps: the pattern a step
    holds, and where it switches (solvers.methods.kinks.ActivationPattern)."""

    def held(self) -> Array: ...

    def margins(self, t: Array, u: Array, start: Array) -> StepMargins: ...

    def distance(self, t: Array, state: Array) -> np.ndarray: ...

    def first_kink(
        self, t: Array, size: Array, dense: DenseOutput, degree: int, budget: float
    ) -> Crossing | None: ...

    def switch(
        self, t: Array, state: Array, crossing: Crossing, size: Array
    ) -> tuple[list[tuple[int, ...]], float]: ...


def _unconstrained(t: Array, u: Array) -> Array:
    return u


def _everything(x: np.ndarray) -> np.ndarray:
    return x


@dataclass(frozen=True)
class System:
    """u' = field(t, u, pattern) in `bk`.

    - `project(t, u)`: the constraint set's projection applied after every step (the
      identity for an ODE without one);
    - `judged(x)`: the part of a float64 state-shaped array that errors are measured on
      (all of it, or a Transformer's real tokens); `size` is its max-abs and
      `error_scale` max(1, size): tolerances are relative to it;
    - `caps`: providers of the longest step allowed from a point (the softmax's reach);
    - `events(t, u)`: the kinks watched from (t, u) on, or None for a smooth field;
    - `layer` and `label`: what the steps' records and error messages call it."""

    bk: Backend
    field: Field
    project: Callable[[Array, Array], Array] = _unconstrained
    judged: Callable[[np.ndarray], np.ndarray] = _everything
    caps: tuple[Cap, ...] = ()
    events: Callable[[Array, Array], Events | None] | None = None
    layer: int = 0
    label: str = "the ODE"

    def size(self, x: np.ndarray) -> float:
        """max |judged(x)| of a float64 state-shaped array."""
        return float(np.max(np.abs(self.judged(x))))

    def error_scale(self, u: Array) -> float:
        """max(1, size(u)): the size a step's absolute error is measured against."""
        return max(1.0, self.size(self.bk.to_float64(u)))

    def cap(self, t: Array, u: Array, start: Array) -> float:
        """The least of the caps at (t, u) with field `start` there (inf without caps)."""
        return min((cap(t, u, start) for cap in self.caps), default=float("inf"))

    def watch(self, t: Array, u: Array) -> Events | None:
        """The events watched from (t, u), or None for a smooth field."""
        return None if self.events is None else self.events(t, u)
