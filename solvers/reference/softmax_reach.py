"""How far in time the attention's softmax stays analytic along the flow: the reach that
caps the reference's steps, so that its extrapolation's error estimate describes the
step (docs/schemes.md section 7, "The softmax's reach")."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

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
    delta = math.sqrt(bk.unit_roundoff) * min(1.0, flow.scale(u) / speed if speed > 0 else 1.0)
    step = bk.asarray(delta)
    scores = flow.attention_scores(n, t, u)
    moved = flow.attention_scores(n, t + step, u + start * step)
    before = bk.to_float64(scores)
    masked = np.isneginf(before)
    with np.errstate(invalid="ignore"):  # -inf - -inf at masked keys
        rates = np.where(masked, 0.0, bk.to_float64(moved - scores) / delta)
    lead = np.argmax(before, axis=-1)[..., None]
    top = np.take_along_axis(before, lead, -1)
    top_rate = np.take_along_axis(rates, lead, -1)
    others = before.copy()
    np.put_along_axis(others, lead, -np.inf, -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        pairs = np.sqrt((top - before) ** 2 + math.pi**2) / np.abs(top_rate - rates)
        together = logsumexp(others, axis=-1, keepdims=True)
        weights = np.exp(others - together)
        mean_rate = np.sum(weights * rates, axis=-1, keepdims=True)
        gap = np.maximum(0.0, top - together)
        clusters = np.sqrt(gap**2 + math.pi**2) / np.abs(top_rate - mean_rate)
    reach = np.concatenate([pairs[~masked], clusters.ravel()])
    reach = reach[np.isfinite(reach)]
    return float(reach.min()) if reach.size else math.inf
