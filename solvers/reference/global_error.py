"""The reference's estimate of its global error: each accepted step's own estimate added to
the error carried from before, stretched by the flow at the largest rate found on a small
space of directions (docs/schemes.md section 7)."""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from solvers.equation.flow import LayerFlow
from solvers.errors import NumericalBreakdownError
from solvers.methods.stepping import Step

SUBSPACE = 4
"""Dimension of the space of directions on which the stretching rate is maximised: the
carried direction e, the probe p, and their images J e and J p (one field evaluation
each). On the problems measured (docs/schemes.md section 7) this is the least dimension at
which the estimated growth was not below the true growth of the reference's error."""
DEPENDENT = 1e-6
"""A vector whose part outside the space so far is below this fraction of its length is
taken to lie in it (above the relative noise of a difference quotient, sqrt(u) in float64)."""
PROBE_SEED = 0
"""Seed of the probe's first, Gaussian, direction (the same on every run)."""


def _inner(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """<a, b> per member of a batch (over tokens and features), kept as (..., 1, 1)."""
    return np.sum(a * b, axis=(-2, -1), keepdims=True)


class GlobalError:
    """The estimated global max-abs error of the state reached so far (`error`), its signed
    direction (the sum of the steps' T_jj - T_j,j-1, each carried forward), and the probe:
    the direction the flow stretched most at the last step, carried to the next."""

    def __init__(self) -> None:
        self.error = 0.0
        self.direction: np.ndarray | None = None
        self.probe: np.ndarray | None = None

    def carry(
        self,
        flow: LayerFlow,
        step: Step,
        estimate: float,
        difference: np.ndarray,
        start: object = None,
    ) -> int:
        """The estimate after a committed step of size h from (t, u): the error carried in,
        times the step's growth factor exp(h max(rho, 0)), plus the step's own estimate.

        rho = max <v, J v> / <v, v> over v in V = span{e, p, J e, J p} (Rayleigh-Ritz: the
        largest eigenvalue of the symmetric part of V^T J V, V orthonormal), the largest
        over the members of a batch: the fastest rate at which the flow stretches a
        direction of V in the 2-norm, at most the log norm mu_2(J) that bounds every
        direction's. e is the carried direction, p the probe (its largest Ritz vector
        becomes the next step's probe, so p follows the most-stretched direction from
        step to step), and J the field's Jacobian at the step's start, applied by
        difference quotients in the working precision (`start`: the field at (t, u), when
        the caller has it). Returns the field evaluations used (SUBSPACE, one more without
        `start`, or none before any error)."""
        growth, evaluations = 1.0, 0
        if self.error > 0 and self.direction is not None and np.any(self.direction):
            rho, evaluations = self._rate(flow, step, start)
            growth = math.exp(min(flow.bk.to_float64(step.h) * max(rho, 0.0), 700.0))
        self.error = self.error * growth + estimate
        carried = 0.0 if self.direction is None else self.direction * growth
        self.direction = carried + difference
        return evaluations

    def _rate(self, flow: LayerFlow, step: Step, start: object) -> tuple[float, int]:
        """rho of `carry` and the field evaluations it took; updates the probe."""
        bk, u = flow.bk, step.before
        delta = math.sqrt(bk.unit_roundoff) * flow.scale(u)
        field = partial(flow.field, step.layer, step.t, pattern=step.pattern)
        evaluations = 0
        if start is None:
            start, evaluations = field(u), 1
        if self.probe is None or self.probe.shape != self.direction.shape:
            self.probe = np.random.default_rng(PROBE_SEED).standard_normal(self.direction.shape)
        basis: list[np.ndarray] = []
        images: list[np.ndarray] = []
        pending = [self.direction, self.probe]
        while pending and len(basis) < SUBSPACE:
            v = pending.pop(0)
            size = np.sqrt(_inner(v, v))
            for _ in range(2):  # Gram-Schmidt, twice for orthogonality in floating point
                for q in basis:
                    v = v - _inner(q, v) * q
            length = np.sqrt(_inner(v, v))
            kept = length > DEPENDENT * size  # a member's vector in the span so far is dropped
            if not np.any(kept):
                continue
            v = np.where(kept, v / np.where(kept, length, 1.0), 0.0)
            image = bk.to_float64(field(u + bk.asarray(delta * v)) - start) / delta
            evaluations += 1
            basis.append(v)
            images.append(image)
            pending.append(image)
        # Rayleigh-Ritz per member: M_ab = <v_a, J v_b>, symmetric part, largest eigenpair
        ritz = np.stack(
            [np.stack([_inner(a, b)[..., 0, 0] for b in images], -1) for a in basis], -2
        )
        if not np.all(np.isfinite(ritz)):
            raise NumericalBreakdownError(
                f"layer {step.layer}, t = {bk.to_float64(step.t):.6g}: the flow's stretching "
                "of the error is not finite"
            )
        values, vectors = np.linalg.eigh((ritz + np.swapaxes(ritz, -1, -2)) / 2)
        top = vectors[..., -1]  # (..., k)
        self.probe = sum(top[..., a, None, None] * v for a, v in enumerate(basis))
        return float(np.max(values[..., -1])), evaluations

    def add(self, amount: float) -> None:
        """An error that has no direction to carry (a sliver step's bound, ball radii)."""
        self.error += amount
