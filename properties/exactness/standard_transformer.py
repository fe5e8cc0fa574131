"""The standard Transformer encoder written as Vaswani et al. and PyTorch write it.

An independent formulation for the exactness claim: each head is computed on its own
from the unpacked per-head weights, the heads are concatenated and multiplied by the
stacked output matrix, and each sub-layer is the residual block of the paper "Attention
is all you need" (post-LN) or of pre-LN models. It shares no code
with solvers.equation.operators or solvers.methods; only the number system's primitives (products,
softmax, square roots) come from the backend, so it runs at any precision.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from solvers import backend
from solvers.backends import Array, Backend
from solvers.equation.norms import Placement, as_placement
from solvers.equation.weights import LayerWeights


def _layer_norm(bk: Backend, x: Array, norm: tuple, eps: Array) -> Array:
    gain, bias = norm
    mean, variance = bk.moments(x)
    return (x - mean) / bk.sqrt(variance + eps) * gain + bias


def _multi_head(bk: Backend, x: Array, w: dict, heads: int, mask: Array) -> Array:
    outputs = []
    for h in range(heads):
        q = bk.matmul(x, w["wq"][h]) + w["bq"][h]
        k = bk.matmul(x, w["wk"][h]) + w["bk"][h]
        v = bk.matmul(x, w["wv"][h]) + w["bv"][h]
        scores = bk.matmul(q, np.swapaxes(k, -1, -2)) * w["scale"] + mask
        outputs.append(bk.matmul(bk.softmax_(scores), v))
    return bk.matmul(np.concatenate(outputs, axis=-1), w["wo"]) + w["bo"]


def _weights(bk: Backend, layer: LayerWeights) -> dict:
    names = ("wq", "bq", "wk", "bk", "wv", "bv", "bo", "w1", "b1", "w2", "b2", "eps")
    w = {name: bk.asarray(getattr(layer, name)) for name in names}
    w["scale"] = layer.scale_in(bk)
    w["wo"] = bk.asarray(np.concatenate(list(layer.wo), axis=0))
    w["norm1"] = tuple(bk.asarray(x) for x in layer.norm1)
    w["norm2"] = tuple(bk.asarray(x) for x in layer.norm2)
    return w


def standard_encoder(
    layers: Sequence[LayerWeights],
    u0: np.ndarray,
    norm: str,
    causal: bool,
    precision: str | Backend = "float64",
) -> Array:
    """Output of the encoder stack on u0 ((N, d) or (B, N, d)) in the given number system.

    Ball arithmetic runs through `certify`, as `solve` does, so radii stay at the target.

    post: x <- LN1(x + MHA(x)); x <- LN2(x + FFN(x))
    pre:  x <- x + MHA(LN1(x)); x <- x + FFN(LN2(x))
    none: x <- x + MHA(x);      x <- x + FFN(x)

    FFN(y) = act(y W1 + b1) W2 + b2 with the layer's activation. The decoder parts of
    docs/model.md section 7 (RMSNorm, gates, rotary positions, shared key-value heads) are
    not in this textbook form and are refused.
    """
    for n, layer in enumerate(layers):
        layer.refuse_decoder_parts(f"layer {n}: the textbook encoder")
    bk = backend(precision)
    norm = as_placement(norm)
    return bk.certify(lambda working: _encode(working, layers, u0, norm, causal))


def _encode(
    bk: Backend, layers: Sequence[LayerWeights], u0: np.ndarray, norm: Placement, causal: bool
) -> Array:
    x = bk.asarray(u0)
    tokens = x.shape[-2]
    mask = np.triu(np.full((tokens, tokens), -np.inf), k=1) if causal else np.zeros((tokens,) * 2)
    mask = bk.asarray(mask)
    for layer in layers:
        w = _weights(bk, layer)
        act = {"relu": bk.relu_, "gelu": bk.gelu, "gelu-tanh": bk.gelu_tanh, "silu": bk.silu}[
            layer.activation
        ]
        blocks = (
            (lambda y, w=w, h=layer.heads: _multi_head(bk, y, w, h, mask), w["norm1"]),
            (
                lambda y, w=w, act=act: (
                    bk.matmul(act(bk.matmul(y, w["w1"]) + w["b1"]), w["w2"]) + w["b2"]
                ),
                w["norm2"],
            ),
        )
        for block, ln in blocks:
            if norm.constrained:
                x = _layer_norm(bk, x + block(x), ln, w["eps"])
            elif norm.normalises_inputs:
                x = x + block(_layer_norm(bk, x, ln, w["eps"]))
            else:
                x = x + block(x)
    return x
