"""The standard Transformer encoder written as Vaswani et al. and PyTorch write it.

An independent formulation for the exactness claim, in float64: each head is computed
separately, the heads are concatenated and multiplied by the stacked output matrix,
softmax is scipy's, and layer norm uses numpy's mean and population variance. Nothing
here is shared with solvers.operators.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import softmax

from solvers.weights import LayerWeights


def _layer_norm(x: np.ndarray, norm: tuple[np.ndarray, np.ndarray], eps: float) -> np.ndarray:
    gain, bias = norm
    mean = x.mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=-1, keepdims=True) + eps) * gain + bias


def _multi_head(x: np.ndarray, w: LayerWeights, mask: np.ndarray) -> np.ndarray:
    heads = []
    for h in range(w.heads):
        q, k, v = x @ w.wq[h] + w.bq[h], x @ w.wk[h] + w.bk[h], x @ w.wv[h] + w.bv[h]
        heads.append(softmax(w.scale * q @ np.swapaxes(k, -1, -2) + mask, axis=-1) @ v)
    return np.concatenate(heads, axis=-1) @ np.concatenate(list(w.wo), axis=0) + w.bo


def standard_encoder(
    layers: Sequence[LayerWeights], u0: np.ndarray, norm: str, causal: bool
) -> np.ndarray:
    """Output of the encoder stack on u0 ((N, d) or (B, N, d)), post-LN or pre-LN.

    post: x <- LN1(x + MHA(x)); x <- LN2(x + FFN(x))
    pre:  x <- x + MHA(LN1(x)); x <- x + FFN(LN2(x))
    none: x <- x + MHA(x);      x <- x + FFN(x)
    """
    x = np.asarray(u0, dtype=np.float64)
    tokens = x.shape[-2]
    mask = (
        np.triu(np.full((tokens, tokens), -np.inf), k=1) if causal else np.zeros((tokens, tokens))
    )
    for w in layers:
        blocks = (
            (lambda y, w=w: _multi_head(y, w, mask), w.norm1),
            (lambda y, w=w: np.maximum(y @ w.w1 + w.b1, 0.0) @ w.w2 + w.b2, w.norm2),
        )
        for block, ln in blocks:
            if norm == "post":
                x = _layer_norm(x + block(x), ln, w.eps)
            elif norm == "pre":
                x = x + block(_layer_norm(x, ln, w.eps))
            else:
                x = x + block(x)
    return x
