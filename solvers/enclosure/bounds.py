"""The two bounds a validated step rests on (docs/enclosures.md sections 3 and 4): an a
priori box for the solutions over the step (interval Picard iteration), and the
logarithmic norm of the field's Jacobian on that box (how far two solutions can drift
apart). Both computed in arb balls, every rounding outward."""

from __future__ import annotations

import functools
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
_exact_midpoint = np.frompyfunc(lambda x: x.mid(), 1, 1)
_float = np.frompyfunc(float, 1, 1)


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
    """An exact number (nan where a ball is not finite) that bounds the logarithmic Euclidean norm
    mu_2(J) = lambda_max((J + J^T) / 2) over every matrix J in the ball matrix, given as
    its diagonal blocks (..., size, size) with every entry outside them 0 (the inputs of a
    batch, taylor_flow.field_jacobian): mu_2 of a block diagonal matrix is the largest of
    its blocks'.

    For two solutions x, y in a convex set where every Jacobian of f lies in the ball
    matrix, ||x(t) - y(t)||_2 <= exp(mu (t - s)) ||x(s) - y(s)||_2 (Dahlquist; Soderlind's
    survey, 2006). Per block, S = (J + J^T) / 2 in balls, with midpoint C (an exact
    symmetric matrix) and radii R: by Weyl's inequality every symmetric matrix in S has
    lambda_max <= lambda_max(C) + ||R||_2, and ||R||_2 <= max_i sum_j R_ij (R symmetric).
    lambda_max(C) is bounded by Gershgorin's discs of Q^-1 C Q (computed in balls) for Q
    the float64 eigenvectors of C, a similarity whose discs are nearly points; should the
    ball solve fail to prove Q invertible, by Gershgorin's discs of C itself."""
    rows = []
    for block in np.reshape(blocks, (-1, *np.shape(blocks)[-2:])):
        symmetric = (block + block.T) / 2
        centre = np.asarray(_exact_midpoint(symmetric), dtype=object)
        spread = np.sum(np.asarray(_radius(symmetric), dtype=object), axis=-1)
        rows.append(_largest(_gershgorin(_rotated(centre))) + _largest(spread))
    return _largest(rows)


def _largest(balls: Array) -> flint.arb:
    """The largest upper end of the balls, exact (nan where one is not finite); a union's
    radius would round it up by about 1e-9 of the balls' range."""
    ends = [ball.upper() for ball in np.ravel(np.asarray(balls, dtype=object))]
    if not all(end.is_finite() for end in ends):
        return flint.arb("nan")
    return functools.reduce(lambda a, b: a if a > b else b, ends)


def _rotated(centre: Array) -> Array:
    """Q^-1 C Q in balls for Q the eigenvectors of C (C itself if the ball solve cannot
    prove Q invertible)."""
    middle = np.asarray(_float(centre), dtype=np.float64)
    if not np.all(np.isfinite(middle)):
        return centre
    _, vectors = np.linalg.eigh(middle)
    q = flint.arb_mat(vectors.tolist())
    try:
        rotated = q.solve(flint.arb_mat(centre.tolist()) * q)
    except ZeroDivisionError:
        return centre
    return np.asarray(rotated.tolist(), dtype=object)


def _gershgorin(matrix: Array) -> list[flint.arb]:
    """Per row, A_ii + sum_{j != i} |A_ij|: the right ends of Gershgorin's discs."""
    absolute = np.asarray(_absolute(matrix), dtype=object)
    return list(np.sum(absolute, axis=-1) - np.diagonal(absolute) + np.diagonal(matrix))


def euclidean_radius(balls: Array) -> flint.arb:
    """An exact upper bound of ||r||_2 for the balls' radii r: every point of the balls
    lies within it of their midpoints, in the Euclidean norm."""
    squares = np.asarray(_radius(balls), dtype=object) ** 2
    return np.sum(squares).sqrt().upper() if squares.size else flint.arb(0)


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
