"""The first zero crossing of switching functions along a step's dense output: found on a
polynomial fit of their values over the whole step, so that a crossing and its return
inside one step are seen, refined on the dense output itself (docs/schemes.md section 8).
The switching functions are ReLU pre-activations in practice; nothing here knows of a
layer."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.polynomial import chebyshev
from scipy.optimize import brentq

from solvers.backends import Array, Backend

FINE = 8
"""Fine intervals per fit degree on which the fitted switching functions are scanned."""
MAX_POLISH = 12
"""Chord iterations that move the fit's root onto the dense output's own."""
ZERO_BAND = 64.0
"""A switching function within this many unit roundoffs of max(1, max |z|) of zero is at
zero (the fit's roundoffs are float64's at least): it is on either side."""

SwitchingAlong = Callable[[Array], Array]
"""theta -> the switching functions at the dense output's point theta in [0, 1]."""


@dataclass(frozen=True)
class Crossing:
    """Where the first unit leaves the side its pattern holds: theta (a backend point in
    (0, 1]), the units that switch there (booleans of the units' shape: the first, and
    those that cross close enough after it to switch with it), and dz/dtheta of every
    unit at theta (float64, from the fit)."""

    theta: Array
    switching: np.ndarray
    rates: np.ndarray


def first_crossing(
    bk: Backend,
    along: SwitchingAlong,
    positive: np.ndarray,
    silent: np.ndarray,
    degree: int,
    weights: np.ndarray,
    budget: float,
) -> Crossing | None:
    """The first theta in [0, 1] where a unit that is on its pattern's side (z > 0 where
    `positive`, or at zero: within ZERO_BAND roundoffs) leaves it, silent units aside;
    None when none does. A unit at zero at theta = 0 (just switched, or touching zero) is
    watched like the others; one off its side there that does not come to it during the
    step crosses at theta = 0 (it was switched early with another, or where it dipped
    across zero on a dense output and not on the solution: see ActivationPattern.switch).

    z is sampled at degree + 1 Chebyshev-Lobatto points of [0, 1] and fitted by its
    Chebyshev interpolant, which is scanned on FINE * degree intervals: a unit leaves in
    an interval when it is on its side at the start and off it at the end, or on it at
    both ends with |z| turning inside the interval and the turn's value off it (the
    crossing and its return). The first unit's root is found on the fit (Brent) and
    polished on `along` by chord steps with the fit's slope, in the working precision.

    A unit whose fitted root lies delta after theta switches with it when the cost of
    switching it early stays within `budget`: that cost is weights * |z'| delta^2 / 2,
    the integral of |z| over the interval it is held on the wrong side, times `weights`
    (its effect on the state per unit of z, times the step's length), taken in the
    order of the roots until their sum would pass the budget."""
    nodes = _nodes(degree)
    values = np.stack([bk.to_float64(along(bk.asarray(float(x)))) for x in nodes])
    shape = values.shape[1:]
    flat = values.reshape(len(nodes), -1)
    coefficients = np.linalg.solve(_vandermonde(degree), flat)
    fine, slopes = _scan(degree) @ coefficients, _scan_slopes(degree) @ coefficients
    side = np.broadcast_to(np.where(positive, 1.0, -1.0), shape).reshape(-1)
    watched = ~np.broadcast_to(silent, shape).reshape(-1)
    roundoff = max(bk.unit_roundoff, np.finfo(np.float64).eps / 2)
    band = ZERO_BAND * roundoff * max(1.0, float(np.max(np.abs(values), initial=0.0)))
    on = (fine * side > -band) & watched
    roots = _first_roots(coefficients, fine, slopes, side, on)
    roots.update(dict.fromkeys(np.nonzero(watched & ~on.any(axis=0))[0].tolist(), 0.0))
    if not roots:
        return None
    unit, root = min(roots.items(), key=lambda item: item[1])
    rates = 2 * chebyshev.chebval(2 * root - 1, chebyshev.chebder(coefficients))
    if root == 0.0:  # a unit stranded off its side: it switches where the step starts
        theta = bk.asarray(0.0)
    else:
        theta = _polish(bk, along, root, np.unravel_index(unit, shape), rates[unit])
    later = _approximate_roots(fine, on) | roots
    cost = np.broadcast_to(weights, shape).reshape(-1) * np.abs(rates) / 2
    switching = np.zeros(flat.shape[1], bool)
    switching[unit] = True
    spent = 0.0
    for other, when in sorted(later.items(), key=lambda item: item[1]):
        spent += 0.0 if other == unit else cost[other] * (when - root) ** 2
        if spent > budget:
            break
        switching[other] = True
    return Crossing(theta, switching.reshape(shape), rates.reshape(shape))


def _first_roots(
    coefficients: np.ndarray, fine: np.ndarray, slopes: np.ndarray, side: np.ndarray, on: np.ndarray
) -> dict[int, float]:
    """The fit's roots where units leave their side, for every unit that leaves in the
    first interval any unit leaves in, or turns off its side in or before it (later
    leaves cannot come first)."""
    grid = np.linspace(0.0, 1.0, fine.shape[0])
    leaves = on[:-1] & ~on[1:]
    first = int(np.nonzero(leaves.any(axis=1))[0][0]) if leaves.any() else len(grid) - 2
    # on the side at both ends of an interval, |z| falling at its start and rising at its
    # end: |z| turns inside, and may reach zero only if |z| at an end is within the
    # interval's width times |z'| there
    width = grid[1] - grid[0]
    near = (np.abs(fine[:-1]) <= width * np.abs(slopes[:-1])) | (
        np.abs(fine[1:]) <= width * np.abs(slopes[1:])
    )
    turning = on[:-1] & on[1:] & (slopes[:-1] * side < 0) & (slopes[1:] * side > 0) & near
    turning[first + 1 :] = False
    roots: dict[int, float] = {}
    for interval, unit in zip(*np.nonzero(turning), strict=True):
        if unit in roots:
            continue
        series = coefficients[:, unit]
        derivative = chebyshev.chebder(series)
        turn = brentq(
            lambda x, d=derivative: chebyshev.chebval(2 * x - 1, d),
            grid[interval],
            grid[interval + 1],
        )
        if chebyshev.chebval(2 * turn - 1, series) * side[unit] <= 0:
            roots[int(unit)] = _fit_root(series, grid[interval], turn)
    for unit in np.nonzero(leaves[first])[0]:
        roots.setdefault(int(unit), _fit_root(coefficients[:, unit], *grid[first : first + 2]))
    return roots


def _approximate_roots(fine: np.ndarray, on: np.ndarray) -> dict[int, float]:
    """Each unit's first leaving of its side on the fine grid, the root interpolated
    linearly: where units that may switch together are looked for."""
    leaves = on[:-1] & ~on[1:]
    units = np.nonzero(leaves.any(axis=0))[0]
    intervals = np.argmax(leaves[:, units], axis=0)
    a, b = fine[intervals, units], fine[intervals + 1, units]
    width = 1.0 / (fine.shape[0] - 1)
    fraction = np.where(a != b, a / np.where(a != b, a - b, 1.0), 1.0)
    roots = (intervals + np.clip(fraction, 0, 1)) * width
    return dict(zip(units.tolist(), roots.tolist(), strict=True))


def _fit_root(series: np.ndarray, lo: float, hi: float) -> float:
    """The root of the fitted Chebyshev series in [lo, hi] (a sign change there, or a
    value at zero at an end)."""
    value = lambda x: chebyshev.chebval(2 * x - 1, series)  # noqa: E731
    if value(lo) * value(hi) > 0:  # at zero at lo (within the band), or rounding: the end
        return lo if abs(value(lo)) <= abs(value(hi)) else hi  # nearer zero
    return brentq(value, lo, hi, xtol=1e-16, rtol=4 * np.finfo(float).eps)


def _polish(bk: Backend, along: SwitchingAlong, root: float, unit: tuple, rate: float) -> Array:
    """The dense output's root of unit's z near the fit's root: chord steps
    theta <- theta - z(theta) / rate in the working precision, kept in (0, 1], until a
    step moves theta by at most 16 unit roundoffs (or z is 0)."""
    theta = bk.asarray(root)
    if not rate:
        return theta
    slope = bk.asarray(rate)
    for _ in range(MAX_POLISH):
        z = along(theta)[unit]
        if bk.to_float64(z) == 0:
            break
        moved = bk.midpoints(theta - z / slope)
        if not 0 < bk.to_float64(moved) <= 1:
            break
        change = abs(bk.to_float64(moved - theta))
        theta = moved
        if change <= 16 * bk.unit_roundoff:
            break
    return theta


@functools.cache
def _nodes(degree: int) -> np.ndarray:
    """Chebyshev-Lobatto points of [0, 1], 0 and 1 included."""
    return (1 - np.cos(np.pi * np.arange(degree + 1) / degree)) / 2


@functools.cache
def _vandermonde(degree: int) -> np.ndarray:
    return chebyshev.chebvander(2 * _nodes(degree) - 1, degree)


@functools.cache
def _scan(degree: int) -> np.ndarray:
    """The fit's values on the fine grid from its coefficients."""
    return chebyshev.chebvander(np.linspace(-1.0, 1.0, FINE * degree + 1), degree)


@functools.cache
def _scan_slopes(degree: int) -> np.ndarray:
    """The fit's d/dtheta on the fine grid from its coefficients."""
    basis = np.eye(degree + 1)
    grid = np.linspace(-1.0, 1.0, FINE * degree + 1)
    return 2 * np.stack(
        [chebyshev.chebval(grid, chebyshev.chebder(basis[:, i])) for i in range(degree + 1)],
        axis=1,
    )
