"""The constants of one layer's field, bounded from its weights on a ball of rows.

Row sets, weight norms, the attention and feed-forward Lipschitz constants, row sizes,
and the sensitivity to the weights: the per-layer ingredients of the Gronwall bounds in
properties.well_posedness.gronwall (docs/well-posedness.md section 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from solvers import LayerWeights

OVERFLOW_EXPONENT = 700
"""Exponents above this give inf instead of an OverflowError (e^700 ~ 1e304)."""


def exp_or_inf(x: float) -> float:
    """e^x, inf on overflow."""
    return math.exp(x) if x < OVERFLOW_EXPONENT else math.inf


def expm1_over(rate: float, dt: float) -> float:
    """(e^{L dt} - 1) / L, inf on overflow."""
    return math.expm1(rate * dt) / rate if rate * dt < OVERFLOW_EXPONENT else math.inf


def product_or_zero(a: float, b: float) -> float:
    """a * b with 0 * inf = 0 (a term that vanishes stays zero whatever its factor)."""
    return 0.0 if a == 0 or b == 0 else a * b


@dataclass(frozen=True)
class RowSet:
    """The ball B(centre, radius) of rows, and `largest` = rho, the largest row norm on it."""

    centre: np.ndarray
    radius: float
    largest: float


def norm_image(gain: np.ndarray, bias: np.ndarray, d: int) -> RowSet:
    """The ball holding LN(x) = g (x - mean) / (var + eps)^{1/2} + b."""
    radius = float(np.max(np.abs(gain))) * math.sqrt(d)
    centre = np.broadcast_to(bias, (d,)).astype(float)
    size = float(np.linalg.norm(centre))
    scalar = np.ndim(gain) == 0 and np.ndim(bias) == 0
    largest = math.hypot(size, radius) if scalar else size + radius
    return RowSet(centre, radius, largest)


class WeightNorms:
    """Operator and vector norms of one layer's weights, each raised by `slack` (the radius
    of the ball of weights the bound covers)."""

    def __init__(self, layer: LayerWeights, slack: float) -> None:
        layer.refuse_decoder_parts("the well-posedness bounds (docs/well-posedness.md)")
        self.layer, self.slack = layer, slack
        self.heads = layer.heads
        self.scale = layer.attention_scale

        def spectral(w: np.ndarray) -> float:
            return float(np.linalg.norm(w, 2)) + slack

        self.wq = [spectral(w) for w in layer.wq]
        self.wk = [spectral(w) for w in layer.wk]
        self.wv = [spectral(w) for w in layer.wv]
        self.wo = [spectral(w) for w in layer.wo]
        self.wo_stacked = spectral(layer.wo.reshape(layer.heads * layer.d_v, layer.d_model))
        self.w1, self.w2 = spectral(layer.w1), spectral(layer.w2)
        self.activation = layer.activation_lipschitz
        self.bo = float(np.linalg.norm(layer.bo)) + slack
        self.b1 = float(np.linalg.norm(layer.b1)) + slack
        self.b2 = float(np.linalg.norm(layer.b2)) + slack
        self.bv = [float(np.linalg.norm(b)) + slack for b in layer.bv]

    @property
    def ffn_lipschitz(self) -> float:
        """L_F = L_sigma ||W1|| ||W2||, L_sigma the activation's Lipschitz constant (1 for
        relu; solvers.equation.weights.ACTIVATION_LIPSCHITZ)."""
        return self.activation * self.w1 * self.w2

    def row_growth(self) -> tuple[float, float]:
        """(a, b) with D+ max_i |u_i| <= a max_i |u_i| + b for the field A + F (no norm)."""
        # |sigma(z)| <= |z| for every activation: |F(x)| <= ||W2|| (||W1|| |x| + |b1|) + |b2|
        rate = sum(o * v for o, v in zip(self.wo, self.wv, strict=True)) + self.w1 * self.w2
        offset = (
            sum(o * b for o, b in zip(self.wo, self.bv, strict=True))
            + self.bo
            + self.w2 * self.b1
            + self.b2
        )
        return rate, offset

    def affine(self, centre: np.ndarray, w: np.ndarray, b: np.ndarray) -> float:
        """|c W + b| + slack (|c|^2 + 1)^{1/2}: the map's value at the centre, raised."""
        lift = math.sqrt(float(centre @ centre) + 1)
        return float(np.linalg.norm(centre @ w + b)) + self.slack * lift

    def query_size(self, rows: RowSet, h: int) -> float:
        """Qmax_h = ||Wq_h|| r + |c Wq_h + bq_h| >= |Q_i| on the ball."""
        layer = self.layer
        return self.wq[h] * rows.radius + self.affine(rows.centre, layer.wq[h], layer.bq[h])

    def value_size(self, rows: RowSet, h: int) -> float:
        """Vmax_h = ||Wv_h|| r + |c Wv_h + bv_h| >= |V_j| on the ball."""
        layer = self.layer
        return self.wv[h] * rows.radius + self.affine(rows.centre, layer.wv[h], layer.bv[h])

    def hidden_size(self, rows: RowSet) -> float:
        """Zmax = ||W1|| r + |c W1 + b1| >= |x W1 + b1| on the ball."""
        layer = self.layer
        return self.w1 * rows.radius + self.affine(rows.centre, layer.w1, layer.b1)


def column_sum(norms: WeightNorms, rows: RowSet, h: int, tokens: int, biased: bool) -> float:
    """cmax = min(N, e^Delta), Delta = 2 s Qmax ||Wk|| r (N with a score bias)."""
    if biased:
        return float(tokens)
    spread = 2 * norms.scale * norms.query_size(rows, h) * norms.wk[h] * rows.radius
    return float(tokens) if spread >= math.log(tokens) else math.exp(spread)


def attention_lipschitz(norms: WeightNorms, rows: RowSet, tokens: int, biased: bool) -> float:
    """L_A on B(c, r)^N in the Frobenius norm."""
    r, s = rows.radius, norms.scale
    per_head = []
    for h in range(norms.heads):
        cmax = column_sum(norms, rows, h, tokens, biased)
        qmax = norms.query_size(rows, h)
        score = s * r * (norms.wq[h] * norms.wk[h] * r + qmax * norms.wk[h] * math.sqrt(cmax))
        per_head.append(norms.wv[h] * (math.sqrt(cmax) + score))
    summed = sum(o * ell for o, ell in zip(norms.wo, per_head, strict=True))
    stacked = norms.wo_stacked * math.sqrt(sum(ell * ell for ell in per_head))
    return min(summed, stacked)


def attention_row_size(norms: WeightNorms, rows: RowSet) -> float:
    """Bound on |A(X)_i| on the ball."""
    values = [norms.value_size(rows, h) for h in range(norms.heads)]
    summed = sum(o * v for o, v in zip(norms.wo, values, strict=True))
    stacked = norms.wo_stacked * math.sqrt(sum(v * v for v in values))
    return min(summed, stacked) + norms.bo


def ffn_row_size(norms: WeightNorms, rows: RowSet) -> float:
    """Bound on |F(X)_i| on the ball."""
    return norms.w2 * norms.hidden_size(rows) + norms.b2


def _attention_sensitivity(norms: WeightNorms, rows: RowSet) -> list[float]:
    """Coefficients c_k of the per-row bound on |A_theta - A_theta'|."""
    r, rho, s = rows.radius, rows.largest, norms.scale
    coefficients = [1.0]  # bo
    for h in range(norms.heads):
        wo, wv, wk = norms.wo[h], norms.wv[h], norms.wk[h]
        covariance = wo * wv * s * r * r
        coefficients += [
            covariance * wk * rho,  # wq_h
            covariance * wk,  # bq_h
            covariance * norms.query_size(rows, h),  # wk_h (bk_h drops out)
            wo * rho,  # wv_h
            wo,  # bv_h
            norms.value_size(rows, h),  # wo_h
        ]
    return coefficients


def _ffn_sensitivity(norms: WeightNorms, rows: RowSet) -> list[float]:
    """Coefficients c_k of the per-row bound on |F_theta - F_theta'| (|sigma(z)| <= |z| and
    sigma L_sigma-Lipschitz)."""
    through_w1 = norms.activation * norms.w2
    return [through_w1 * rows.largest, through_w1, norms.hidden_size(rows), 1.0]  # w1 b1 w2 b2


def control_sensitivity(
    norms: WeightNorms, attention_rows: RowSet, ffn_rows: RowSet, tokens: int
) -> float:
    """K = N^{1/2} (sum_k c_k^2)^{1/2}: |f_theta(X) - f_theta'(X)| <= K |theta - theta'|."""
    coefficients = _attention_sensitivity(norms, attention_rows)
    coefficients += _ffn_sensitivity(norms, ffn_rows)
    return math.sqrt(tokens) * math.sqrt(sum(c * c for c in coefficients))


def norm_lipschitz(image_radius: float, spread: float, floor: float) -> float:
    """Lip_k = R_k / (rmin^2 + d eps)^{1/2} of a layer norm (inf when both vanish)."""
    denominator = math.sqrt(spread * spread + floor)
    return image_radius / denominator if denominator > 0 else math.inf


def grown_radius(radius: float, rate: float, offset: float, length: float) -> float:
    """m e^{a l} + b (e^{a l} - 1) / a (b l when a = 0): the row-norm bound after time l."""
    if rate == 0:
        return radius + offset * length
    return radius * exp_or_inf(rate * length) + offset * math.expm1(rate * length) / rate
