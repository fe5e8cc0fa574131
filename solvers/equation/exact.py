"""The exact uniform-attention solution of the layer flow, at any precision.

Uniform attention (Wk = 0, or Wq = 0 and bq = 0: every score row is constant), zero
value and output biases, no norm, and an FFN that is off (W2 = 0, b2 = 0) or a ReLU FFN
in its linear region (u W1 + b1 > 0): every token sees the token mean ubar, so with
M = sum_h Wv_h Wo_h, K = W1 W2 and c = b1 W2 + b2, ubar' = ubar (M + K) + c and
(u_i - ubar)' = (u_i - ubar) K, solved by matrix exponentials layer by layer
(docs/model.md section 5).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from solvers.backends import Array, Backend
from solvers.equation.controls import PiecewiseControls
from solvers.equation.problem import Problem
from solvers.equation.weights import LayerWeights
from solvers.errors import InvalidInputError


def uniform_attention_solution(problem: Problem, bk: Backend) -> Array:
    """u(t_final) of a uniform-attention problem (see the module docstring), in bk."""
    if not isinstance(problem.controls, PiecewiseControls):
        raise InvalidInputError("the uniform-attention solution needs PiecewiseControls")
    if (
        problem.norm.has_norms
        or problem.causal
        or problem.token_weights is not None
        or problem.token_maps is not None
    ):
        raise InvalidInputError(
            "the uniform-attention solution needs norm='none', no causal mask, no token "
            "weights and no token maps"
        )
    for n, w in enumerate(problem.controls.layers):
        w.refuse_decoder_parts(f"the uniform-attention solution (layer {n})")
        # Wk = 0 makes every key the constant bk; Wq = bq = 0 makes every query 0
        uniform = not w.wk.any() or (not w.wq.any() and not w.bq.any())
        ffn_off = not w.w2.any() and not w.b2.any()
        if not uniform or w.bv.any() or w.bo.any() or not (ffn_off or w.activation == "relu"):
            raise InvalidInputError(
                f"layer {n} is not a uniform-attention layer: it needs Wk = 0 (or Wq = bq = 0), "
                "bv = bo = 0 and an FFN that is off (W2 = 0, b2 = 0) or a ReLU one"
            )
    with bk.active():
        u0 = bk.asarray(problem.u0)
        tokens, d = u0.shape[-2], u0.shape[-1]
        mean = bk.sum(u0, -2) / tokens  # keeps the token axis: (..., 1, d)
        deviation = u0 - mean
        t_final = Fraction(problem.t_final)
        for n in range(math.ceil(t_final)):
            w = problem.controls.layers[n]
            _check_linear_region(bk, deviation + mean, w, n, "start")
            length = bk.asarray(min(t_final, n + 1) - n)
            generator = bk.matmul(bk.asarray(w.wv), bk.asarray(w.wo))  # (H, d, d)
            total = generator[0]
            for h in range(1, w.heads):
                total = total + generator[h]
            w1, w2 = bk.asarray(w.w1), bk.asarray(w.w2)
            k = bk.matmul(w1, w2)
            c = bk.matmul(bk.asarray(w.b1)[None], w2) + bk.asarray(w.b2)[None]  # (1, d)
            # [ubar, 1]' = [ubar, 1] [[M + K, 0], [c, 0]]: the affine mean flow as a linear one
            augmented = np.block(
                [[total + k, bk.asarray(np.zeros((d, 1)))], [c, bk.asarray(np.zeros((1, 1)))]]
            )
            ones = bk.asarray(np.ones((*mean.shape[:-1], 1)))
            moved = bk.matmul(np.concatenate([mean, ones], axis=-1), bk.expm(augmented * length))
            mean = moved[..., :d]
            deviation = bk.matmul(deviation, bk.expm(k * length))
            _check_linear_region(bk, deviation + mean, w, n, "end")
        return deviation + mean


def _check_linear_region(bk: Backend, u: Array, w: LayerWeights, n: int, where: str) -> None:
    """A ReLU FFN's pre-activations u W1 + b1 must be positive (certainly, in balls) at both
    ends of its layer; in between the caller must keep them so (a large b1 does)."""
    if not w.w2.any() and not w.b2.any():
        return
    z = bk.matmul(u, bk.asarray(w.w1)) + bk.asarray(w.b1)
    if not bk.certainly_positive(z).all():
        raise InvalidInputError(
            f"layer {n}: a ReLU pre-activation is not positive at the layer's {where}; the "
            "exact solution needs the FFN in its linear region"
        )
