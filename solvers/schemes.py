"""Layer schemes of MODEL.md section 2: one Lie splitting step of size dt per call.

A layer is two sub-steps, attention then feed-forward, each an explicit Euler step of its
operator with the layer norm placed according to `norm`:

    post (PyTorch norm_first=False, the paper's scheme):  U <- P_k(U + dt G(U))
    pre  (PyTorch norm_first=True, ViT):                  U <- U + dt G(P_k(U))
    none:                                                 U <- U + dt G(U)

with (G, P_k) = (A, norm1) and then (F, norm2). At dt = 1 each is one standard encoder
layer. `paper_six_substeps` is the paper's own writing of the post-LN layer.
"""

from __future__ import annotations

import numpy as np

from solvers.backends import Array, Backend
from solvers.errors import InvalidInputError
from solvers.operators import attention, feed_forward, layer_norm
from solvers.weights import BackendLayer

LAYER_NORMS = ("post", "pre", "none")


def lie_step(
    bk: Backend,
    u: Array,
    layer: BackendLayer,
    dt: Array,
    norm: str,
    score_bias: Array | None = None,
) -> Array:
    """One Lie step of size dt of the layer's flow (the formulas in the module docstring)."""
    sub_steps = (
        (lambda v: attention(bk, v, layer, score_bias), layer.norm1),
        (lambda v: feed_forward(bk, v, layer), layer.norm2),
    )
    for operator, (gain, bias) in sub_steps:
        if norm not in LAYER_NORMS:
            raise InvalidInputError(
                f"unknown norm {norm!r}; allowed: {', '.join(repr(n) for n in LAYER_NORMS)}"
            )
        increment = operator(layer_norm(bk, u, gain, bias, layer.eps) if norm == "pre" else u)
        increment *= dt
        increment += u
        u = layer_norm(bk, increment, gain, bias, layer.eps) if norm == "post" else increment
    return u


def paper_six_substeps(
    bk: Backend, u: Array, layer: BackendLayer, score_bias: Array | None = None
) -> Array:
    """The paper's six sub-steps for one post-LN layer (square FFN, m = d):

        u1 = u + A(u); u2 = P1(u1); u3 = relu(u2 + u2 W1' + b1);
        u4 = u3 + u3 W2' + b2; u5 = (u4 + u2) / 2; u6 = P2(u5),

    with W1' = W1 - I and W2' = W2 - I. In exact arithmetic this is the post-LN Lie step
    with dt = 1 when the norms are projections (P(cV) = P(V) for c > 0 absorbs the 1/2);
    with eps > 0 the halving changes the result.
    """
    d = layer.w1.shape[0]
    if layer.w1.shape != (d, d):
        raise InvalidInputError(
            f"the six sub-step form needs a square FFN (d_ff = d = {d}), "
            f"got w1 of shape {layer.w1.shape}"
        )
    identity = bk.asarray(np.eye(d))
    w1_shifted, w2_shifted = layer.w1 - identity, layer.w2 - identity
    u1 = u + attention(bk, u, layer, score_bias)
    u2 = layer_norm(bk, u1, *layer.norm1, layer.eps)
    u3 = bk.relu_(u2 + bk.matmul(u2, w1_shifted) + layer.b1)
    u4 = u3 + bk.matmul(u3, w2_shifted) + layer.b2
    u5 = (u4 + u2) / 2
    return layer_norm(bk, u5, *layer.norm2, layer.eps)
