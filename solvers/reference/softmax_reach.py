"""How far in time the attention's softmax stays analytic along the flow: the reach that
caps the reference's steps, so that its extrapolation's error estimate describes the
step (docs/schemes.md section 7, "The softmax's reach")."""

from __future__ import annotations

import math

import numpy as np

from solvers.backends import Array
from solvers.equation.flow import LayerFlow


def softmax_reach(flow: LayerFlow, n: int, t: Array, u: Array, start: Array) -> float:
    """The distance from t to the nearest complex-time singularity of layer n's softmax
    along u + tau f, f = `start` the field at (t, u); inf when the scores do not move.

    Row i's weights are analytic in tau except where sum_j exp(s_ij(tau)) = 0. With the
    scores linear in tau, s_ij + tau c_ij (c by a difference quotient along f in the
    working precision), and the row's leading key m and one other key j, that is
    s_im - s_ij + tau (c_im - c_ij) = i pi (2k + 1), nearest at
    |tau| = sqrt(g^2 + pi^2) / |c_im - c_ij|, g = s_im - s_ij >= 0. The reach is the
    least of these over heads, rows and keys (masked keys, at -inf, never reach). Scores
    of size sigma change at a rate of about sigma times the state's relative rate, so a
    flow whose state grows (no norm) narrows the reach quadratically: the softmax then
    switches from one key to another within a time far shorter than the field's
    Jacobian shows at the step's start."""
    bk = flow.bk
    speed = flow.size(bk.to_float64(start))
    if not speed > 0:
        return math.inf
    delta = math.sqrt(bk.unit_roundoff) * flow.scale(u) / speed
    scores = flow.attention_scores(n, t, u)
    moved = flow.attention_scores(n, t, u + start * bk.asarray(delta))
    before = bk.to_float64(scores)
    with np.errstate(invalid="ignore"):  # -inf - -inf at masked keys
        rates = bk.to_float64(moved - scores) / delta
    lead = np.argmax(before, axis=-1)[..., None]
    gap = np.take_along_axis(before, lead, -1) - before
    closing = np.abs(np.take_along_axis(rates, lead, -1) - rates)
    with np.errstate(divide="ignore", invalid="ignore"):
        reach = np.sqrt(gap**2 + math.pi**2) / closing
    reach = reach[np.isfinite(reach)]
    return float(reach.min()) if reach.size else math.inf
