"""The exact uniform-attention solution of the layer flow, at any precision.

Uniform attention (Wk = 0, or Wq = 0 and bq = 0: every score row is constant), zero
value and output biases, FFN off (W2 = 0, b2 = 0), no norm: every token sees the token
mean ubar, so ubar' = ubar M with M = sum_h Wv_h Wo_h, ubar(t) = ubar(0) expm(t M) layer
by layer, and u_i - ubar is constant in time (docs/model.md section 5).
"""

from __future__ import annotations

import math
from fractions import Fraction

from solvers.backends import Array, Backend
from solvers.controls import PiecewiseControls
from solvers.errors import InvalidInputError
from solvers.problem import Problem


def uniform_attention_solution(problem: Problem, bk: Backend) -> Array:
    """u(t_final) of a uniform-attention problem (see the module docstring), in bk."""
    if not isinstance(problem.controls, PiecewiseControls):
        raise InvalidInputError("the uniform-attention solution needs PiecewiseControls")
    if (
        problem.norm != "none"
        or problem.causal
        or problem.token_weights is not None
        or problem.token_maps is not None
    ):
        raise InvalidInputError(
            "the uniform-attention solution needs norm='none', no causal mask, no token "
            "weights and no token maps"
        )
    for n, w in enumerate(problem.controls.layers):
        # Wk = 0 makes every key the constant bk; Wq = bq = 0 makes every query 0
        uniform = not w.wk.any() or (not w.wq.any() and not w.bq.any())
        if not uniform or w.bv.any() or w.bo.any() or w.w2.any() or w.b2.any():
            raise InvalidInputError(
                f"layer {n} is not a uniform-attention layer: it needs Wk = 0 (or Wq = bq = 0), "
                "bv = bo = 0 and a switched-off FFN (W2 = 0, b2 = 0)"
            )
    with bk.active():
        u0 = bk.asarray(problem.u0)
        tokens = u0.shape[-2]
        mean = bk.sum(u0, -2) / tokens
        deviation = u0 - mean
        t_final = Fraction(problem.t_final)
        for n in range(math.ceil(t_final)):
            w = problem.controls.layers[n]
            length = bk.asarray(min(t_final, n + 1) - n)
            generator = bk.matmul(bk.asarray(w.wv), bk.asarray(w.wo))  # (H, d, d)
            total = generator[0]
            for h in range(1, w.heads):
                total = total + generator[h]
            mean = bk.matmul(mean, bk.expm(total * length))
        return deviation + mean
