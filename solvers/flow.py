"""The right-hand side of MODEL.md section 3 for one problem in one backend.

Two terms, each with the layer norm placed according to the problem's `norm`:

    attention term  A(u)        (post, none)   A(P1(u))  (pre)    [+ forcing g(t)]
                    (with the problem's token maps C_q, C_k, C_v inside A: the CvT)
    FFN term        F(u)        (post, none)   F(P2(u))  (pre)

For norm "post" the flow is u_t = Pi_T(u)[A(u) + F(u) + g(t)] on the constraint set of
the layer's norm, and `project` puts a state onto it; for "pre" and "none" the flow is
the sum of the terms and `project` and `tangent` are the identity. A manufactured
solution u* supplies the forcing g(t) = u*_t - Pi_T(u*)[(A + F)(u*)] (MODEL.md section 5;
for pre and none, without Pi_T), which joins the attention term; with it u* solves the
flow exactly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from solvers.backends import Array, Backend
from solvers.operators import (
    attention,
    feed_forward,
    hidden_preactivations,
    layer_norm,
    tangent_projection,
)
from solvers.weights import BackendLayer

if TYPE_CHECKING:  # problem.py imports this module
    from solvers.problem import Problem


class LayerFlow:
    """Terms, tangent projection and projection of a problem's flow, in backend `bk`."""

    def __init__(self, problem: Problem, bk: Backend) -> None:
        self.problem = problem
        self.bk = bk
        self.norm = problem.norm
        self.score_bias = problem.score_bias(bk)
        self.token_maps = problem.token_operators(bk)
        self.manufactured = problem.manufactured
        weights = problem.feature_weights
        if weights is not None:  # normalised to sum exactly 1 at working precision
            weights = bk.asarray(weights, "feature_weights")
            weights = weights / bk.sum(weights, -1)
        self.feature_weights = weights

    def layer(self, n: int, t: Array) -> BackendLayer:
        """The weights at time t in [n, n + 1]."""
        return self.problem.controls.layer_on(self.bk, n, t)

    def _normalised(self, u: Array, layer: BackendLayer, which: int) -> Array:
        if self.norm != "pre":
            return u
        gain, bias = layer.norm1 if which == 1 else layer.norm2
        return layer_norm(self.bk, u, gain, bias, layer.eps, self.feature_weights)

    def attention_term(self, n: int, t: Array, u: Array) -> Array:
        layer = self.layer(n, t)
        term = attention(
            self.bk, self._normalised(u, layer, 1), layer, self.score_bias, self.token_maps
        )
        if self.manufactured is not None:
            term += self.forcing(n, t)
        return term

    def ffn_term(self, n: int, t: Array, u: Array, pattern: Array | None = None) -> Array:
        layer = self.layer(n, t)
        return feed_forward(self.bk, self._normalised(u, layer, 2), layer, pattern)

    def total(self, n: int, t: Array, u: Array, pattern: Array | None = None) -> Array:
        """A + F (+ g), before the tangent projection."""
        return self.attention_term(n, t, u) + self.ffn_term(n, t, u, pattern)

    def forcing(self, n: int, t: Array) -> Array:
        """g(t) = u*_t - Pi_T(u*)[(A + F)(u*)] (post) or u*_t - (A + F)(u*) for the
        manufactured solution u*(t). Post-LN forcing leaves the normal part of A + F in
        the ambient field, as an unforced flow has it."""
        bk, layer = self.bk, self.layer(n, t)
        star = self.manufactured.state(bk, t)
        unforced = attention(
            bk, self._normalised(star, layer, 1), layer, self.score_bias, self.token_maps
        )
        unforced += feed_forward(bk, self._normalised(star, layer, 2), layer)
        if self.norm == "post":
            unforced = tangent_projection(bk, star, unforced, self.feature_weights)
        return self.manufactured.derivative(bk, t) - unforced

    def tangent(self, n: int, t: Array, u: Array, g: Array, moving: bool = True) -> Array:
        """The constrained field: Pi_T(u) g, plus the motion of the constraint set (post-LN).

        With norm parameters moving in time (gain sigma2(t), bias sigma1(t)) the set S1(t)
        moves, and u = sigma1 + sigma2 w with w on S1(0, 1) gives the extra term
        sigma1' + (sigma2' / sigma2)(u - sigma1), normal to S1. In a splitting only the
        part that carries the clock moves the set (`moving`). Other norms: g itself.
        """
        if self.norm != "post":
            return g
        field = tangent_projection(self.bk, u, g, self.feature_weights)
        rates = self.problem.controls.norm_rates(self.bk, n, t) if moving else None
        if rates is not None:
            gain, bias = self.layer(n, t).norm1
            gain_rate, bias_rate = rates
            field += bias_rate + gain_rate / gain * (u - bias)
        return field

    def project(self, n: int, t: Array, u: Array, which: int = 2) -> Array:
        """P onto the constraint set at time t of norm `which` (post-LN); u otherwise."""
        if self.norm != "post":
            return u
        layer = self.layer(n, t)
        gain, bias = layer.norm1 if which == 1 else layer.norm2
        return layer_norm(self.bk, u, gain, bias, layer.eps, self.feature_weights)

    def preactivations(self, n: int, t: Array, u: Array) -> Array:
        """The FFN's hidden pre-activations at u (after the pre-LN norm where there is one)."""
        layer = self.layer(n, t)
        return hidden_preactivations(self.bk, self._normalised(u, layer, 2), layer)
