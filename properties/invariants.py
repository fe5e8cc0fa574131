"""Invariants and structure of the operators and the flow (issue 6), as claim checks.

Claims, each checked in any backend (the operators are written once against the protocol):

- permutation equivariance without positional information (no causal mask, uniform token
  weights): f(U[pi]) = f(U)[pi] for attention, feed-forward, layer norm, one Lie layer and
  a short continuous solve;
- attention weights are probability vectors, and each head's output
  O_h = softmax(s Q_h K_h^T + B) V_h (before Wo) lies in the convex hull of the value rows
  it can see: coordinate bounds, and the certificate O_h = P V_h with P row-stochastic;
- the post-LN flow stays on S1 at every layer boundary;
- relu is a projection (idempotent, non-expansive); the LN projection P is idempotent and
  P(cV) = P(V) for c > 0; P is the nearest-point map onto a sphere of radius
  R = sigma2 sqrt(d) in the mean-zero subspace, so |P(x) - P(y)| <= R / min(r(x), r(y))
  |x - y| with r(v) = |v - mean(v)| (the radial distance; its local Lipschitz constant is
  R / r): expansive inside the ball of radius R, non-expansive outside, which is measured.

Tolerances: standard model of rounding, |fl(a op b) - a op b| <= u |a op b|, a length-n
dot product or sum off by at most gamma_n |x|.|y| with gamma_n = n u / (1 - n u) (inf when
n u >= 1: the precision cannot resolve the claim). Mixed-precision backends round once
after float32 accumulation and mpmath's fdot once per product, both inside these bounds.
Magnitudes |U| |W| + |b| are computed in float64 from the data. First order throughout.

- Attention, elementwise: the q/k/v maps err by gamma_{d+1} M (M = |U| |W| + |b|), the
  scaled scores by gamma_{d_k + 2d + 6} m_i (m_i = max_k (s Mq_i . Mk_k + |B_ik|), covering
  the product, the inputs' errors, the bias and the shift by the row maximum), so the
  weights err relatively by rho_i = 2 gamma_{d_k+2d+6} m_i + gamma_{N+2} (softmax moves
  by at most twice the largest score change; exp, sum, divide); P V_h errs by
  (gamma_N + rho_i + gamma_{d+1}) (P Mv)_i and the output map adds gamma_{H d_v + 1}:
  |A^(U) - A(U)| <= gamma_{H d_v+1} ((P Mv) |Wo| + |bo|) + ((gamma_N + rho + gamma_{d+1})
  P Mv) |Wo|.
- Feed-forward: |F^ - F| <= (gamma_{m+1} + gamma_{d+1}) (Mh |W2| + |b2|), Mh = |U| |W1| + |b1|
  (relu is exact and 1-Lipschitz).
- Layer norm at a row v: per entry (2 + kappa + log2 d) u times the size
  max|b| + max|g| sqrt(d), kappa = max|v| / sqrt(var v + eps), with projection_theorem's
  allowance of 8; its local Lipschitz constant (row 2-norm) is max|g| / sqrt(var v + eps).
- A Lie layer: these local bounds are carried through the sub-steps in row 2-norms, each
  later stage multiplying the error by its Lipschitz bound at the computed point: the LN's
  above, 1 + dt |W1|_2 |W2|_2 for I + dt F, and for pre-LN (attention after a norm) the
  derived bound sum_h |Wo_h| (|Wv_h| + s max_i sum_j P_ij |V_j - Vbar_i| max_j (|Wq_h|
  |K_j| + |Q_i| |Wk_h|)) (dA_i = sum_j P_ij dV_j + sum_j P_ij dS_ij (V_j - Vbar_i)).
- A solve of m steps of an unsplit Runge-Kutta method (tableau b, s stages): step k commits
  delta_k <= h g(h Lam_k) eps_G + h Lam_k g(h Lam_k) s u |u_k| + (s + 2) u (|u_k|
  + h sum|b| |G|) + eps_P, eps_G the field's bound above (plus 3 (d + 2 + kappa) u |G| for
  the tangent projection), g(x) = max_i sum_l |b_l| alpha_l the growth of an error in stage
  i through the later stages (alpha_i = 1, alpha_l = x sum_{i<=j<l} |a_lj| alpha_j, a
  polynomial of degree s - 1) of a field with Lipschitz constant Lam_k; the error reaching
  the end is sum_k |J_{m-1} ... J_{k+1}|_2 delta_k. Lam_k and the step Jacobians J_k are
  measured by central differences in float64 along the float64 trajectory (spectral
  norms): the a priori Lipschitz bound of attention above is 5 to 10 times too large, and
  compounded over the steps it would leave no claim to check.
- Permutation checks compare two evaluations, each within its bound: tolerance 2 x bound,
  as a max-abs defect relative to the largest output (bounds in row 2-norms dominate it).
- Probability rows: exp and the division of non-negatives are non-negative (tolerance 0);
  |sum_j P^_ij - 1| <= gamma_{2N} (the softmax's sum and divide, and the check's own sum).
  Hull bounds: |O^ - P^ V^| <= gamma_N P^ |V^| and |sum P^ - 1| <= gamma_{2N}, so a
  coordinate leaves [min_j V_jc, max_j V_jc] by at most gamma_{3N} max_j |V_jc|. The
  certificate r_i = O^_i - P^_i V^ / sum_j P^_ij is evaluated from the exact stored values in
  mpmath with 20 more digits than the backend (40 at least): O^_i lies within |r_i| of the
  hull, since P^_i / sum P^_i is a convex combination when P^ >= 0; |r_i| <= gamma_{2N}
  max|V^|.
- S1: as projection_theorem, 8 (2 + kappa + log2 d) u of the size, kappa the largest
  conditioning of any row the solve projected (recorded by replaying the solve in float64).
- relu: exact (a comparison and a selection), and rounding is monotone, so
  fl(|x - y|) >= |relu(x) - relu(y)| computed: tolerance 0.
- Non-expansiveness ratios: each P evaluation is off by the LN bound (row 2-norm
  sqrt(d) x the per-entry one), the distances by (d + 2) u relatively, so a pair's ratio
  is off by (eps_P(x) + eps_P(y)) / |x - y| + 2 (d + 2) u ratio.

These are worst-case bounds: the measured defects lie 10^2 to 10^4 below them (rounding
errors of random sign add like sqrt(n), and |U| |W| exceeds |U W|). In float16 and
bfloat16 the attention and layer bounds exceed the outputs themselves, so those checks
cannot resolve anything there; the probability, hull, relu and projection checks can.
A computation that overflows its format raises NumericalBreakdownError.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from properties.claim_check import ClaimCheck
from solvers import LayerWeights, PiecewiseControls, Problem, backend, solve, solve_layers
from solvers.backends import Array, Backend
from solvers.driver import integrate
from solvers.errors import InvalidInputError, NumericalBreakdownError
from solvers.flow import LayerFlow
from solvers.integrators import stage_growth
from solvers.methods import METHODS
from solvers.operators import LAYER_NORMS, attention, feed_forward, layer_norm, project_to_s1
from solvers.provenance import versions
from solvers.records import to_json
from solvers.schemes import Unsplit, lie_step
from solvers.validation import choice, finite_array, positive_int
from solvers.weights import BackendLayer

OPERATORS = ("attention", "feed_forward", "layer_norm", "lie_layer", "continuous_solve")
SCALE_FACTORS = (0.125, 0.3, 7.0, 16.0)
RADII = (0.03, 0.1, 0.3, 0.7, 1.0, 1.5, 3.0, 10.0)
P_ALLOWANCE = 8
"""projection_theorem's allowance on the layer-norm rounding count (2 + kappa + log2 d) u."""
JACOBIAN_STEP = 1e-6
"""Relative central-difference step for the float64 Jacobians (truncation ~1e-12, rounding
~1e-10 relative)."""

Normalise = Callable[[Backend, Array], Array]
Projection = Callable[[Backend, Array], Array]


def rounding_gamma(n: float, u: float) -> float:
    """gamma_n = n u / (1 - n u), the relative error of n roundings of unit roundoff u.

    Domain: n >= 0, u > 0; inf once n u >= 1 (the precision bounds nothing).
    """
    return n * u / (1 - n * u) if n * u < 1 else math.inf


def _largest(bk: Backend, x: Array) -> float:
    return float(np.max(np.abs(bk.to_float64(x)), initial=0.0))


def _require_finite(bk: Backend, value: Array, what: str) -> None:
    if not bk.all_finite(value):
        raise NumericalBreakdownError(
            f"{bk!r} produced inf or NaN in {what}: the values exceed what the format can hold"
        )


def _row_norms(x: np.ndarray) -> np.ndarray:
    return np.sqrt(np.sum(x * x, axis=-1))


def _as_layer(layer: object) -> LayerWeights:
    if not isinstance(layer, LayerWeights):
        raise InvalidInputError(f"layer must be a LayerWeights, got {type(layer).__name__}")
    return layer


def _state(name: str, value: object, d: int) -> np.ndarray:
    u = finite_array(name, value)
    if u.ndim not in (2, 3) or u.shape[-1] != d or 0 in u.shape:
        raise InvalidInputError(f"{name} must have shape (N, {d}) or (B, N, {d}), got {u.shape}")
    return u


def _score_bias(tokens: int, causal: bool, token_weights: object) -> np.ndarray | None:
    """B = log w^x per key, and -inf above the diagonal if causal (None: no bias)."""
    if token_weights is None and not causal:
        return None
    bias = np.zeros((tokens, tokens))
    if token_weights is not None:
        weights = finite_array("token_weights", token_weights, (tokens,))
        if (weights <= 0).any():
            raise InvalidInputError(f"token_weights must be > 0, got {weights.min()!r}")
        bias += np.log(weights)
    if causal:
        bias[np.triu_indices(tokens, k=1)] = -np.inf
    return bias


def attention_heads(
    bk: Backend,
    u: Array,
    layer: BackendLayer,
    score_bias: Array | None = None,
    normalise: Normalise | None = None,
) -> tuple[Array, Array, Array]:
    """Per head h: (P_h, V_h, O_h) with P_h = softmax_rows(s Q_h K_h^T + B), O_h = P_h V_h.

    Q_h = U Wq_h + bq_h etc. as in `solvers.operators.attention`, with the same operations
    in the same order, so A(U) = sum_h O_h Wo_h + bo. Shapes (..., H, N, N), (..., H, N, d_v),
    (..., H, N, d_v). `normalise` replaces the row softmax (a wrong map, for negative
    controls). Defined for every finite U.
    """
    heads, d_k = layer.heads, layer.d_k
    qkv = bk.matmul(u, layer.w_qkv)
    qkv += layer.b_qkv
    qkv[..., : heads * d_k] *= layer.scale

    def split(x: Array) -> Array:
        return np.swapaxes(x.reshape(*x.shape[:-1], heads, -1), -2, -3)

    q = split(qkv[..., : heads * d_k])
    k = split(qkv[..., heads * d_k : 2 * heads * d_k])
    v = split(qkv[..., 2 * heads * d_k :])
    scores = bk.matmul(q, np.swapaxes(k, -1, -2))
    if score_bias is not None:
        scores += score_bias
    weights = bk.softmax_(scores) if normalise is None else normalise(bk, scores)
    return weights, v, bk.matmul(weights, v)


@dataclass(frozen=True)
class HeadMagnitudes:
    """float64 heads at U and the magnitudes |U| |W| + |b| of their inputs (H leading)."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    p: np.ndarray
    mq: np.ndarray
    mk: np.ndarray
    mv: np.ndarray
    score_magnitude: np.ndarray  # s Mq Mk^T + |B| (finite entries), (..., H, N, N)


def head_magnitudes(
    u: np.ndarray, layer: LayerWeights, bias: np.ndarray | None = None
) -> HeadMagnitudes:
    """Per head, in float64: Q, K, V = U W + b, P = softmax(s Q K^T + B), the magnitudes
    Mq, Mk, Mv = |U| |W| + |b| and s Mq Mk^T + |B| (finite B). Domain: finite U (..., N, d).
    """

    def head_map(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.einsum("...nd,hde->...hne", x, w) + b[:, None, :]

    q, k, v = (head_map(u, w, b) for w, b in ((layer.wq, layer.bq), (layer.wk, layer.bk),
                                              (layer.wv, layer.bv)))  # fmt: skip
    magnitude = np.abs(u)
    mq, mk, mv = (
        head_map(magnitude, np.abs(w), np.abs(b))
        for w, b in ((layer.wq, layer.bq), (layer.wk, layer.bk), (layer.wv, layer.bv))
    )
    scores = layer.scale * q @ np.swapaxes(k, -1, -2)
    score_magnitude = layer.scale * mq @ np.swapaxes(mk, -1, -2)
    if bias is not None:
        scores = scores + bias
        score_magnitude = score_magnitude + np.where(np.isfinite(bias), np.abs(bias), 0.0)
    with np.errstate(invalid="ignore"):
        p = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
    p /= np.sum(p, axis=-1, keepdims=True)
    return HeadMagnitudes(q, k, v, p, mq, mk, mv, score_magnitude)


def _visible_max(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Row maxima of x over the keys with P > 0 (masked keys excluded)."""
    return np.max(np.where(p > 0, x, 0.0), axis=-1)


def attention_rounding_bound(
    u: np.ndarray, layer: LayerWeights, bias: np.ndarray | None, unit: float
) -> np.ndarray:
    """Elementwise bound on |A^(U) - A(U)| at unit roundoff `unit`, first order:

    gamma_{H d_v+1} ((P Mv) |Wo| + |bo|) + ((gamma_N + rho + gamma_{d+1}) P Mv) |Wo|, with
    rho_i = 2 gamma_{d_k+2d+6} m_i + gamma_{N+2} (module docstring). Domain: finite U
    (..., N, d); B (N, N) with -inf for masked keys, or None.
    """
    heads = head_magnitudes(u, layer, bias)
    d, d_k, d_v, tokens = layer.d_model, layer.d_k, layer.d_v, u.shape[-2]
    m = _visible_max(heads.score_magnitude, heads.p)  # (..., H, N)
    rho = 2 * rounding_gamma(d_k + 2 * d + 6, unit) * m + rounding_gamma(tokens + 2, unit)
    coefficient = rounding_gamma(tokens, unit) + rho + rounding_gamma(d + 1, unit)
    mixed = heads.p @ heads.mv  # (..., H, N, d_v)

    def joined(x: np.ndarray) -> np.ndarray:
        return np.swapaxes(x, -2, -3).reshape(*x.shape[:-3], tokens, layer.heads * d_v)

    wo = np.abs(layer.wo.reshape(layer.heads * d_v, d))
    size = joined(mixed) @ wo + np.abs(layer.bo)
    return (
        rounding_gamma(layer.heads * d_v + 1, unit) * size
        + joined(coefficient[..., None] * mixed) @ wo
    )


def _attention_lipschitz(u: np.ndarray, layer: LayerWeights, bias: np.ndarray | None) -> float:
    """Bound on the local Lipschitz constant of A at U in the largest row 2-norm (docstring)."""
    heads = head_magnitudes(u, layer, bias)
    total = 0.0
    for h in range(layer.heads):
        nq, nk, nv, no = (np.linalg.norm(w[h], 2) for w in (layer.wq, layer.wk, layer.wv,
                                                            layer.wo))  # fmt: skip
        p, v = heads.p[..., h, :, :], heads.v[..., h, :, :]
        mean_value = p @ v
        spread = np.sum(p * _row_norms(v[..., None, :, :] - mean_value[..., :, None, :]), -1)
        q_norm, k_norm = _row_norms(heads.q[..., h, :, :]), _row_norms(heads.k[..., h, :, :])
        score_change = layer.scale * (nq * np.max(k_norm, -1, keepdims=True) + q_norm * nk)
        total += no * (nv + float(np.max(spread * score_change)))
    return total


def _feed_forward_bound(u: np.ndarray, layer: LayerWeights, unit: float) -> np.ndarray:
    """Elementwise bound on |F^(U) - F(U)|: (gamma_{m+1} + gamma_{d+1}) (Mh |W2| + |b2|)."""
    hidden = np.abs(u) @ np.abs(layer.w1) + np.abs(layer.b1)
    constant = rounding_gamma(layer.d_ff + 1, unit) + rounding_gamma(layer.d_model + 1, unit)
    return constant * (hidden @ np.abs(layer.w2) + np.abs(layer.b2))


def _norm_rounding(v: np.ndarray, gain: np.ndarray, bias: np.ndarray, eps: float, unit: float):
    """Per row: (2-norm rounding bound of LN at v, its Lipschitz constant, kappa)."""
    d = v.shape[-1]
    spread = np.sqrt(np.var(v, axis=-1) + eps)
    kappa = np.max(np.abs(v), axis=-1) / spread
    size = float(np.max(np.abs(bias)) + np.max(np.abs(gain)) * math.sqrt(d))
    rounding = P_ALLOWANCE * (2 + kappa + math.log2(d)) * unit * size * math.sqrt(d)
    return rounding, float(np.max(np.abs(gain))) / spread, kappa


def _lie_layer_bound(
    u: np.ndarray, layer: LayerWeights, norm: str, dt: float, bias: np.ndarray | None, unit: float
) -> float:
    """Largest row 2-norm of the rounding error of one Lie layer (module docstring)."""
    bk64 = backend("float64")
    w = layer.on(bk64)
    eps = layer.eps
    ffn_lipschitz = dt * np.linalg.norm(layer.w1, 2) * np.linalg.norm(layer.w2, 2)

    def ln(x: np.ndarray, which: tuple) -> np.ndarray:
        return layer_norm(bk64, x, *which, eps)

    # attention sub-step
    if norm == "pre":
        error_in, lipschitz, _ = _norm_rounding(u, *layer.norm1, eps, unit)
        z = ln(u, layer.norm1)
        a = dt * attention(bk64, z, w, bias)
        error = (
            dt * _attention_lipschitz(z, layer, bias) * np.max(error_in)
            + dt * _row_norms(attention_rounding_bound(z, layer, bias, unit))
            + unit * (_row_norms(a) + _row_norms(u + a))
        )
        u1 = u + a
    else:
        a = dt * attention(bk64, u, w, bias)
        u1 = u + a
        error = dt * _row_norms(attention_rounding_bound(u, layer, bias, unit)) + unit * (
            _row_norms(a) + _row_norms(u1)
        )
        if norm == "post":
            rounding, lipschitz, _ = _norm_rounding(u1, *layer.norm1, eps, unit)
            error = lipschitz * error + rounding
            u1 = ln(u1, layer.norm1)
    # feed-forward sub-step
    if norm == "pre":
        rounding, lipschitz, _ = _norm_rounding(u1, *layer.norm2, eps, unit)
        z = ln(u1, layer.norm2)
        f = dt * feed_forward(bk64, z, w)
        error = error + ffn_lipschitz * (lipschitz * error + rounding)
    else:
        z = u1
        f = dt * feed_forward(bk64, z, w)
        error = (1 + ffn_lipschitz) * error
    u2 = u1 + f
    error = error + dt * _row_norms(_feed_forward_bound(z, layer, unit))
    error = error + unit * (_row_norms(f) + _row_norms(u2))
    if norm == "post":
        rounding, lipschitz, _ = _norm_rounding(u2, *layer.norm2, eps, unit)
        error = lipschitz * error + rounding
    return float(np.max(error))


def _jacobian(map_: Callable[[np.ndarray], np.ndarray], u: np.ndarray) -> np.ndarray:
    """Central-difference Jacobian (n x n, n = u.size) of a float64 map, all columns batched."""
    n = u.size
    step = JACOBIAN_STEP * max(1.0, float(np.max(np.abs(u))))
    basis = np.eye(n).reshape(n, *u.shape) * step
    plus, minus = map_(u + basis), map_(u - basis)
    return ((plus - minus) / (2 * step)).reshape(n, n).T


class _RecordingFlow(LayerFlow):
    """A LayerFlow whose projections record the conditioning and rounding of their inputs."""

    unit = 0.0
    conditioning = 0.0
    last_rounding = 0.0

    def project(self, n: int, t: Array, u: Array, which: int = 2) -> Array:
        if self.norm == "post":
            layer = self.layer(n, t)
            gain, bias = layer.norm1 if which == 1 else layer.norm2
            rounding, _, kappa = _norm_rounding(
                np.asarray(u), np.asarray(gain), np.asarray(bias), float(layer.eps), self.unit
            )
            self.conditioning = max(self.conditioning, float(np.max(kappa)))
            self.last_rounding = float(np.sqrt(np.sum(rounding**2)))
        return super().project(n, t, u, which)


def _solve_bound(
    problem: Problem, method: Unsplit, steps: int, layer: LayerWeights, unit: float
) -> float:
    """2-norm bound on the rounding error of solve(problem, method, steps) over [0, 1]."""
    bk64 = backend("float64")
    flow = _RecordingFlow.from_problem(problem, bk64)
    flow.unit = unit
    bias = problem.score_bias(bk64)
    h = 1.0 / steps
    size = problem.u0.size
    tableau = method.tableau
    stages = len(tableau.b)
    weight = float(sum(abs(b) for b in tableau.b))
    ffn_lipschitz = np.linalg.norm(layer.w1, 2) * np.linalg.norm(layer.w2, 2)

    def field(v: np.ndarray, t: float) -> np.ndarray:
        g = flow.total(0, bk64.asarray(t), v)
        return flow.tangent(0, bk64.asarray(t), v, g) if method.field == "tangent" else g

    def step(v: np.ndarray, t: float) -> np.ndarray:
        return method.step(flow, 0, bk64.asarray(t), v, bk64.asarray(h))

    u = np.asarray(problem.u0, dtype=np.float64)
    local, jacobians = [], []
    if method.enters_constraint_set and problem.norm == "post":
        u = flow.project(0, bk64.asarray(0), u)
        local.append(flow.last_rounding)
        jacobians.append(np.eye(size))
    for k in range(steps):
        t = k * h
        g = field(u, t)
        lam = float(np.linalg.norm(_jacobian(lambda v, t=t: field(v, t), u), 2))
        if problem.norm == "pre":
            w1 = _norm_rounding(u, *layer.norm1, layer.eps, unit)[0]
            w2 = _norm_rounding(u, *layer.norm2, layer.eps, unit)[0]
            z1 = layer_norm(bk64, u, *layer.norm1, layer.eps)
            z2 = layer_norm(bk64, u, *layer.norm2, layer.eps)
            rows = u.shape[-2] * (u.size // (u.shape[-1] * u.shape[-2]))
            field_error = (
                math.sqrt(rows) * _attention_lipschitz(z1, layer, bias) * float(np.max(w1))
                + float(np.linalg.norm(attention_rounding_bound(z1, layer, bias, unit)))
                + float(np.linalg.norm(ffn_lipschitz * w2))
                + float(np.linalg.norm(_feed_forward_bound(z2, layer, unit)))
            )
        else:
            field_error = float(
                np.linalg.norm(attention_rounding_bound(u, layer, bias, unit))
            ) + float(np.linalg.norm(_feed_forward_bound(u, layer, unit)))
        g_norm = float(np.linalg.norm(g))
        field_error += unit * g_norm
        if method.field == "tangent" and problem.norm == "post":
            kappa = float(np.max(np.max(np.abs(u), -1) / np.std(u, axis=-1)))
            field_error += 3 * (u.shape[-1] + 2 + kappa) * unit * g_norm
        growth = stage_growth(tableau, h * lam)
        u_norm = float(np.linalg.norm(u))
        delta = (
            h * growth * field_error
            + h * lam * growth * stages * unit * u_norm
            + (stages + 2) * unit * (u_norm + h * weight * g_norm)
        )
        jacobians.append(_jacobian(lambda v, t=t: step(v, t), u))
        u = step(u, t)
        local.append(delta + (flow.last_rounding if problem.norm == "post" else 0.0))
    # error committed before Jacobian j reaches the end through J_last ... J_j
    total, suffix = 0.0, np.eye(size)
    for delta, jacobian in zip(reversed(local), reversed(jacobians), strict=True):
        total += float(np.linalg.norm(suffix, 2)) * delta
        suffix = suffix @ jacobian
    return total


def check_permutation_equivariance(
    layer: LayerWeights,
    u: np.ndarray,
    permutation: Sequence[int],
    *,
    precision: str | Backend = "float64",
    operators: Sequence[str] = OPERATORS,
    norm: str = "post",
    dt: float = 1.0,
    method: str = "projected-rk4",
    steps_per_unit: int = 2,
    causal: bool = False,
    token_weights: np.ndarray | None = None,
) -> list[ClaimCheck]:
    """f(U[pi]) = f(U)[pi] (tokens permuted along axis -2) for each operator f named.

    f is attention A, feed-forward F, the layer norm norm1 (eps and gains of `layer`), one
    Lie layer with step dt and `norm` placement ("post", "pre", "none"), and the solve of
    Problem(U, [layer], 1, norm) by the unsplit `method` with `steps_per_unit` steps.
    Domain: every finite U of shape (N, d) or (B, N, d) (rows with var > 0 where a norm
    with eps = 0 applies). The claim needs no positional information: `causal` or
    non-uniform `token_weights` (attached to positions, not permuted) break it, which makes
    them negative controls. Defect max |f(U[pi]) - f(U)[pi]| / max |f(U)| (absolute when
    f(U) = 0); tolerance twice the derived rounding bound of f (module docstring), relative
    to the same scale.
    """
    layer = _as_layer(layer)
    bk = backend(precision)
    u = _state("u", u, layer.d_model)
    tokens = u.shape[-2]
    order = np.asarray(permutation)
    if order.shape != (tokens,) or sorted(order.tolist()) != list(range(tokens)):
        raise InvalidInputError(
            f"permutation must reorder range({tokens}) (the tokens), got {list(permutation)!r}"
        )
    choice("norm", norm, LAYER_NORMS)
    dt = float(finite_array("dt", dt, ()))
    if dt <= 0:
        raise InvalidInputError(f"dt must be > 0, got {dt!r}")
    for name in operators:
        choice("operator", name, OPERATORS)
    bias = _score_bias(tokens, bool(causal), token_weights)
    unit = bk.unit_roundoff
    permuted = u[..., order, :]
    configuration = {
        "precision": repr(bk), "shape": list(u.shape), "heads": layer.heads,
        "d_ff": layer.d_ff, "eps": layer.eps, "permutation": order.tolist(),
        "causal": bool(causal), "token_weights": token_weights is not None,
    }  # fmt: skip

    def compare(claim: str, once: Array, twice: Array, bound: float, note: str, **extra) -> None:
        _require_finite(bk, once, claim.split(" is ")[0])
        _require_finite(bk, twice, claim.split(" is ")[0])
        scale = _largest(bk, once) or 1.0  # an output of zeros: absolute defects
        with bk.active():
            defect = _largest(bk, twice - once[..., order, :]) / scale
        checks.append(
            ClaimCheck(claim, {**configuration, **extra}, defect, 2 * bound / scale, note)
        )

    checks: list[ClaimCheck] = []
    with bk.active(), np.errstate(over="ignore", invalid="ignore"):  # reported as breakdown
        w = layer.on(bk)
        x, y = bk.asarray(u, "u"), bk.asarray(permuted, "u[pi]")
        b = None if bias is None else bk.asarray(bias)
        for name in operators:
            if name == "attention":
                compare(
                    "attention is permutation equivariant",
                    attention(bk, x, w, b),
                    attention(bk, y, w, b),
                    float(np.max(attention_rounding_bound(u, layer, bias, unit))),
                    "max |A(U[pi]) - A(U)[pi]| / max |A(U)|",
                )
            elif name == "feed_forward":
                compare(
                    "feed-forward is permutation equivariant",
                    feed_forward(bk, x, w),
                    feed_forward(bk, y, w),
                    float(np.max(_feed_forward_bound(u, layer, unit))),
                    "max |F(U[pi]) - F(U)[pi]| / max |F(U)|",
                )
            elif name == "layer_norm":
                rounding, _, _ = _norm_rounding(u, *layer.norm1, layer.eps, unit)
                compare(
                    "layer norm is permutation equivariant",
                    layer_norm(bk, x, *w.norm1, w.eps),
                    layer_norm(bk, y, *w.norm1, w.eps),
                    float(np.max(rounding)),
                    "max |LN(U[pi]) - LN(U)[pi]| / max |LN(U)|",
                )
            elif name == "lie_layer":
                step = bk.asarray(dt)
                compare(
                    "a Lie layer is permutation equivariant",
                    lie_step(bk, x, layer, step, norm, b),
                    lie_step(bk, y, layer, step, norm, b),
                    _lie_layer_bound(u, layer, norm, dt, bias, unit),
                    "max |L(U[pi]) - L(U)[pi]| / max |L(U)|, L one Lie step",
                    norm=norm,
                    dt=dt,
                )
    if "continuous_solve" in operators:
        stepping = METHODS[choice("method", method, tuple(METHODS))]
        if not isinstance(stepping, Unsplit):
            allowed = [name for name, m in METHODS.items() if isinstance(m, Unsplit)]
            raise InvalidInputError(
                f"method {method!r} is not an unsplit Runge-Kutta method; the solve's rounding "
                f"bound is derived for {', '.join(repr(a) for a in allowed)}"
            )
        steps = positive_int("steps_per_unit", steps_per_unit)
        controls = PiecewiseControls([layer])

        def problem(start: np.ndarray) -> Problem:
            return Problem(start, controls, 1.0, norm, bool(causal), token_weights)

        compare(
            "a continuous solve is permutation equivariant",
            bk.asarray(solve(problem(u), stepping, steps, bk)),
            bk.asarray(solve(problem(permuted), stepping, steps, bk)),
            _solve_bound(problem(u), stepping, steps, layer, unit),
            f"max |S(U[pi]) - S(U)[pi]| / max |S(U)|, S = {method} with {steps} steps on [0, 1]",
            norm=norm,
            method=method,
            steps_per_unit=steps,
        )
    return checks


def check_attention_weights(
    layer: LayerWeights,
    u: np.ndarray,
    *,
    precision: str | Backend = "float64",
    causal: bool = False,
    token_weights: np.ndarray | None = None,
    normalise: Normalise | None = None,
) -> list[ClaimCheck]:
    """Attention rows are probability vectors and each head's output lies in its values' hull.

    With P_h = softmax_rows(s Q_h K_h^T + B), V_h = U Wv_h + bv_h, O_h = P_h V_h
    (`attention_heads`; domain: every finite U of shape (N, d) or (B, N, d)), the claims:
    P_h >= 0; every row of P_h sums to 1; sum_h O_h Wo_h + bo = A(U) (the heads are the
    operator's); min_j V_jc <= O_ic <= max_j V_jc over the keys j row i sees; and the
    certificate: O_i lies within |O_i - P_i V / sum_j P_ij| of conv{V_j}, evaluated exactly
    enough (mpmath with 20 more digits). `normalise` replaces the softmax (negative control).
    Tolerances: module docstring.
    """
    layer = _as_layer(layer)
    bk = backend(precision)
    u = _state("u", u, layer.d_model)
    tokens = u.shape[-2]
    bias = _score_bias(tokens, bool(causal), token_weights)
    unit = bk.unit_roundoff
    configuration = {
        "precision": repr(bk), "shape": list(u.shape), "heads": layer.heads, "d_k": layer.d_k,
        "d_v": layer.d_v, "causal": bool(causal), "token_weights": token_weights is not None,
        "normalise": "softmax" if normalise is None else getattr(normalise, "__name__", "custom"),
    }  # fmt: skip
    with bk.active(), np.errstate(over="ignore", invalid="ignore"):  # reported as breakdown
        w = layer.on(bk)
        x = bk.asarray(u, "u")
        b = None if bias is None else bk.asarray(bias)
        weights, values, outputs = attention_heads(bk, x, w, b, normalise)
        row_sums = bk.sum(weights, -1)
        joined = np.swapaxes(outputs, -2, -3).reshape(*u.shape[:-1], layer.heads * layer.d_v)
        recombined = bk.matmul(joined, w.w_o)
        recombined += w.b_o
        operator = attention(bk, x, w, b)
        for value in (weights, outputs, operator):
            _require_finite(bk, value, "attention")
        difference = _largest(bk, recombined - operator)
    p = bk.to_float64(weights)
    v = bk.to_float64(values)
    o = bk.to_float64(outputs)
    visible = np.isfinite(np.broadcast_to(bias if bias is not None else 0.0, p.shape[-2:]))
    visible = np.broadcast_to(visible, p.shape)
    upper = np.max(np.where(visible[..., None], v[..., None, :, :], -np.inf), axis=-2)
    lower = np.min(np.where(visible[..., None], v[..., None, :, :], np.inf), axis=-2)
    value_size = np.max(np.where(visible[..., None], np.abs(v[..., None, :, :]), 0.0), axis=-2)
    value_size = np.maximum(value_size, np.finfo(float).tiny)
    outside = np.maximum(np.maximum(o - upper, lower - o), 0.0) / value_size
    if np.min(p) < 0 or np.min(bk.to_float64(row_sums)) <= 0:
        certificate = math.inf  # P_i / sum_j P_ij is not a convex combination
    else:
        distance = _hull_certificate(bk, weights, values, outputs) / np.maximum(
            np.max(np.abs(v), axis=(-2, -1))[..., None], np.finfo(float).tiny
        )
        certificate = float(np.max(distance))
    attention_bound = float(np.max(attention_rounding_bound(u, layer, bias, unit)))
    scale = max(_largest(bk, operator), np.finfo(float).tiny)
    return [
        ClaimCheck(
            "attention weights are non-negative",
            configuration,
            max(-float(np.min(p)), 0.0),
            0.0,
            "largest negative weight (exp and the division of non-negatives are exact in sign)",
        ),
        ClaimCheck(
            "attention rows sum to 1",
            configuration,
            float(np.max(np.abs(bk.to_float64(row_sums) - 1))),
            rounding_gamma(2 * tokens, unit),
            "max_i |sum_j P_ij - 1|",
        ),
        ClaimCheck(
            "the heads recombine to the attention operator",
            configuration,
            difference / scale,
            2 * attention_bound / scale,
            "max |sum_h O_h Wo_h + bo - A(U)| / max |A(U)|",
        ),
        ClaimCheck(
            "each head's output lies within its value rows' coordinate bounds",
            configuration,
            float(np.max(outside)),
            rounding_gamma(3 * tokens, unit),
            "max over heads, rows, coordinates of the excess over [min_j V_jc, max_j V_jc], "
            "/ max_j |V_jc|",
        ),
        ClaimCheck(
            "each head's output lies in the convex hull of its value rows",
            configuration,
            certificate,
            rounding_gamma(2 * tokens, unit),
            "certificate: max_i |O_i - P_i V / sum_j P_ij|_inf / max |V|, evaluated in mpmath "
            "(inf when some P_ij < 0: then it certifies nothing)",
        ),
    ]


def _exactly(bk: Backend, value: Array, reference: Backend) -> Array:
    """The backend's stored numbers, exactly (to the reference's precision), in `reference`."""
    if isinstance(value, np.ndarray) and value.dtype.kind != "O":
        if value.dtype.itemsize <= 8 or value.dtype == np.float64:
            return reference.asarray(bk.to_float64(value))
        ratios = np.vectorize(lambda x: Fraction(*x.as_integer_ratio()), otypes=[object])
        return reference.asarray(ratios(value))
    if bk.name == "mpmath":
        return reference.asarray(value)
    return reference.asarray(bk.to_strings(value))


def _hull_certificate(bk: Backend, weights: Array, values: Array, outputs: Array) -> np.ndarray:
    """max-abs of O_i - P_i V / sum_j P_ij per (..., head, row), in high-precision mpmath."""
    reference = backend("mpmath", max(40, (bk.digits or 0) + 20))
    with reference.active():
        p = _exactly(bk, weights, reference)
        v = _exactly(bk, values, reference)
        o = _exactly(bk, outputs, reference)
        residual = o - reference.matmul(p, v) / reference.sum(p, -1)
        return np.max(np.abs(reference.to_float64(residual)), axis=-1)


def check_flow_stays_on_s1(
    problem: Problem,
    method: str = "lie",
    steps_per_unit: int = 1,
    *,
    precision: str | Backend = "float64",
) -> ClaimCheck:
    """Every row of every post-LN layer-boundary state u(n), n >= 1, lies on S1(sigma1, sigma2).

    S1 = {rows with mean sigma1 and variance sigma2^2} (w^y-weighted with feature
    weights), (sigma2, sigma1) the gain and bias of the norm that ends layer n (norm2; the
    non-Lie methods need norm1 = norm2). Domain: problems with norm "post" and scalar
    gains. With eps > 0 the set is not S1 and the check fails by the measured amount.
    Defect max over boundaries and rows of max(|mean - sigma1|, |std - sigma2|) / size,
    size = |sigma1| + sigma2 sqrt(d); tolerance 8 (2 + kappa + log2 d) u, kappa the largest
    conditioning of a row the solve projected (replayed in float64).
    """
    if not isinstance(problem, Problem):
        raise InvalidInputError(f"problem must be a Problem, got {type(problem).__name__}")
    if problem.norm != "post":
        raise InvalidInputError(
            f"the flow stays on S1 only with post-LN; problem.norm is {problem.norm!r}"
        )
    bk = backend(precision)
    states = solve_layers(problem, method, steps_per_unit, bk)
    stepping = METHODS[method] if isinstance(method, str) else method
    steps = positive_int("steps_per_unit", steps_per_unit)
    conditioning = _replay_conditioning(problem, stepping, steps)
    d = problem.controls.d_model
    t_final = Fraction(problem.t_final)
    worst, largest_size, eps = 0.0, 0.0, 0.0
    bk64 = backend("float64")
    with bk.active():
        weights = problem.feature_weights
        if weights is not None:
            weights = bk.asarray(weights)
            weights = weights / bk.sum(weights, -1)
        for n in range(1, len(states)):
            end = min(t_final, n)
            layer64 = problem.controls.layer_on(bk64, n - 1, bk64.asarray(end))
            gain, bias = (float(np.asarray(x)) if np.ndim(x) == 0 else None for x in layer64.norm2)
            if gain is None or bias is None:
                raise InvalidInputError(
                    f"layer {n - 1} has a per-feature norm2 gain or bias: S1 is not defined"
                )
            eps = max(eps, float(layer64.eps))
            size = abs(bias) + gain * math.sqrt(d)
            largest_size = max(largest_size, size)
            state = bk.asarray(states[n])
            mean, variance = bk.moments(state, weights)
            off = max(
                _largest(bk, mean - bk.asarray(bias)),
                _largest(bk, bk.sqrt(variance) - bk.asarray(gain)),
            )
            worst = max(worst, off / size)
    return ClaimCheck(
        "the post-LN flow stays on S1",
        {
            "precision": repr(bk),
            "method": stepping.name,
            "steps_per_unit": steps,
            "shape": list(problem.u0.shape),
            "layers": len(states) - 1,
            "eps": eps,
            "conditioning": conditioning,
        },
        worst,
        P_ALLOWANCE * (2 + conditioning + math.log2(d)) * bk.unit_roundoff,
        "max over boundaries and rows of |mean - sigma1|, |std - sigma2|, / size of S1",
    )


def _replay_conditioning(problem: Problem, method: Any, steps_per_unit: int) -> float:
    """The largest kappa of any row projected while solving `problem` (replayed in float64)."""
    flow = _RecordingFlow.from_problem(problem, backend("float64"))
    integrate(problem, method, steps_per_unit, flow)
    return flow.conditioning


def check_relu_projection(
    x: np.ndarray, y: np.ndarray, *, precision: str | Backend = "float64"
) -> list[ClaimCheck]:
    """relu = max(., 0), the projection onto {z >= 0}: relu(relu(x)) = relu(x) and
    |relu(x) - relu(y)| <= |x - y| entrywise. Domain: finite x, y of equal shape.

    Both hold exactly in floating point (relu is exact, rounding is monotone): tolerance 0.
    """
    bk = backend(precision)
    x, y = finite_array("x", x), finite_array("y", y)
    if x.shape != y.shape:
        raise InvalidInputError(f"x and y must have the same shape, got {x.shape} and {y.shape}")
    configuration = {"precision": repr(bk), "shape": list(x.shape)}
    with bk.active():
        a, b = bk.asarray(x, "x"), bk.asarray(y, "y")
        once = bk.relu_(a.copy())
        twice = bk.relu_(once.copy())
        idempotent = _largest(bk, twice - once)
        gap = bk.to_float64(abs(bk.relu_(a.copy()) - bk.relu_(b.copy())) - abs(a - b))
    return [
        ClaimCheck(
            "relu is idempotent", configuration, idempotent, 0.0, "max |relu(relu x) - relu x|"
        ),
        ClaimCheck(
            "relu is non-expansive",
            configuration,
            max(float(np.max(gap, initial=0.0)), 0.0),
            0.0,
            "max of |relu x - relu y| - |x - y| entrywise",
        ),
    ]


def _default_projection(sigma1: float, sigma2: float) -> Projection:
    def projection(bk: Backend, x: Array) -> Array:
        return project_to_s1(bk, x, sigma1, sigma2)

    return projection


def check_projection_idempotence_and_scale(
    v: np.ndarray,
    sigma1: float,
    sigma2: float,
    *,
    precision: str | Backend = "float64",
    projection: Projection | None = None,
    scales: Sequence[float] = SCALE_FACTORS,
) -> list[ClaimCheck]:
    """P(P(V)) = P(V) and P(cV) = P(V) for c > 0, P(V)_i = sigma2 (V_i - mean V_i) / std V_i
    + sigma1 (`project_to_s1`, eps = 0, scalar gain). Domain: rows with var > 0.

    `projection` replaces P (say a layer norm with eps > 0, which fails both). Defects are
    max-abs over rows relative to size = |sigma1| + sigma2 sqrt(d); tolerance
    8 (2 + kappa + log2 d) u as in projection_theorem.
    """
    bk = backend(precision)
    v = finite_array("v", v)
    if v.ndim < 2 or v.shape[-1] < 2:
        raise InvalidInputError(f"v must have shape (..., N, d) with d >= 2, got {v.shape}")
    c = finite_array("scales", scales)
    if c.ndim != 1 or not len(c) or (c <= 0).any():
        raise InvalidInputError(
            f"scales must be a non-empty list of positive numbers, got {scales}"
        )
    projection = projection or _default_projection(sigma1, sigma2)
    d = v.shape[-1]
    size = abs(sigma1) + sigma2 * math.sqrt(d)
    kappa = float(np.max(np.max(np.abs(v), -1) / np.std(v, axis=-1)))
    tolerance = P_ALLOWANCE * (2 + kappa + math.log2(d)) * bk.unit_roundoff
    configuration = {
        "precision": repr(bk), "shape": list(v.shape), "sigma1": sigma1, "sigma2": sigma2,
        "conditioning": kappa,
    }  # fmt: skip
    with bk.active():
        x = bk.asarray(v, "v")
        p = projection(bk, x)
        idempotent = _largest(bk, projection(bk, p) - p) / size
        rescaled = max(_largest(bk, projection(bk, bk.asarray(s) * x) - p) for s in c) / size
    return [
        ClaimCheck("P is idempotent", configuration, idempotent, tolerance,
                   "max |P(P(V)) - P(V)| / size of S1"),
        ClaimCheck("P(cV) = P(V) for c > 0", configuration, rescaled, tolerance,
                   f"max over c in {[float(s) for s in c]}, / size of S1"),
    ]  # fmt: skip


@dataclass(frozen=True)
class ProjectionExpansion:
    """Measured |P(x) - P(y)| / |x - y| against the radial distance, and the claims.

    `local_ratio[k]` is the largest ratio over tangent pairs y = x + step r t at radial
    distance r = radii[k] R (t a unit tangent of the sphere |v - mean v| = r);
    `predicted_local[k]` = R / r is P's local Lipschitz constant there. `pair_*` are the
    random pairs (minimum radial distance of the pair, ratio).
    """

    radius: float
    radii: list[float]
    local_ratio: list[float]
    predicted_local: list[float]
    max_ratio_outside: float
    max_ratio_inside: float
    pair_min_radius: list[float]
    pair_ratio: list[float]
    checks: list[ClaimCheck]
    inputs: dict[str, Any]
    versions: dict[str, str] = field(default_factory=versions)
    wall_time: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data (floats written with repr by json round-trip)."""
        return {
            "radius": self.radius, "radii": self.radii, "local_ratio": self.local_ratio,
            "predicted_local": self.predicted_local,
            "max_ratio_outside": self.max_ratio_outside,
            "max_ratio_inside": self.max_ratio_inside,
            "pair_min_radius": self.pair_min_radius, "pair_ratio": self.pair_ratio,
            "checks": [to_json(c) for c in self.checks], "inputs": self.inputs,
            "versions": self.versions, "wall_time": self.wall_time,
        }  # fmt: skip


def _unit_mean_zero(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    z = rng.standard_normal(shape)
    z -= z.mean(axis=-1, keepdims=True)
    return z / _row_norms(z)[..., None]


def measure_projection_expansion(
    d: int,
    sigma1: float,
    sigma2: float,
    seed: int = 0,
    *,
    radii: Sequence[float] = RADII,
    samples: int = 8,
    step: float = 1e-3,
    precision: str | Backend = "float64",
    projection: Projection | None = None,
) -> ProjectionExpansion:
    """Where P (eps = 0, scalar gain) is and is not non-expansive, measured.

    P(v) = sigma1 + R (v - mean v) / |v - mean v| with R = sigma2 sqrt(d): the nearest
    point of a sphere of radius R in the mean-zero subspace, so
    |P(x) - P(y)| <= R / min(r(x), r(y)) |x - y|, r(v) = |v - mean v|, and tangent pairs
    at radial distance r attain the exact ratio (R / r) 2 sin(atan(step) / 2) / step.
    Pairs: `samples` tangent and `samples` random-direction pairs y = x + step r z at each
    radial distance r = f R (f in `radii`), and samples * len(radii) independent random
    pairs with r log-uniform over the radii. Rows get random means. Domain: d >= 3,
    sigma2 > 0, radii and step > 0.
    """
    started = time.perf_counter()
    bk = backend(precision)
    d = positive_int("d", d)
    if d < 3:
        raise InvalidInputError(
            f"d must be >= 3 (with d = 2 the sphere in the mean-zero plane is two points and "
            f"has no tangent direction), got {d}"
        )
    samples = positive_int("samples", samples)
    factors = finite_array("radii", radii)
    if factors.ndim != 1 or not len(factors) or (factors <= 0).any():
        raise InvalidInputError(f"radii must be a non-empty list of positive numbers, got {radii}")
    step = float(finite_array("step", step, ()))
    if step <= 0:
        raise InvalidInputError(f"step must be > 0, got {step!r}")
    projection = projection or _default_projection(sigma1, sigma2)
    rng = np.random.default_rng(seed)
    big_r = sigma2 * math.sqrt(d)
    size = abs(sigma1) + big_r
    unit = bk.unit_roundoff

    # x = m + r w (w unit, mean zero); random pairs are built in float64
    count = len(factors) * samples
    r = np.repeat(factors * big_r, samples)
    w = _unit_mean_zero(rng, (count, d))
    t = _unit_mean_zero(rng, (count, d))
    z = _unit_mean_zero(rng, (count, d)) + rng.standard_normal((count, 1)) / math.sqrt(d)
    z /= _row_norms(z)[:, None]
    x_local = sigma1 + rng.standard_normal((count, 1)) + r[:, None] * w
    random_y = x_local + step * r[:, None] * z
    log_r = rng.uniform(np.log(factors.min()), np.log(factors.max()), (2, count))
    x_far = sigma1 + rng.standard_normal((count, 1)) + np.exp(log_r[0])[:, None] * big_r * w
    y_far = sigma1 + rng.standard_normal((count, 1)) + np.exp(log_r[1])[:, None] * big_r * t

    with bk.active():
        # tangent pairs in the backend, so that they are tangent to its precision: t made
        # mean-zero and orthogonal to x - mean x there, y = x + step r t
        x = bk.asarray(x_local, "x")
        centred = x - bk.sum(x, -1) / d
        radial = bk.sqrt(bk.sum(centred * centred, -1))
        direction = bk.asarray(t)
        direction -= bk.sum(direction, -1) / d
        direction -= bk.sum(direction * centred, -1) / (radial * radial) * centred
        direction /= bk.sqrt(bk.sum(direction * direction, -1))
        tangent_y = x + bk.asarray(step) * radial * direction
        # exact ratio of a tangent pair: (R / r) chord / a with a = |y - x| / r and
        # chord / a = 2 sin(atan(a) / 2) / a = sqrt(2 / ((s + 1) s)), s = sqrt(1 + a^2)
        a = bk.sqrt(bk.sum((tangent_y - x) * (tangent_y - x), -1)) / radial
        s = bk.sqrt(a * a + 1)
        exact = (
            bk.asarray(sigma2)
            * bk.sqrt(bk.asarray(d))
            / radial
            * bk.sqrt(bk.asarray(2.0) / ((s + 1) * s))
        )
        a = np.concatenate([x, x, bk.asarray(x_far, "x")])
        b = np.concatenate([tangent_y, bk.asarray(random_y, "y"), bk.asarray(y_far, "y")])
        image = projection(bk, a) - projection(bk, b)
        gap = a - b
        ratios = bk.sqrt(bk.sum(image * image, -1)) / bk.sqrt(bk.sum(gap * gap, -1))
        attained = bk.to_float64(abs(ratios[:count] - exact) / exact)[..., 0]
        ratio, exact = bk.to_float64(ratios)[..., 0], bk.to_float64(exact)[..., 0]
        a64, b64 = bk.to_float64(a), bk.to_float64(b)
    radial_a = _row_norms(a64 - a64.mean(-1, keepdims=True))
    radial_b = _row_norms(b64 - b64.mean(-1, keepdims=True))
    nearest = np.minimum(radial_a, radial_b)
    bound = big_r / nearest
    distance = _row_norms(a64 - b64)

    def rounding(v: np.ndarray, radial: np.ndarray) -> np.ndarray:
        kappa = np.max(np.abs(v), -1) / (radial / math.sqrt(d))
        return P_ALLOWANCE * (2 + kappa + math.log2(d)) * unit * size * math.sqrt(d)

    slack = (rounding(a64, radial_a) + rounding(b64, radial_b)) / distance
    slack += 2 * (d + 2) * unit * ratio
    tangent = slice(0, count)
    inside = nearest < big_r
    configuration = {
        "precision": repr(bk), "d": d, "sigma1": sigma1, "sigma2": sigma2, "seed": seed,
        "step": step, "samples": samples, "radii": factors.tolist(),
    }  # fmt: skip
    loose = np.maximum(1.0, bound)
    checks = [
        ClaimCheck(
            "|P(x) - P(y)| <= max(1, R / min radial distance) |x - y|",
            configuration,
            float(np.max((ratio - loose) / loose)),
            float(np.max(slack / loose)),
            "max over pairs of (ratio - bound) / bound: non-expansive outside the ball of "
            "radius R, at most R / r inside",
        ),
        ClaimCheck(
            "|P(x) - P(y)| <= R / min(r(x), r(y)) |x - y|",
            configuration,
            float(np.max((ratio - bound) / bound)),
            float(np.max(slack / bound)),
            "max over pairs of (ratio - bound) / bound (the radial retraction onto the ball of "
            "radius r is non-expansive)",
        ),
        ClaimCheck(
            "tangent pairs attain the local Lipschitz constant R / r",
            configuration,
            float(np.max(attained)),
            float(np.max(slack[tangent] / exact)),
            "max |ratio - (R/r) 2 sin(atan(a)/2)/a| / that over tangent pairs, a = |x - y| / r",
        ),
    ]
    local = ratio[tangent].reshape(len(factors), samples).max(axis=1)
    far = slice(2 * count, 3 * count)
    return ProjectionExpansion(
        radius=big_r,
        radii=factors.tolist(),
        local_ratio=local.tolist(),
        predicted_local=(1 / factors).tolist(),
        max_ratio_outside=float(np.max(ratio[~inside], initial=0.0)),
        max_ratio_inside=float(np.max(ratio[inside], initial=0.0)),
        pair_min_radius=nearest[far].tolist(),
        pair_ratio=ratio[far].tolist(),
        checks=checks,
        inputs=configuration,
        wall_time=time.perf_counter() - started,
    )
