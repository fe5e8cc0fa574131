"""The rounding-error model: first-order bounds on how far an operator, one Lie layer or a
whole solve computed at unit roundoff u can lie from exact arithmetic, evaluated in float64
from the data (docs/rounding.md sections 1 to 4). The checks derive their tolerances from
these; every bound is a worst case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from solvers import LayerWeights, Problem, backend
from solvers.backends import Array
from solvers.equation.flow import LayerFlow
from solvers.equation.jacobian import jacobian, relative_step
from solvers.equation.norms import Placement, as_placement, layer_norm
from solvers.equation.operators import TokenLayout, attention, feed_forward
from solvers.integrators.tableaux import stage_growth
from solvers.methods.driver import integrate
from solvers.methods.stepping import Step
from solvers.methods.unsplit import Unsplit
from solvers.results.allowances import projection_allowance, rounding_gamma

JACOBIAN_STEP = 1e-6
"""Relative central-difference step for the float64 Jacobians along a solve (truncation
~1e-12, rounding ~1e-10 relative)."""


def row_norms(x: np.ndarray) -> np.ndarray:
    """The 2-norm of every row (last axis)."""
    return np.sqrt(np.sum(x * x, axis=-1))


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
    layer.refuse_decoder_parts("the rounding bounds (docs/rounding.md)")

    def head_map(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.einsum("...nd,hde->...hne", x, w) + b[:, None, :]

    maps = ((layer.wq, layer.bq), (layer.wk, layer.bk), (layer.wv, layer.bv))
    q, k, v = (head_map(u, w, b) for w, b in maps)
    magnitude = np.abs(u)
    mq, mk, mv = (head_map(magnitude, np.abs(w), np.abs(b)) for w, b in maps)
    scores = layer.attention_scale * q @ np.swapaxes(k, -1, -2)
    score_magnitude = layer.attention_scale * mq @ np.swapaxes(mk, -1, -2)
    if bias is not None:
        scores = scores + bias
        score_magnitude = score_magnitude + np.where(np.isfinite(bias), np.abs(bias), 0.0)
    with np.errstate(invalid="ignore"):
        p = np.exp(scores - np.max(scores, axis=-1, keepdims=True))
    p /= np.sum(p, axis=-1, keepdims=True)
    return HeadMagnitudes(q, k, v, p, mq, mk, mv, score_magnitude)


def score_rounding(layer: LayerWeights, unit: float) -> float:
    """gamma_{d_k + 2d + 6}: the relative rounding of a scaled score s Q_i . K_j + B_ij (its
    product, the inputs' errors, the bias and the shift by the row maximum), relative to
    the score magnitude m_i (docs/rounding.md section 2)."""
    return rounding_gamma(layer.d_k + 2 * layer.d_model + 6, unit)


def attention_rounding_bound(
    u: np.ndarray, layer: LayerWeights, bias: np.ndarray | None, unit: float
) -> np.ndarray:
    """Elementwise bound on |A^(U) - A(U)| at unit roundoff `unit` (docs/rounding.md
    section 2): gamma_{H d_v+1} ((P Mv) |Wo| + |bo|) + ((gamma_N + rho + gamma_{d+1}) P Mv)
    |Wo| with rho_i = 2 gamma_{d_k+2d+6} m_i + gamma_{N+3}. Domain: finite U (..., N, d);
    B (N, N) with -inf for masked keys, or None.
    """
    heads = head_magnitudes(u, layer, bias)
    d, d_v, tokens = layer.d_model, layer.d_v, u.shape[-2]
    # m_i: the largest score magnitude over the keys row i sees (P > 0)
    m = np.max(np.where(heads.p > 0, heads.score_magnitude, 0.0), axis=-1)  # (..., H, N)
    rho = 2 * score_rounding(layer, unit) * m + rounding_gamma(tokens + 3, unit)
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


def attention_lipschitz_bound(u: np.ndarray, layer: LayerWeights, bias: np.ndarray | None) -> float:
    """Bound on the local Lipschitz constant of A at U in the largest row 2-norm:
    sum_h |Wo_h| (|Wv_h| + s max_i sum_j P_ij |V_j - Vbar_i| max_j (|Wq_h| |K_j| + |Q_i|
    |Wk_h|)) (docs/rounding.md section 4)."""
    layer.refuse_decoder_parts("the rounding bounds (docs/rounding.md)")
    heads = head_magnitudes(u, layer, bias)
    total = 0.0
    for h in range(layer.heads):
        nq, nk, nv, no = (np.linalg.norm(w[h], 2) for w in (layer.wq, layer.wk, layer.wv, layer.wo))
        p, v = heads.p[..., h, :, :], heads.v[..., h, :, :]
        mean_value = p @ v
        spread = np.sum(p * row_norms(v[..., None, :, :] - mean_value[..., :, None, :]), -1)
        q_norm, k_norm = row_norms(heads.q[..., h, :, :]), row_norms(heads.k[..., h, :, :])
        largest_key = np.max(k_norm, -1, keepdims=True)
        score_change = layer.attention_scale * (nq * largest_key + q_norm * nk)
        total += no * (nv + float(np.max(spread * score_change)))
    return total


def feed_forward_rounding_bound(u: np.ndarray, layer: LayerWeights, unit: float) -> np.ndarray:
    """Elementwise bound on |F^(U) - F(U)|: (gamma_{m+1} + gamma_{d+1}) (Mh |W2| + |b2|),
    Mh = |U| |W1| + |b1| (docs/rounding.md section 3)."""
    layer.refuse_decoder_parts("the rounding bounds (docs/rounding.md)")
    hidden = np.abs(u) @ np.abs(layer.w1) + np.abs(layer.b1)
    constant = rounding_gamma(layer.d_ff + 1, unit) + rounding_gamma(layer.d_model + 1, unit)
    return constant * (hidden @ np.abs(layer.w2) + np.abs(layer.b2))


def projection_rounding(
    v: np.ndarray, spread: np.ndarray, size: float, unit: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per row of v: (the 2-norm rounding bound of a layer norm at v, the conditioning
    kappa = max|v| / spread). The bound is 8 (2 + kappa + log2 d) u per entry of the
    output size (docs/rounding.md section 3), times sqrt(d)."""
    d = v.shape[-1]
    kappa = np.max(np.abs(v), axis=-1) / spread
    return projection_allowance(unit, kappa, d) * size * math.sqrt(d), kappa


def norm_rounding(
    v: np.ndarray, gain: np.ndarray, bias: np.ndarray, eps: float, unit: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: (2-norm rounding bound of LN at v, its Lipschitz constant
    max|g| / sqrt(var v + eps), kappa); size max|b| + max|g| sqrt(d)."""
    spread = np.sqrt(np.var(v, axis=-1) + eps)
    size = float(np.max(np.abs(bias)) + np.max(np.abs(gain)) * math.sqrt(v.shape[-1]))
    rounding, kappa = projection_rounding(v, spread, size, unit)
    return rounding, float(np.max(np.abs(gain))) / spread, kappa


def lie_layer_rounding_bound(
    u: np.ndarray,
    layer: LayerWeights,
    norm: Placement | str,
    dt: float,
    bias: np.ndarray | None,
    unit: float,
) -> float:
    """Largest row 2-norm of the rounding error of one Lie layer: the local bounds carried
    through the sub-steps, each multiplying the error so far by its Lipschitz bound
    (docs/rounding.md section 4)."""
    layer.refuse_decoder_parts("the rounding bounds (docs/rounding.md)")
    norm = as_placement(norm)
    bk64 = backend("float64")
    w = layer.on(bk64)
    eps = layer.eps
    ffn_lipschitz = (
        dt * layer.activation_lipschitz * np.linalg.norm(layer.w1, 2) * np.linalg.norm(layer.w2, 2)
    )

    def ln(x: np.ndarray, which: tuple) -> np.ndarray:
        return layer_norm(bk64, x, *which, eps)

    # attention sub-step
    if norm.normalises_inputs:
        error_in, lipschitz, _ = norm_rounding(u, *layer.norm1, eps, unit)
        z = ln(u, layer.norm1)
        a = dt * attention(bk64, z, w, TokenLayout(bias))
        error = (
            dt * attention_lipschitz_bound(z, layer, bias) * np.max(error_in)
            + dt * row_norms(attention_rounding_bound(z, layer, bias, unit))
            + unit * (row_norms(a) + row_norms(u + a))
        )
        u1 = u + a
    else:
        a = dt * attention(bk64, u, w, TokenLayout(bias))
        u1 = u + a
        error = dt * row_norms(attention_rounding_bound(u, layer, bias, unit)) + unit * (
            row_norms(a) + row_norms(u1)
        )
        if norm.constrained:
            rounding, lipschitz, _ = norm_rounding(u1, *layer.norm1, eps, unit)
            error = lipschitz * error + rounding
            u1 = ln(u1, layer.norm1)
    # feed-forward sub-step
    if norm.normalises_inputs:
        rounding, lipschitz, _ = norm_rounding(u1, *layer.norm2, eps, unit)
        z = ln(u1, layer.norm2)
        f = dt * feed_forward(bk64, z, w)
        error = error + ffn_lipschitz * (lipschitz * error + rounding)
    else:
        z = u1
        f = dt * feed_forward(bk64, z, w)
        error = (1 + ffn_lipschitz) * error
    u2 = u1 + f
    error = error + dt * row_norms(feed_forward_rounding_bound(z, layer, unit))
    error = error + unit * (row_norms(f) + row_norms(u2))
    if norm.constrained:
        rounding, lipschitz, _ = norm_rounding(u2, *layer.norm2, eps, unit)
        error = lipschitz * error + rounding
    return float(np.max(error))


class ProjectionRecordingFlow(LayerFlow):
    """A LayerFlow whose projections (post-LN) record the largest conditioning kappa of a
    row they projected and the 2-norm rounding bound of the last projection, at unit
    roundoff `unit` (set it before solving)."""

    unit = 0.0
    conditioning = 0.0
    last_rounding = 0.0

    def project(self, n: int, t: Array, u: Array, which: int = 2) -> Array:
        if self.norm.constrained:
            layer = self.layer(n, t)
            gain, bias = layer.norm1 if which == 1 else layer.norm2
            rounding, _, kappa = norm_rounding(
                np.asarray(u), np.asarray(gain), np.asarray(bias), float(layer.eps), self.unit
            )
            self.conditioning = max(self.conditioning, float(np.max(kappa)))
            self.last_rounding = float(np.sqrt(np.sum(rounding**2)))
        return super().project(n, t, u, which)


def solve_rounding_bound(
    problem: Problem, method: Unsplit, steps: int, layer: LayerWeights, unit: float
) -> float:
    """2-norm bound on the rounding error of solve(problem, method, steps) over [0, 1]
    (one layer): sum_j |J_last ... J_(j+1)|_2 delta_j over the committed steps, delta_j
    the step's local bound and J the step maps' Jacobians, both measured along the float64
    solve (docs/rounding.md section 4)."""
    bk64 = backend("float64")
    flow = ProjectionRecordingFlow.from_problem(problem, bk64)
    flow.unit = unit
    bias = problem.score_bias(bk64)
    size = problem.u0.size
    tableau = method.tableau
    stages = len(tableau.b)
    weight = float(sum(abs(b) for b in tableau.b))
    ffn_lipschitz = (
        layer.activation_lipschitz * np.linalg.norm(layer.w1, 2) * np.linalg.norm(layer.w2, 2)
    )
    local, jacobians = [], []
    if method.enters_constraint_set and problem.norm.constrained:
        method.enter(flow, 0, problem.initial_state(bk64))  # records its rounding
        local.append(flow.last_rounding)
        jacobians.append(np.eye(size))

    def field(v: np.ndarray, t: Array) -> np.ndarray:
        g = flow.total(0, t, v)
        return method.field.restrict(flow, 0, t, v, g)

    def field_rounding(u: np.ndarray, g_norm: float) -> float:
        """The 2-norm rounding bound of the field evaluation at u (eps_G)."""
        if problem.norm.normalises_inputs:
            w1 = norm_rounding(u, *layer.norm1, layer.eps, unit)[0]
            w2 = norm_rounding(u, *layer.norm2, layer.eps, unit)[0]
            z1 = layer_norm(bk64, u, *layer.norm1, layer.eps)
            z2 = layer_norm(bk64, u, *layer.norm2, layer.eps)
            rows = u.shape[-2] * (u.size // (u.shape[-1] * u.shape[-2]))
            error = (
                math.sqrt(rows) * attention_lipschitz_bound(z1, layer, bias) * float(np.max(w1))
                + float(np.linalg.norm(attention_rounding_bound(z1, layer, bias, unit)))
                + float(np.linalg.norm(ffn_lipschitz * w2))
                + float(np.linalg.norm(feed_forward_rounding_bound(z2, layer, unit)))
            )
        else:
            error = float(np.linalg.norm(attention_rounding_bound(u, layer, bias, unit))) + float(
                np.linalg.norm(feed_forward_rounding_bound(u, layer, unit))
            )
        error += unit * g_norm
        if method.field.tangent and problem.norm.constrained:
            kappa = float(np.max(np.max(np.abs(u), -1) / np.std(u, axis=-1)))
            error += 3 * (u.shape[-1] + 2 + kappa) * unit * g_norm
        return error

    def record(step: Step) -> None:
        """delta_j of the committed step, and the Jacobian of its step map at `before`."""
        projected = flow.last_rounding if problem.norm.constrained else 0.0  # before replays
        u, t, h = step.before, step.t, float(step.h)
        g_norm = float(np.linalg.norm(field(u, t)))
        difference = relative_step(bk64, u, JACOBIAN_STEP)
        lam = float(np.linalg.norm(jacobian(bk64, lambda v: field(v, t), u, difference), 2))
        growth = stage_growth(tableau, h * lam)
        u_norm = float(np.linalg.norm(u))
        delta = (
            h * growth * field_rounding(u, g_norm)
            + h * lam * growth * stages * unit * u_norm
            + (stages + 2) * unit * (u_norm + h * weight * g_norm)
        )

        def replay(v: np.ndarray) -> np.ndarray:
            return method.step(flow, step.layer, t, v, step.h, step.pattern)

        jacobians.append(jacobian(bk64, replay, u, difference))
        local.append(delta + projected)

    with bk64.active():
        integrate(problem, method, steps, flow, on_step=record)
    # error committed before Jacobian j reaches the end through J_last ... J_(j+1)
    total, suffix = 0.0, np.eye(size)
    for delta, step_jacobian in zip(reversed(local), reversed(jacobians), strict=True):
        total += float(np.linalg.norm(suffix, 2)) * delta
        suffix = suffix @ step_jacobian
    return total
