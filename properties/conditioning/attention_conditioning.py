"""Measured conditioning of attention as its inverse temperature beta grows: linear growth
of its Lipschitz constant where a row's top scores tie, the hard-attention limit where they
do not, with the rounding of each measurement derived (docs/rounding.md section 5)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from properties.check_inputs import checked_confidence, checked_layer
from properties.claim_check import largest_magnitude
from properties.conditioning.rounding_bounds import (
    attention_rounding_bound,
    head_magnitudes,
    score_rounding,
)
from solvers import LayerWeights, backend
from solvers.backends import Backend
from solvers.equation.jacobian import jacobian
from solvers.equation.operators import attention, attention_heads, combine_heads
from solvers.errors import InvalidInputError
from solvers.results.line_fit import Fit, fit_line
from solvers.results.provenance import Provenance, timed
from solvers.validation import finite_array, positive_number, positive_sweep

DEFAULT_BETAS = tuple(2.0 ** (k / 3) for k in range(31))  # 1 .. 1024, three per octave
DECAY_WINDOW = 3.0
"""The decay is fitted where beta gap >= 3: there the local slope of log distance,
-gap / (1 + exp(-beta gap)), is within 5% of -gap."""
FLOOR_FACTOR = 10.0
"""Distances to hard attention within this factor of the rounding bound are not fitted."""


@dataclass(frozen=True)
class AttentionConditioning(Provenance):
    """Attention's local Lipschitz constant and its distance to hard attention against beta.

    Per beta in `betas`: `lipschitz` (spectral norm of the measured Jacobian at U),
    `saturation` (mean over heads and rows of max_j P_ij: 1 is one-hot), `distance_to_hard`
    (max |A_beta(U) - A_hard(U)| / max |A_hard(U)|). `growth` fits log L against log beta
    on `growth_betas` (exponent 1: linear growth); `hard_lipschitz` is the constant of hard
    attention, the limit of saturated rows. `decay` fits log distance against beta on
    `decay_betas` (slope -score_gap expected), `score_gap` the smallest gap between a row's
    top score and the best score outside its tie, at beta = 1.
    """

    betas: list[float]
    lipschitz: list[float]
    saturation: list[float]
    distance_to_hard: list[float]
    growth: Fit
    growth_betas: list[float]
    hard_lipschitz: float
    score_gap: float
    decay: Fit
    decay_betas: list[float]
    rounding_floor: list[float]
    inputs: dict[str, Any]

    @property
    def growth_exponent(self) -> float:
        """The fitted power of beta in the Lipschitz constant on the large-beta tail."""
        return self.growth.slope

    @property
    def decay_rate(self) -> float:
        """-slope of log distance_to_hard against beta (expected: score_gap)."""
        return -self.decay.slope


def _hard_weights(u: np.ndarray, layer: LayerWeights) -> tuple[np.ndarray, float]:
    """Hard attention rows H (uniform over each row's tied maxima) and the smallest gap.

    Scores are computed in float64; two scores tie when they differ by at most twice
    their float64 rounding bound gamma_{d_k + 2d + 6} m_i (docs/rounding.md section 2).
    """
    heads = head_magnitudes(u, layer, None)
    scores = layer.attention_scale * heads.q @ np.swapaxes(heads.k, -1, -2)
    unit = backend("float64").unit_roundoff
    slack = 2 * score_rounding(layer, unit)
    slack = slack * np.max(heads.score_magnitude, -1, keepdims=True)
    top = np.max(scores, -1, keepdims=True)
    tied = scores >= top - slack
    hard = tied / np.sum(tied, -1, keepdims=True)
    rest = np.max(np.where(tied, -np.inf, scores), -1)
    return hard, float(np.min(top[..., 0] - rest))


def _jacobian_norm(bk: Backend, u: np.ndarray, layer: LayerWeights, step: float) -> float:
    """Spectral norm of the central-difference Jacobian of A at u."""
    with bk.active():
        w = layer.on(bk)
        columns = jacobian(bk, lambda batch: attention(bk, batch, w), bk.asarray(u), step)
        return float(np.linalg.norm(bk.to_float64(columns), 2))


@timed
def attention_conditioning(
    layer: LayerWeights,
    u: np.ndarray,
    betas: Sequence[float] = DEFAULT_BETAS,
    *,
    precision: str | Backend = "float64",
    relative_step: float = 1e-5,
    fit_from: float | None = None,
    confidence: float = 0.95,
) -> AttentionConditioning:
    """Lipschitz constant of U -> A_beta(U) and distance to hard attention, against beta.

    A_beta is `layer` with its scale multiplied by beta: A_beta(U) = sum_h
    softmax_rows(beta s Q_h K_h^T) V_h Wo_h + bo. Hard attention A_hard(U) = sum_h H_h V_h
    Wo_h + bo, H_h uniform over each row's (tied) maximal scores. The growth fit uses
    betas >= `fit_from` (default: the upper half of the sweep), the decay fit betas with
    beta gap >= 3 above the rounding floor. The Jacobian's step is
    relative_step * max(1, max|U|) / beta, so that the scores move alike at every beta
    (docs/rounding.md section 5). Domain: U of shape (N, d), finite; betas > 0 (at least
    3); relative_step > 0.
    """
    layer = checked_layer(layer)
    layer.refuse_decoder_parts("attention conditioning (docs/rounding.md section 5)")
    u = finite_array("u", u, (None, layer.d_model))
    if u.shape[0] == 0:
        raise InvalidInputError("u must have at least one token (row), got 0")
    b = np.sort(positive_sweep("betas", betas, minimum=3))
    relative_step = positive_number("relative_step", relative_step)
    confidence = checked_confidence(confidence)
    start = b[len(b) // 2] if fit_from is None else positive_number("fit_from", fit_from)
    bk = backend(precision)
    unit = bk.unit_roundoff
    hard, gap = _hard_weights(u, layer)
    size = max(1.0, float(np.max(np.abs(u))))

    # hard attention: H_h V_h Wo_h + bo in the backend, and its (linear) Jacobian
    with bk.active():
        w = layer.on(bk)
        x = bk.asarray(u, "u")
        _, values, _ = attention_heads(bk, x, w)
        mixed = bk.matmul(bk.asarray(hard), values)
        hard_output = combine_heads(bk, mixed, w)
        hard_scale = max(largest_magnitude(bk, hard_output), np.finfo(float).tiny)
    value_maps = np.einsum("hdv,hve->hde", layer.wv, layer.wo)
    hard_jacobian = sum(np.kron(hard[h], value_maps[h].T) for h in range(layer.heads))
    hard_lipschitz = float(np.linalg.norm(hard_jacobian, 2))

    lipschitz, saturation, distance, floor = [], [], [], []
    for beta in b:
        scaled = dataclasses.replace(layer, scale=float(beta) * layer.attention_scale)
        lipschitz.append(_jacobian_norm(bk, u, scaled, relative_step * size / max(1.0, beta)))
        with bk.active():
            ws = scaled.on(bk)
            weights, _, _ = attention_heads(bk, bk.asarray(u), ws)
            output = attention(bk, bk.asarray(u), ws)
            gap_to_hard = largest_magnitude(bk, output - hard_output)
        saturation.append(float(np.mean(np.max(bk.to_float64(weights), -1))))
        distance.append(gap_to_hard / hard_scale)
        bound = float(np.max(attention_rounding_bound(u, scaled, None, unit)))
        floor.append(FLOOR_FACTOR * 2 * bound / hard_scale)

    lipschitz_a, distance_a, floor_a = np.array(lipschitz), np.array(distance), np.array(floor)
    tail = b >= start
    growth = fit_line(np.log(b[tail]), np.log(lipschitz_a[tail]), confidence)
    above = (b * gap >= DECAY_WINDOW) & (distance_a > floor_a)
    decay = fit_line(b[above], np.log(distance_a[above]), confidence)
    return AttentionConditioning(
        betas=b.tolist(),
        lipschitz=lipschitz,
        saturation=saturation,
        distance_to_hard=distance,
        growth=growth,
        growth_betas=b[tail].tolist(),
        hard_lipschitz=hard_lipschitz,
        score_gap=gap,
        decay=decay,
        decay_betas=b[above].tolist(),
        rounding_floor=floor,
        inputs={
            "precision": repr(bk),
            "shape": list(u.shape),
            "d": layer.d_model,
            "heads": layer.heads,
            "d_k": layer.d_k,
            "scale": layer.attention_scale,
            "relative_step": relative_step,
            "fit_from": float(start),
            "confidence": confidence,
        },
    )
