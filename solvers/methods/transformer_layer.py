"""One Transformer layer from the flow's pieces: a single Lie step of one layer's flow (at
dt = 1 the standard encoder layer), and the paper's six sub-steps of a post-LN layer
(docs/model.md section 2)."""

from __future__ import annotations

import numpy as np

from solvers.backends import Array, Backend
from solvers.equation.controls import PiecewiseControls
from solvers.equation.flow import LayerFlow
from solvers.equation.norms import Placement, layer_norm
from solvers.equation.operators import TokenLayout, attention
from solvers.equation.packed import BackendLayer
from solvers.equation.weights import LayerWeights
from solvers.errors import InvalidInputError
from solvers.methods.splitting import LIE


def lie_step(
    bk: Backend,
    u: Array,
    layer: LayerWeights,
    dt: Array,
    norm: Placement | str,
    score_bias: Array | None = None,
) -> Array:
    """One Lie step of size dt of a single layer's flow: the Transformer layer at dt = 1."""
    flow = LayerFlow(bk, PiecewiseControls([layer]), norm, score_bias=score_bias)
    return LIE.step(flow, 0, bk.asarray(0), u, dt)


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
    if layer.decoder_parts:
        raise InvalidInputError(
            f"the six sub-step form is not implemented for {', '.join(layer.decoder_parts)}"
        )
    d = layer.w1.shape[0]
    if layer.w1.shape != (d, d):
        raise InvalidInputError(
            f"the six sub-step form needs a square FFN (d_ff = d = {d}), "
            f"got w1 of shape {layer.w1.shape}"
        )
    identity = bk.asarray(np.eye(d))
    w1_shifted, w2_shifted = layer.w1 - identity, layer.w2 - identity
    u1 = u + attention(bk, u, layer, TokenLayout(score_bias))
    u2 = layer_norm(bk, u1, *layer.norm1, layer.eps)
    u3 = bk.relu_(u2 + bk.matmul(u2, w1_shifted) + layer.b1)
    u4 = u3 + bk.matmul(u3, w2_shifted) + layer.b2
    u5 = (u4 + u2) / 2
    return layer_norm(bk, u5, *layer.norm2, layer.eps)
