"""Locating the first zero crossing among switching functions z(tau) over a step, with a
bounded amount of work and time that only moves forward (docs/schemes.md section 4). The
switching functions are ReLU pre-activations in practice; nothing here knows of a layer."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from solvers.backends import Array, Backend
from solvers.errors import IntegrationError

MAX_ROOT_ITERATIONS = 200
MAX_NARROWINGS = 64
"""How often the search may move to an earlier crossing of another unit before giving up."""

Trial = Callable[[Array], tuple[Array, Array]]
"""tau -> (the state at t + tau along the step's frozen-pattern flow, its switching functions)."""


def crossings(bk: Backend, z: Array, positive: np.ndarray, silent: np.ndarray) -> np.ndarray:
    """Units whose pre-activation has left the side the pattern holds, silent ones aside."""
    return ((bk.to_float64(z) > 0) != positive) & ~silent


def locate_event(
    bk: Backend,
    trial: Trial,
    z_start: Array,
    size: Array,
    positive: np.ndarray,
    silent: np.ndarray,
    where: str,
) -> tuple[Array, Array, tuple]:
    """The earliest sign change of a pre-activation in (0, size]: (its offset tau, the state
    at t + tau, the index of the unit that crosses). The offset always lies in (0, size].
    Raises IntegrationError (naming `where`) when the search does not settle."""
    at_end = np.zeros_like(positive)  # units whose root is the bracket's end
    for _ in range(MAX_NARROWINGS):
        _, z_end = trial(size)
        a, b = bk.to_float64(z_start), bk.to_float64(z_end)
        crossed = crossings(bk, z_end, positive, silent)
        if not crossed.any():
            raise IntegrationError(
                f"{where}: event location lost its crossing (no pre-activation changes sign "
                f"over a step of {bk.to_float64(size):.3g})"
            )
        candidates = crossed & ~at_end
        # linear estimate of each crossing time, to pick the earliest candidate
        estimate = np.where(candidates, a / np.where(candidates, a - b, 1.0), np.inf)
        index = np.unravel_index(int(np.argmin(estimate)), estimate.shape)
        offset, state, z = _root(bk, trial, size, z_start[index], z_end[index], index)
        others = crossings(bk, z, positive, silent)
        others[index] = False
        if not others.any():
            return offset, state, index
        if bk.to_float64(offset) < bk.to_float64(size):
            size, at_end = offset, np.zeros_like(positive)  # another crossed earlier
            continue
        # the root is the bracket's end (no narrowing): try the other crossed units; when
        # every one crosses at the end, they cross together there
        at_end[index] = True
        if not (crossed & ~at_end).any():
            return offset, state, index
    raise IntegrationError(
        f"{where}: event location did not settle on a first crossing after {MAX_NARROWINGS} "
        "narrowings (pre-activations crossing zero almost together)"
    )


def _root(bk: Backend, trial: Trial, size: Array, z_lo: Array, z_hi: Array, index: tuple):
    """Illinois iteration for z_index(tau) = 0 on (0, size], bracketed: every iterate lies
    strictly inside the bracket (bisection when the secant leaves it or is undefined).
    Stops when an update moves tau by less than 16 u size (u the unit roundoff).

    Each iterate is a point (a ball's midpoint, in arb): tau is where the step is chosen
    to end, not a measured quantity. The secant of balls has a radius of the order of its
    inputs' radii over z_hi - z_lo; as a ball, that radius would carry into the trial
    state, arb would narrow the midpoint's precision to match it, and the search would
    stall at that width (in a (5, 6) arb solve: 46 and 76 trials for roots that take 10
    in mpmath)."""
    lo, hi = bk.asarray(0), size
    side, previous = 0, None
    tolerance = bk.to_float64(size) * bk.unit_roundoff * 16
    state, z_all = trial(hi)
    for _ in range(MAX_ROOT_ITERATIONS):
        tau = bk.midpoints(hi - z_hi * (hi - lo) / (z_hi - z_lo))
        # inside the bracket, judged on differences in the working precision: a bracket
        # narrower than float64's spacing at tau would otherwise look empty and fall back
        # to bisection, some 40 halvings at 30 digits
        if not (bk.to_float64(tau - lo) > 0 and bk.to_float64(hi - tau) >= 0):
            tau = bk.midpoints((lo + hi) / 2)  # undefined or outside the bracket
        state, z_all = trial(tau)
        z = z_all[index]
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
    return tau, state, z_all
