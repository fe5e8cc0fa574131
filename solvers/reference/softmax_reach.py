"""How far in time the attention's softmax stays analytic along the flow: the reach that
caps the reference's steps, so that its extrapolation's error estimate describes the
step (docs/schemes.md section 7, "The softmax's reach")."""

from __future__ import annotations

import math

import numba
import numpy as np

from solvers.backends import Array
from solvers.equation.flow import LayerFlow


def softmax_reach(flow: LayerFlow, n: int, t: Array, u: Array, start: Array) -> float:
    """The distance from t to the nearest complex-time zero of a row's sum of exp(scores)
    of layer n along (t + tau, u + tau f), f = `start` the field at (t, u), with the
    scores linear in tau; inf when no score moves.

    Row i's scores are s_ij + tau c_ij, c by a difference quotient along (1, f) in the
    working precision (the weights may move with t: SmoothControls). With the row's
    leading key m and one other key j the zeros are s_im - s_ij + tau (c_im - c_ij) =
    i pi (2k + 1), nearest at |tau| = sqrt(g^2 + pi^2) / |c_im - c_ij|, g = s_im - s_ij.
    Several keys close below the leader bring the zero nearer (K keys ln K below it with
    one rate: pi / c, not sqrt(ln^2 K + pi^2) / c), so the other keys are also taken as
    one, their log-sum-exp L with their weighted mean rate c_L: sqrt(g_L^2 + pi^2) /
    |c_im - c_L|, g_L = max(0, s_im - L). The reach is the least of these over heads,
    rows and keys (masked keys, at -inf, never reach). Both are exact for two keys and
    the second for such a cluster; neither is a bound for every row.

    Scores of size sigma change at about sigma times the state's relative rate, so a
    flow whose state grows (no norm) narrows the reach quadratically: the softmax then
    switches keys within a time far shorter than the field's Jacobian shows at the
    step's start."""
    bk = flow.bk
    speed = flow.size(bk.to_float64(start))
    delta = math.sqrt(bk.unit_roundoff) * min(
        1.0, flow.error_scale(u) / speed if speed > 0 else 1.0
    )
    step = bk.asarray(delta)
    scores = flow.attention_scores(n, t, u)
    moved = flow.attention_scores(n, t + step, u + start * step)
    before = bk.to_float64(scores)
    masked = np.isneginf(before)
    with np.errstate(invalid="ignore"):  # -inf - -inf at masked keys
        rates = np.where(masked, 0.0, bk.to_float64(moved - scores) / delta)
    width = before.shape[-1]
    return _nearest_zero(np.ascontiguousarray(before).reshape(-1, width), rates.reshape(-1, width))


@numba.njit(cache=True)
def _nearest_zero(scores, rates):
    """The least over rows of the pair and cluster distances of `softmax_reach` (its
    docstring's formulas), for scores (R, M) with -inf at masked keys and their rates
    (R, M, 0 at masked keys); inf when none is finite (NaN ones left out), in one pass
    per row while the row sits in cache."""
    best = math.inf
    for i in range(scores.shape[0]):
        row, rate = scores[i], rates[i]
        lead, second = 0, -math.inf  # the leading key, and the largest score of the others
        for j in range(1, row.shape[0]):
            if row[j] > row[lead]:
                lead, second = j, max(second, row[lead])
            else:
                second = max(second, row[j])
        top, top_rate = row[lead], rate[lead]
        if second == -math.inf:
            continue  # one key not masked, or none: no zero to reach
        total, weighted = 0.0, 0.0  # sum exp(s_j - second), and times the rates
        for j in range(row.shape[0]):
            if j == lead:
                continue
            apart = abs(top_rate - rate[j])
            if row[j] > -math.inf and apart > 0:
                best = _least(best, math.sqrt((top - row[j]) ** 2 + math.pi**2) / apart)
            weight = math.exp(row[j] - second)
            total += weight
            weighted += weight * rate[j]
        apart = abs(top_rate - weighted / total)
        if apart > 0:
            gap = max(0.0, top - (second + math.log(total)))
            best = _least(best, math.sqrt(gap**2 + math.pi**2) / apart)
    return best


@numba.njit(cache=True, inline="always")
def _least(best, value):
    """min(best, value), a NaN value (a NaN score or rate) left out."""
    return value if value < best else best
