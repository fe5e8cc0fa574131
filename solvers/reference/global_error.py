"""The reference's estimate of its global error: each accepted step's own estimate added to
the error carried from before, stretched by the flow along the carried error's direction
(docs/schemes.md section 7)."""

from __future__ import annotations

import math

import numpy as np

from solvers.backends import Array
from solvers.errors import NumericalBreakdownError
from solvers.methods.stepping import Step
from solvers.reference.system import System


class GlobalError:
    """The estimated global max-abs error of the state reached so far (`error`) and its
    signed direction (the sum of the steps' T_jj - T_j,j-1, each carried forward)."""

    def __init__(self) -> None:
        self.error = 0.0
        self.direction: np.ndarray | None = None

    def carry(
        self,
        system: System,
        step: Step,
        estimate: float,
        difference: np.ndarray,
        start: Array | None = None,
    ) -> int:
        """The estimate after a committed step of size h from (t, u): the error carried in,
        times the step's growth factor exp(h max(rho, 0)), plus the step's own estimate. rho =
        <e, J e> / <e, e> is the rate at which the flow stretches the carried direction e,
        the largest over the members of a batch, from a difference quotient of the field
        at the step's start in the working precision (`start`: the field at (t, u), when
        the caller has it). Returns the field evaluations used (two, one with `start`, or
        none before any error)."""
        bk, t, u = system.bk, step.t, step.before
        growth, evaluations = 1.0, 0
        norm = float(np.linalg.norm(self.direction)) if self.direction is not None else 0.0
        if self.error > 0 and norm > 0:
            unit = self.direction / norm
            delta = math.sqrt(bk.unit_roundoff) * system.error_scale(u)
            shifted = u + bk.asarray(delta * unit)

            def field(v: Array) -> Array:
                return system.field(t, v, step.pattern)

            if start is None:
                start, evaluations = field(u), 1
            stretch = bk.to_float64(field(shifted) - start) / delta
            evaluations += 1
            along = np.sum(unit * stretch, axis=(-2, -1)).ravel()
            length = np.sum(unit * unit, axis=(-2, -1)).ravel()
            rates = along[length > 0] / length[length > 0]
            if not np.all(np.isfinite(rates)):
                raise NumericalBreakdownError(
                    f"{system.label}, t = {bk.to_float64(t):.6g}: the flow's stretching of the "
                    "error is not finite"
                )
            rho = float(np.max(rates))
            growth = math.exp(min(bk.to_float64(step.h) * max(rho, 0.0), 700.0))
        self.error = self.error * growth + estimate
        carried = 0.0 if self.direction is None else self.direction * growth
        self.direction = carried + difference
        return evaluations

    def add(self, amount: float) -> None:
        """An error that has no direction to carry (a sliver step's bound, ball radii)."""
        self.error += amount
