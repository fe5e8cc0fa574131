"""The two bounds a validated step rests on (docs/enclosures.md sections 3 and 4): an a
priori box for the solutions over the step (interval Picard iteration), and the
logarithmic norm of the field's Jacobian on that box (how far two solutions can drift
apart). Both computed in arb balls, every rounding outward."""

from __future__ import annotations

from collections.abc import Callable

import flint
import numpy as np

from solvers.backends import Array

PICARD_ATTEMPTS = 12
"""Picard iterations tried before a step is declared too long for its a priori box."""
INFLATION = 0.25
"""Each retry widens the candidate box's radii by this fraction (and by MINIMUM_RADIUS)."""
MINIMUM_RADIUS = 2.0**-40
"""The least radius a retry gives a component, relative to max(1, |x|)."""

Field = Callable[[Array, Array], Array]
"""f(t, u) in arb balls: t a ball of times, u a box (object array of balls)."""

_contains_interior = np.frompyfunc(lambda outer, inner: outer.contains_interior(inner), 2, 1)
UNIT = flint.arb(0, 1)
"""The ball [-1, 1]: x + UNIT r widens x by any radius r >= 0 given as a ball."""
_widen = np.frompyfunc(lambda x, r: x + UNIT * r, 2, 1)
_absolute = np.frompyfunc(abs, 1, 1)
_union = np.frompyfunc(lambda a, b: a.union(b), 2, 1)
_radius = np.frompyfunc(lambda x: x.rad(), 1, 1)


def a_priori_box(
    field: Field, times: Array, start: Array, step: Array, scale: float
) -> Array | None:
    """A box B with start + [0, h] f(times, B) inside the interior of B, or None.

    `times` is the ball of the step's times [t, t + h], `start` the box of initial states
    X, `step` the ball [0, h]. By Picard-Lindelof and Schauder's fixed point theorem, every
    solution from a point of X exists on the step and stays in start + [0, h] f(times, B),
    which is returned (the tighter box). Starts from X + [0, h] f(X) and widens the
    candidate until the Picard operator maps it into its interior; None after
    PICARD_ATTEMPTS (the step is too long). `scale` is max(1, |x|) over X (for the least
    widening)."""
    candidate = start + step * field(times, start)
    for _ in range(PICARD_ATTEMPTS):
        candidate = np.asarray(
            _widen(candidate, radii(candidate) * INFLATION + MINIMUM_RADIUS * scale), dtype=object
        )
        try:
            image = start + step * field(times, candidate)
        except (ArithmeticError, ValueError):  # a norm's variance ball reached 0
            return None
        if not all(x.is_finite() for x in np.ravel(image)):
            return None
        if np.all(_contains_interior(candidate, image).astype(bool)):
            return image
        candidate = np.asarray(_union(candidate, image), dtype=object)
    return None


def log_norm_bound(blocks: Array) -> flint.arb:
    """A ball whose upper end bounds the logarithmic infinity-norm
    mu(J) = max_i (J_ii + sum_{j != i} |J_ij|) over every matrix J in the ball matrix,
    given as its diagonal blocks (..., size, size) with every entry outside them 0 (the
    inputs of a batch, taylor_flow.field_jacobian): a row's sum runs within its block.

    For two solutions x, y in a convex set where every Jacobian of f lies in the ball
    matrix, |x(t) - y(t)| <= exp(mu (t - s)) |x(s) - y(s)| in the infinity norm
    (Dahlquist; Soderlind's survey, 2006)."""
    absolute = np.asarray(_absolute(blocks), dtype=object)
    diagonal = np.diagonal(blocks, axis1=-2, axis2=-1)
    rows = np.sum(absolute, axis=-1) - np.diagonal(absolute, axis1=-2, axis2=-1) + diagonal
    return union(rows)


def union(balls: Array) -> flint.arb:
    """One ball containing every ball of `balls` (its upper end bounds their maximum)."""
    flat = np.ravel(balls)
    total = flat[0]
    for ball in flat[1:]:
        total = total.union(ball)
    return total


def radii(balls: Array) -> np.ndarray:
    """The balls' radii as exact arb numbers (an object array)."""
    return np.asarray(_radius(balls), dtype=object)
