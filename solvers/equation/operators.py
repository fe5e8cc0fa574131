"""The discrete operators of docs/model.md sections 1 and 7, written once against a backend
(the norms: solvers.equation.norms).

States are arrays of shape (..., N, d): N tokens (rows) of d features, with any number of
leading batch axes. Weights act on the right.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from solvers.backends import Array, Backend
from solvers.equation.packed import BackendLayer
from solvers.equation.rotary import rotate
from solvers.errors import InvalidInputError


def _split_heads(x: Array, heads: int) -> Array:
    """(..., N, H * w) -> (..., H, N, w)."""
    return np.swapaxes(x.reshape(*x.shape[:-1], heads, -1), -2, -3)


TokenMap = Callable[[Array], Array]
"""A linear map in the token variable: takes (..., N, w) to (..., N', w), acting on axis -2."""


RowWeights = Callable[[Backend, Array], Array]
"""Maps a head's scores (..., H, N, M) to its mixing weights (the row softmax by default)."""


@dataclass(frozen=True, eq=False)
class TokenLayout:
    """How the tokens see one another beyond their states, in the attention operators:

    - `score_bias` B, added to every head's scores (shape (N, M), or (M,) for a per-key
      bias): log w^x for token quadrature weights (zero on the uniform grid), -inf above
      the diagonal for a causal mask and at masked keys;
    - `token_maps` (C_q, C_k, C_v), linear maps in the token variable acting before the
      biases: Q_h = C_q (U Wq_h) + bq_h, K_h = C_k (U Wk_h) + bk_h, V_h = C_v (U Wv_h) +
      bv_h (C commutes with the feature maps, so this is the map of C U): the CvT's
      convolutional projections (solvers.space.cvt; C_k and C_v onto a coarser key grid of
      M tokens, C_q onto N' query points), or a selection of rows; B then has shape
      (N', M);
    - `rotary`, the (cos, sin) tables of the tokens' positions (solvers.equation.rotary),
      which a layer with rotary positions needs and no other layer takes.

    `PLAIN` has none of them."""

    score_bias: Array | None = None
    token_maps: tuple[TokenMap, TokenMap, TokenMap] | None = None
    rotary: tuple[Array, Array] | None = None


PLAIN = TokenLayout()


def attention(bk: Backend, u: Array, layer: BackendLayer, tokens: TokenLayout = PLAIN) -> Array:
    """Multi-head attention A(U) = sum_h softmax_rows(S_h + B) V_h Wo_h + bo.

    Q_h = U Wq_h + bq_h, K_h = U Wk_h + bk_h, V_h = U Wv_h + bv_h and S_h = s Q_h K_h^T
    with s = layer.scale; B, maps in the token variable and rotary positions as `tokens`
    gives them (TokenLayout). Summing the heads' outputs V_h Wo_h equals concatenating
    them and applying the stacked Wo.

    With H_kv < H key-value heads, query head h uses key and value head floor(h H_kv / H)
    (grouped-query attention, docs/model.md section 7). A layer with rotary positions needs
    the tables: Q_h and K_h are rotated, row x by R(x), before the scores. Defined for
    every finite U; a row of B that is -inf everywhere is not allowed.
    """
    return combine_heads(bk, attention_heads(bk, u, layer, tokens)[2], layer)


def attention_heads(
    bk: Backend,
    u: Array,
    layer: BackendLayer,
    tokens: TokenLayout = PLAIN,
    row_weights: RowWeights | None = None,
) -> tuple[Array, Array, Array]:
    """Per query head h: (P_h, V_h, O_h) with P_h = softmax_rows(s Q_h K_h^T + B),
    O_h = P_h V_h, of shapes (..., H, N, M), (..., H, M, d_v), (..., H, N, d_v): the pieces
    `attention` sums, for the checks that look inside a head. `row_weights` replaces the row
    softmax. A layer with rotary positions without `rotary` tables is refused.
    """
    scores, values = attention_scores(bk, u, layer, tokens)
    weights = bk.softmax_(scores) if row_weights is None else row_weights(bk, scores)
    return weights, values, bk.matmul(weights, values)


def attention_scores(
    bk: Backend, u: Array, layer: BackendLayer, tokens: TokenLayout = PLAIN
) -> tuple[Array, Array]:
    """Per query head h: (S_h + B, V_h), the scores s Q_h K_h^T + B that the row softmax
    turns into weights (..., H, N, M) and the values (..., H, M, d_v), as `attention`
    defines them (grouped key-value heads repeated, rotary positions applied)."""
    score_bias, token_maps, rotary = tokens.score_bias, tokens.token_maps, tokens.rotary
    if (layer.rope is None) != (rotary is None):
        raise InvalidInputError(
            "rotary tables are needed exactly for a layer with rotary positions (docs/model.md "
            f"section 7); the layer has {'none' if layer.rope is None else 'them'}"
        )
    heads, kv_heads, d_k = layer.heads, layer.kv_heads, layer.d_k
    q_width, k_width = heads * d_k, kv_heads * d_k
    blocks = (slice(0, q_width), slice(q_width, q_width + k_width), slice(q_width + k_width, None))
    if token_maps is None:
        qkv = bk.affine(u, layer.w_qkv, layer.b_qkv)
        q, k, v = (qkv[..., block] for block in blocks)
    else:
        qkv = bk.matmul(u, layer.w_qkv)
        q, k, v = (
            mapped(qkv[..., block]) + layer.b_qkv[block]
            for mapped, block in zip(token_maps, blocks, strict=True)
        )
    queries, keys = _split_heads(q, heads), _split_heads(k, kv_heads)
    values = _split_heads(v, kv_heads)
    if rotary is not None:
        queries, keys = rotate(queries, rotary), rotate(keys, rotary)
    queries *= layer.scale  # s Q_h K_h^T = (s Q_h) K_h^T, on N x d_k numbers
    if kv_heads != heads:  # query head h reads key-value head h // (H / H_kv)
        keys, values = (np.repeat(x, heads // kv_heads, axis=-3) for x in (keys, values))
    scores = bk.matmul(queries, np.swapaxes(keys, -1, -2))
    if score_bias is not None:
        scores += score_bias
    return scores, values


def combine_heads(bk: Backend, outputs: Array, layer: BackendLayer) -> Array:
    """sum_h O_h Wo_h + bo for head outputs O (..., H, N, d_v): the heads side by side
    times the stacked Wo."""
    joined = np.swapaxes(outputs, -2, -3)
    joined = joined.reshape(*joined.shape[:-2], layer.heads * layer.d_v)
    return bk.affine(joined, layer.w_o, layer.b_o)


def feed_forward(bk: Backend, u: Array, layer: BackendLayer, pattern: Array | None = None) -> Array:
    """F(U) = sigma(U W1 + b1) W2 + b2 with sigma = relu, the projection onto {z >= 0}, or
    (layer.activation "gelu") GELU(z) = z Phi(z), ("gelu-tanh") its tanh form, or ("silu")
    z / (1 + exp(-z)), all three smooth (`activate`). Defined for all U.

    A gated FFN (layer.w_gate given; docs/model.md section 7) is
    F(U) = (sigma(U W_gate + b_gate) * (U W1 + b1)) W2 + b2, the product entrywise: W1 is
    the up map, W2 the down map; sigma = silu is SwiGLU, gelu GeGLU.

    With `pattern` (0/1 entries of the shape of the activation's input) relu is replaced
    by the product with that fixed activation pattern: the analytic continuation of F from
    the region where exactly those pre-activations are positive, which event location
    integrates. The smooth activations have no kinks, so a pattern is ignored.
    """
    if layer.activation == "relu" and pattern is not None:
        hidden = hidden_preactivations(bk, u, layer) * pattern
    elif layer.w_gate is None:
        hidden = activate(bk, layer.activation, u, layer.w1, layer.b1)
    else:
        hidden = activate(bk, layer.activation, u, layer.w_gate, layer.b_gate)
    if layer.w_gate is not None:
        hidden = hidden * bk.affine(u, layer.w1, layer.b1)
    return bk.affine(hidden, layer.w2, layer.b2)


def activate(bk: Backend, activation: str, u: Array, w: Array, bias: Array) -> Array:
    """sigma(u W + b) for the FFN's activation (solvers.equation.weights.ACTIVATIONS), the bias
    b along the last axis: relu (max(z, 0), the bias added and the maximum taken in one pass
    written into z = u W), gelu (x Phi(x)), gelu-tanh (GELU's tanh form) or silu
    (x / (1 + exp(-x))) at x = u W + b."""
    if activation == "relu":
        return bk.bias_relu_(bk.matmul(u, w), bias)
    smooth = {"gelu": bk.gelu, "gelu-tanh": bk.gelu_tanh, "silu": bk.silu}
    return smooth[activation](bk.affine(u, w, bias))


def hidden_preactivations(bk: Backend, u: Array, layer: BackendLayer) -> Array:
    """Z = U W1 + b1 (U W_gate + b_gate for a gated FFN), whose signs are the FFN's
    activation pattern."""
    if layer.w_gate is None:
        return bk.affine(u, layer.w1, layer.b1)
    return bk.affine(u, layer.w_gate, layer.b_gate)
