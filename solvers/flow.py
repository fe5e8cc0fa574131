"""The right-hand side of the layer flow (docs/model.md section 3) in one backend.

Two terms, the attention term A (with the forcing of a manufactured solution, and the
token maps of the CvT inside A) and the FFN term F, each seeing the state through the
layer norm where the norm placement puts one; for post-LN the field is projected onto
the tangent space of the constraint set, and `project` puts a state onto the set.
"""

from __future__ import annotations

from solvers.backends import Array, Backend
from solvers.controls import Controls
from solvers.manufactured import ManufacturedSolution
from solvers.operators import (
    LAYER_NORMS,
    TokenMap,
    attention,
    feed_forward,
    hidden_preactivations,
    layer_norm,
    tangent_projection,
)
from solvers.problem import Problem
from solvers.validation import choice
from solvers.weights import BackendLayer


class LayerFlow:
    """Terms, tangent projection and projection of a layer flow, in backend `bk`.

    Built from its parts: the controls (layer n's weights on [n, n + 1]), the norm
    placement, the attention's score bias B and token maps (already in bk), the feature
    weights w^y of the norms' statistics (float64 or None: 1/d each) and a manufactured
    solution whose forcing joins the attention term. `from_problem` takes them from a
    Problem.
    """

    def __init__(
        self,
        bk: Backend,
        controls: Controls,
        norm: str,
        *,
        score_bias: Array | None = None,
        token_maps: tuple[TokenMap, TokenMap, TokenMap] | None = None,
        feature_weights: object = None,
        manufactured: ManufacturedSolution | None = None,
    ) -> None:
        self.bk = bk
        self.controls = controls
        self.norm = choice("norm", norm, LAYER_NORMS)
        self.score_bias = score_bias
        self.token_maps = token_maps
        self.manufactured = manufactured
        if feature_weights is not None:  # normalised to sum exactly 1 at working precision
            feature_weights = bk.asarray(feature_weights, "feature_weights")
            feature_weights = feature_weights / bk.sum(feature_weights, -1)
        self.feature_weights = feature_weights

    @classmethod
    def from_problem(cls, problem: Problem, bk: Backend) -> LayerFlow:
        """The flow of `problem` in bk (active)."""
        return cls(
            bk,
            problem.controls,
            problem.norm,
            score_bias=problem.score_bias(bk),
            token_maps=problem.token_operators(bk),
            feature_weights=problem.feature_weights,
            manufactured=problem.manufactured,
        )

    def layer(self, n: int, t: Array) -> BackendLayer:
        """The weights at time t in [n, n + 1]."""
        return self.controls.layer_on(self.bk, n, t)

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
        rates = self.controls.norm_rates(self.bk, n, t) if moving else None
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
