"""The right-hand side of the layer flow (docs/model.md section 3) in one backend.

Two terms, the attention term A (with the forcing of a manufactured solution, and the
token maps of the CvT inside A) and the FFN term F, each seeing the state through the
layer norm where the norm placement puts one; for post-LN the field is projected onto
the tangent space of the constraint set, and `project` puts a state onto the set.
"""

from __future__ import annotations

import numpy as np

from solvers.backends import Array, Backend
from solvers.equation.controls import Controls
from solvers.equation.manufactured import ManufacturedSolution
from solvers.equation.norms import NormKind, Placement, as_placement
from solvers.equation.operators import (
    TokenLayout,
    TokenMap,
    attention,
    attention_scores,
    feed_forward,
    hidden_preactivations,
)
from solvers.equation.packed import BackendLayer
from solvers.equation.problem import Problem
from solvers.equation.rotary import rotary_tables
from solvers.errors import InvalidInputError

FORCING_CACHE = 64
"""How many of the latest forcing values g(n, t) a flow keeps (`LayerFlow.forcing`)."""


class LayerFlow:
    """Terms, tangent projection and projection of a layer flow, in backend `bk`.

    Built from its parts: the controls (layer n's weights on [n, n + 1]), the norm
    placement, the attention's score bias B and token maps (already in bk), the feature
    weights w^y of the norms' statistics (float64 or None: 1/d each), a manufactured
    solution whose forcing joins the attention term, and which tokens are real (the
    padding mask, (..., N) booleans; None: all), whose rows alone are judged (event
    location skips the others), and the tokens' positions (float64, (N,); needed when a
    layer has rotary positions, whose tables are built here once per base and factor at
    the working precision). `from_problem` takes them from a Problem.
    """

    def __init__(
        self,
        bk: Backend,
        controls: Controls,
        norm: Placement | str,
        *,
        score_bias: Array | None = None,
        token_maps: tuple[TokenMap, TokenMap, TokenMap] | None = None,
        feature_weights: object = None,
        manufactured: ManufacturedSolution | None = None,
        real_tokens: np.ndarray | None = None,
        positions: np.ndarray | None = None,
    ) -> None:
        self.bk = bk
        self.controls = controls
        self.norm = as_placement(norm)
        self.score_bias = score_bias
        self.token_maps = token_maps
        self.manufactured = manufactured
        self.real_tokens = real_tokens
        if feature_weights is not None:  # normalised to sum exactly 1 at working precision
            feature_weights = bk.asarray(feature_weights, "feature_weights")
            feature_weights = feature_weights / bk.sum(feature_weights, -1)
        self.feature_weights = feature_weights
        self.positions = positions
        self._norms_differ: dict[int, bool] = {}
        self._rotary: dict[tuple[float, float, int], tuple[Array, Array]] = {}
        self._forcing: dict[tuple[int, Array], Array] = {}

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
            real_tokens=problem.mask,
            positions=problem.token_positions(),
        )

    def judged(self, x: np.ndarray) -> np.ndarray:
        """A float64 array of the state's shape (..., N, d) with the rows of masked tokens
        set to 0: what error norms and estimates measure (docs/model.md section 6)."""
        if self.real_tokens is None:
            return x
        return x * self.real_tokens[..., None]

    def size(self, x: np.ndarray) -> float:
        """max |x| over the real tokens' rows of a float64 state-shaped array."""
        return float(np.max(np.abs(self.judged(x))))

    def error_scale(self, u: Array) -> float:
        """max(1, max |u|) over the real tokens: the size absolute errors of a state are
        measured against (docs/schemes.md section 7)."""
        return max(1.0, self.size(self.bk.to_float64(u)))

    def layer(self, n: int, t: Array) -> BackendLayer:
        """The weights at time t in [n, n + 1]."""
        return self.controls.layer_on(self.bk, n, t)

    def _normalised(self, u: Array, layer: BackendLayer, which: int) -> Array:
        if not self.norm.normalises_inputs:
            return u
        return self._norm(u, layer, which)

    def _norm(self, u: Array, layer: BackendLayer, which: int) -> Array:
        """The layer's norm `which` (of its kind, solvers.equation.norms) applied to u."""
        parameters = layer.norm1 if which == 1 else layer.norm2
        return layer.norm_kind.apply(self.bk, u, parameters, layer.eps, self.feature_weights)

    def _kind(self, n: int) -> NormKind:
        """Layer n's norm kind (its keyframes share it)."""
        return self.controls.acting_on(n)[0].norm_kind

    def rotary(self, layer: BackendLayer) -> tuple[Array, Array] | None:
        """The (cos, sin) tables of the tokens' positions for a layer with rotary positions
        (solvers.equation.rotary), None for one without."""
        if layer.rope is None:
            return None
        if self.positions is None:
            raise InvalidInputError("a layer with rotary positions needs the tokens' positions")
        key = (*layer.rope, layer.d_k)
        if key not in self._rotary:
            self._rotary[key] = rotary_tables(self.bk, self.positions, *key)
        return self._rotary[key]

    def _attention_inputs(self, u: Array, layer: BackendLayer) -> tuple:
        """The arguments of the attention operators at u: the backend, the state seen
        through norm 1, the layer, and the tokens' layout (score bias, token maps, rotary
        tables)."""
        normalised = self._normalised(u, layer, 1)
        tokens = TokenLayout(self.score_bias, self.token_maps, self.rotary(layer))
        return self.bk, normalised, layer, tokens

    def _attention(self, u: Array, layer: BackendLayer) -> Array:
        return attention(*self._attention_inputs(u, layer))

    def attention_scores(self, n: int, t: Array, u: Array) -> Array:
        """Layer n's attention scores S_h + B at (t, u), (..., H, N, M): what the row softmax
        of the attention term turns into weights (the state seen through norm 1 for
        pre-LN)."""
        return attention_scores(*self._attention_inputs(u, self.layer(n, t)))[0]

    def _two_norms(self, n: int) -> bool:
        """Whether layer n is post-LN with norm1 != norm2 (at any of its keyframes)."""
        if n not in self._norms_differ:
            self._norms_differ[n] = self.norm.constrained and any(
                not all(np.array_equal(a, b) for a, b in zip(w.norm1, w.norm2, strict=True))
                for w in self.controls.acting_on(n)
            )
        return self._norms_differ[n]

    def _ffn_input(self, n: int, u: Array, layer: BackendLayer) -> Array:
        """What the flow's FFN sees: LN2(u) for pre-LN; for post-LN with two norms the S1
        copy of u on S2, P1(u) = a1 + (s1 / s2)(u - a2) (docs/limits.md section 3); u
        otherwise."""
        if not self._two_norms(n):
            return self._normalised(u, layer, 2)
        (s1, a1), (s2, a2) = layer.norm1, layer.norm2
        return (u - a2) * (s1 / s2) + a1

    def _field_ffn(self, n: int, u: Array, layer: BackendLayer, pattern: Array | None) -> Array:
        term = feed_forward(self.bk, self._ffn_input(n, u, layer), layer, pattern)
        if self._two_norms(n):
            term *= layer.norm2[0] / layer.norm1[0]
        return term

    def attention_term(self, n: int, t: Array, u: Array) -> Array:
        term = self._attention(u, self.layer(n, t))
        if self.manufactured is not None:
            term += self.forcing(n, t)
        return term

    def ffn_term(self, n: int, t: Array, u: Array, pattern: Array | None = None) -> Array:
        """The layer's FFN sub-step term, F(u) (post, none) or F(P2(u)) (pre): what the
        Transformer adds to a state u (after P1, for post-LN)."""
        layer = self.layer(n, t)
        return feed_forward(self.bk, self._normalised(u, layer, 2), layer, pattern)

    def field_ffn_term(self, n: int, t: Array, u: Array, pattern: Array | None = None) -> Array:
        """The FFN part of the flow's field at u: the FFN term, except for post-LN layers
        with two scalar norms, where the state lives on S2 and the term is
        (s2 / s1) F(P1(u)) (docs/limits.md section 3)."""
        return self._field_ffn(n, u, self.layer(n, t), pattern)

    def total(self, n: int, t: Array, u: Array, pattern: Array | None = None) -> Array:
        """The flow's field before the tangent projection: A + F (+ g)."""
        return self.attention_term(n, t, u) + self.field_ffn_term(n, t, u, pattern)

    def field(self, n: int, t: Array, u: Array, pattern: Array | None = None) -> Array:
        """The flow's field at (t, u): Pi_T(u) (A + F (+ g)), plus the motion of the
        constraint set (post-LN; `tangent`); with `pattern`, ReLU's activation pattern held."""
        return self.tangent(n, t, u, self.total(n, t, u, pattern))

    def forcing(self, n: int, t: Array) -> Array:
        """g(t) = u*_t - Pi_T(u*)[(A + F)(u*)] (post) or u*_t - (A + F)(u*) for the
        manufactured solution u*(t), with F the flow's FFN term. Post-LN forcing leaves
        the normal part of A + F in the ambient field, as an unforced flow has it.

        g depends on (n, t) alone, and a step's stages meet the same times again (RK4's
        two midpoint stages, the step's end that starts the next, the extrapolation's rows
        sharing sub-step points: 40% of the calls in the built-in study), so the last
        FORCING_CACHE values are kept, read-only, keyed by (n, t): every number system's
        scalars hash and compare by value, and a time that does not hash (an array, a ball
        with a radius) is computed afresh."""
        key = (n, t)
        try:
            cached = key in self._forcing
        except (TypeError, ValueError):  # an array of one number, a ball with a radius
            return self._manufactured_forcing(n, t)
        if not cached:
            if len(self._forcing) >= FORCING_CACHE:
                del self._forcing[next(iter(self._forcing))]  # the oldest
            value = self._manufactured_forcing(n, t)
            value.setflags(write=False)
            self._forcing[key] = value
        return self._forcing[key]

    def _manufactured_forcing(self, n: int, t: Array) -> Array:
        bk, layer = self.bk, self.layer(n, t)
        star = self.manufactured.state(bk, t)
        unforced = self._attention(star, layer)
        unforced += self._field_ffn(n, star, layer, None)
        if self.norm.constrained:
            unforced = self._kind(n).tangent(bk, star, unforced, self.feature_weights)
        return self.manufactured.derivative(bk, t) - unforced

    def tangent(self, n: int, t: Array, u: Array, g: Array, moving: bool = True) -> Array:
        """The constrained field: Pi_T(u) g, plus the motion of the constraint set (post-LN).

        With norm parameters moving in time (norm2's gain sigma2(t) and bias sigma1(t): the
        flow lives on the set of the norm that ends each layer) the set S1(t) moves, and
        u = sigma1 + sigma2 w with w on S1(0, 1) gives the extra term
        sigma1' + (sigma2' / sigma2)(u - sigma1), normal to S1. In a splitting only the
        part that carries the clock moves the set (`moving`). Other norms: g itself.
        """
        if not self.norm.constrained:
            return g
        field = self._kind(n).tangent(self.bk, u, g, self.feature_weights)
        rates = self.controls.norm_rates(self.bk, n, t) if moving else None
        if rates is not None:
            gain, bias = self.layer(n, t).norm2
            gain_rate, bias_rate = rates
            field += bias_rate + gain_rate / gain * (u - bias)
        return field

    def project(self, n: int, t: Array, u: Array, which: int = 2) -> Array:
        """P onto the constraint set at time t of norm `which` (post-LN); u otherwise."""
        if not self.norm.constrained:
            return u
        return self._norm(u, self.layer(n, t), which)

    def preactivations(self, n: int, t: Array, u: Array) -> Array:
        """The hidden pre-activations of the flow's FFN term at u."""
        layer = self.layer(n, t)
        return hidden_preactivations(self.bk, self._ffn_input(n, u, layer), layer)
