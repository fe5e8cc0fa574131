"""Attention rows are probability vectors and each head's output lies in the convex hull of
the value rows it sees, as claim checks: signs, row sums, coordinate bounds and an exact
certificate O_i = P_i V / sum_j P_ij, with tolerances from docs/rounding.md section 2."""

from __future__ import annotations

import math

import numpy as np

from properties.check_inputs import checked_layer, checked_state, one_layer_problem
from properties.claim_check import ClaimCheck, largest_magnitude, require_finite
from properties.conditioning.rounding_bounds import attention_rounding_bound
from solvers import LayerWeights, backend
from solvers.backends import Array, Backend, convert
from solvers.equation.operators import (
    RowWeights,
    TokenLayout,
    attention,
    attention_heads,
    combine_heads,
)
from solvers.results.allowances import rounding_gamma

CERTIFICATE_DIGITS = 20
"""The hull certificate is evaluated in mpmath with this many digits more than the
backend (40 at least), exactly enough for the stored numbers of every backend."""


def check_attention_weights(
    layer: LayerWeights,
    u: np.ndarray,
    *,
    precision: str | Backend = "float64",
    causal: bool = False,
    token_weights: np.ndarray | None = None,
    row_weights: RowWeights | None = None,
) -> list[ClaimCheck]:
    """Attention rows are probability vectors and each head's output lies in its values' hull.

    With P_h = softmax_rows(s Q_h K_h^T + B), V_h = U Wv_h + bv_h, O_h = P_h V_h
    (`attention_heads`; domain: every finite U of shape (N, d) or (B, N, d)), the claims:
    P_h >= 0 (tolerance 0); every row of P_h sums to 1 (gamma_2N); sum_h O_h Wo_h + bo =
    A(U) (the heads are the operator's; twice A's bound); min_j V_jc <= O_ic <= max_j V_jc
    over the keys j row i sees (gamma_3N max_j |V_jc|); and the certificate: O_i lies
    within |O_i - P_i V / sum_j P_ij| of conv{V_j}, evaluated exactly enough (mpmath with
    CERTIFICATE_DIGITS more digits; gamma_2N max |V|). `row_weights` replaces the softmax
    (negative control).
    """
    layer = checked_layer(layer)
    bk = backend(precision)
    u = checked_state("u", u, layer.d_model)
    tokens = u.shape[-2]
    problem = one_layer_problem(u, layer, causal=causal, token_weights=token_weights)
    bias = problem.score_bias(backend("float64"))
    unit = bk.unit_roundoff
    configuration = {
        "precision": repr(bk),
        "shape": list(u.shape),
        "heads": layer.heads,
        "d_k": layer.d_k,
        "d_v": layer.d_v,
        "causal": bool(causal),
        "token_weights": token_weights is not None,
        "row_weights": "softmax"
        if row_weights is None
        else getattr(row_weights, "__name__", "custom"),
    }
    with bk.active(), np.errstate(over="ignore", invalid="ignore"):  # reported as breakdown
        w = layer.on(bk)
        x = bk.asarray(u, "u")
        b = problem.score_bias(bk)
        weights, values, outputs = attention_heads(bk, x, w, TokenLayout(b), row_weights)
        row_sums = bk.sum(weights, -1)
        operator = attention(bk, x, w, TokenLayout(b))
        for value in (weights, outputs, operator):
            require_finite(bk, value, "attention")
        difference = largest_magnitude(bk, combine_heads(bk, outputs, w) - operator)
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
    scale = max(largest_magnitude(bk, operator), np.finfo(float).tiny)
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


def _hull_certificate(bk: Backend, weights: Array, values: Array, outputs: Array) -> np.ndarray:
    """max-abs of O_i - P_i V / sum_j P_ij per (..., head, row), in high-precision mpmath."""
    digits = math.ceil(-math.log10(bk.unit_roundoff))  # the digits bk carries
    reference = backend("mpmath", max(40, digits + CERTIFICATE_DIGITS))
    with reference.active():
        p, v, o = (convert(x, bk, reference) for x in (weights, values, outputs))
        residual = o - reference.matmul(p, v) / reference.sum(p, -1)
        return np.max(np.abs(reference.to_float64(residual)), axis=-1)
