"""Problem: initial data, controls, horizon, norm placement and the attention's extras."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from solvers.backends import Array, Backend
from solvers.equation.controls import Controls, PiecewiseControls, SmoothControls
from solvers.equation.manufactured import ManufacturedSolution
from solvers.equation.norms import Placement, as_placement
from solvers.equation.operators import TokenMap
from solvers.errors import InvalidInputError
from solvers.validation import finite_array, frozen, positive_int, token_mask


@dataclass(frozen=True, eq=False)
class Problem:
    """Integrate the layer flow from u0 on [0, t_final] under `controls`.

    u0 has shape (N, d) or (B, N, d). `norm` places the layer norms (a Placement or its
    name, "post", "pre" or "none"; docs/model.md section 2). `causal` masks every token's
    attention to the tokens before it. `token_weights` (N positive numbers, the token
    quadrature weights w^x) add log w^x to the attention scores; None means the uniform
    grid (no bias).
    `feature_weights` (d positive numbers summing to 1, the feature quadrature weights
    w^y) make the layer norm's means and variances w^y-weighted; None means 1/d each.
    `manufactured` (a ManufacturedSolution of shape (N, d)) adds the forcing that makes it
    the exact solution; the solvers then start from it at working precision.
    `token_maps` (C_q (N, N), C_k (M, N), C_v (M, N)) are linear maps in the token
    variable applied to every layer's queries, keys and values before their biases: the
    CvT's convolutional projections, fixed in time (solvers.space.cvt.ConvProjection.matrices,
    keys and values on a coarser grid of M tokens when strided), or a selection of the
    rows that act as keys (passive probe tokens, solvers.space.vit.probed_problem); None means
    the identity. With token maps, `token_weights` has one weight per key (M), and
    `causal` and `mask` are not allowed.
    `mask` (0/1 of shape (N,), or (B, N) for a batch u0; 1 for a real token) is a padding
    mask: the token measure restricted to the real tokens (docs/model.md section 6). No
    token attends to a masked one; a masked token attends to itself only, so its row is
    carried, defined, and seen by nobody. None means every token is real.
    `positions` (N finite numbers) are the tokens' positions for layers with rotary
    positions (docs/model.md section 7), in units of the original token spacing: on a
    refined token grid the physical positions; None means 0, 1, ..., N - 1. Rotary layers
    cannot be combined with token maps; a norm kind without a post-norm flow (RMSNorm,
    DyT: NormKind.post_refusal) is refused with placement "post".
    """

    u0: np.ndarray
    controls: Controls
    t_final: float
    norm: Placement | str = Placement.POST
    causal: bool = False
    token_weights: np.ndarray | None = None
    feature_weights: np.ndarray | None = None
    manufactured: ManufacturedSolution | None = None
    token_maps: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    mask: np.ndarray | None = None
    positions: np.ndarray | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.controls, PiecewiseControls | SmoothControls):
            raise InvalidInputError(
                "controls must be PiecewiseControls or SmoothControls, "
                f"got {type(self.controls).__name__}"
            )
        d = self.controls.d_model
        u0 = finite_array("u0", self.u0)
        if u0.ndim not in (2, 3) or u0.shape[-1] != d or 0 in u0.shape:
            raise InvalidInputError(
                f"u0 must have shape (N, d) or (B, N, d) with d={d} and N, B >= 1, got {u0.shape}"
            )
        object.__setattr__(self, "u0", frozen(u0))
        t_final = float(finite_array("t_final", self.t_final, ()))
        if not 0 < t_final <= self.controls.horizon:
            raise InvalidInputError(
                f"t_final must lie in (0, {self.controls.horizon}] (the controls' horizon), "
                f"got {t_final}"
            )
        object.__setattr__(self, "t_final", t_final)
        object.__setattr__(self, "norm", as_placement(self.norm))
        if not isinstance(self.causal, bool | np.bool_):
            raise InvalidInputError(f"causal must be True or False, got {self.causal!r}")
        if self.token_maps is not None:
            object.__setattr__(self, "token_maps", self._checked_token_maps(self.token_maps))
        if self.mask is not None:
            object.__setattr__(self, "mask", self._checked_mask(self.mask))
        if self.token_weights is not None:
            keys = self.tokens if self.token_maps is None else len(self.token_maps[1])
            weights = finite_array("token_weights", self.token_weights, (keys,))
            if (weights <= 0).any():
                raise InvalidInputError(
                    f"token_weights must be > 0, got {weights[weights <= 0][0]} at token "
                    f"{int(np.argmax(weights <= 0))}"
                )
            object.__setattr__(self, "token_weights", frozen(weights))
        if self.feature_weights is not None:
            weights = finite_array("feature_weights", self.feature_weights, (d,))
            if (weights <= 0).any() or abs(weights.sum() - 1) > 1e-12:
                raise InvalidInputError(
                    f"feature_weights must be positive and sum to 1, got sum {weights.sum()!r} "
                    f"and minimum {weights.min()!r}"
                )
            object.__setattr__(self, "feature_weights", frozen(weights))
        if self.manufactured is not None:
            self._check_manufactured(self.manufactured)
        if self.positions is not None:
            positions = finite_array("positions", self.positions, (self.tokens,))
            object.__setattr__(self, "positions", frozen(positions))
        self._check_decoder_parts()

    def _check_decoder_parts(self) -> None:
        for n, layer in enumerate(self.controls.all_layers()):
            refusal = self.norm.refusal(layer.norm_kind)
            if refusal is not None:
                raise InvalidInputError(f"layer {n} has {layer.norm_kind.title}: {refusal}")
            if layer.rope_theta is not None and self.token_maps is not None:
                raise InvalidInputError(
                    f"layer {n} has rotary positions, which token_maps (different query and "
                    "key token sets) do not define"
                )

    def _checked_token_maps(self, maps: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self.causal:
            raise InvalidInputError(
                "token_maps cannot be combined with a causal mask (keys and queries are "
                "different token sets)"
            )
        try:
            query, key, value = maps
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"token_maps must be three matrices (C_q, C_k, C_v), got {maps!r:.80}"
            ) from exc
        n = self.tokens
        query = finite_array("token_maps C_q", query, (n, n))
        key = finite_array("token_maps C_k", key, (None, n))
        value = finite_array("token_maps C_v", value, (key.shape[0], n))
        positive_int("the key grid size (rows of C_k)", key.shape[0])
        return frozen(query), frozen(key), frozen(value)

    def _checked_mask(self, mask: object) -> np.ndarray:
        if self.token_maps is not None:
            raise InvalidInputError(
                "a padding mask cannot be combined with token_maps (keys and queries are "
                "different token sets)"
            )
        shape = self.u0.shape[:-1] if np.ndim(mask) == 2 else (self.tokens,)
        return token_mask("mask", mask, shape)

    def _check_manufactured(self, star: ManufacturedSolution) -> None:
        if not isinstance(star, ManufacturedSolution):
            raise InvalidInputError(
                f"manufactured must be a ManufacturedSolution, got {type(star).__name__}"
            )
        if self.feature_weights is not None:
            raise InvalidInputError(
                "a manufactured solution lies on S1 of the uniform feature grid; "
                "it cannot be combined with feature_weights"
            )
        if self.u0.shape != (star.tokens, star.d):
            raise InvalidInputError(
                f"the manufactured solution has shape {(star.tokens, star.d)}, u0 {self.u0.shape}"
            )
        if self.norm.constrained:  # the flow lives on norm2's set; norm1 only scales the FFN
            for n, layer in enumerate(self.controls.all_layers()):
                gain, bias = layer.norm2
                if layer.eps != 0 or gain.ndim or gain != star.sigma2 or bias != star.sigma1:
                    raise InvalidInputError(
                        f"layer {n} norm2 must be the projection onto the manufactured "
                        f"solution's S1 (gain {star.sigma2}, bias {star.sigma1}, eps 0)"
                    )
                gain, bias = layer.norm1
                if gain.ndim or bias.ndim or not gain > 0:
                    raise InvalidInputError(
                        f"layer {n} norm1 must be a projection (one gain > 0, one bias) for "
                        "a manufactured post-LN solution"
                    )

    @property
    def tokens(self) -> int:
        return self.u0.shape[-2]

    def token_positions(self) -> np.ndarray:
        """The tokens' positions (N,): the given ones, or 0, 1, ..., N - 1."""
        return (
            np.arange(self.tokens, dtype=np.float64) if self.positions is None else self.positions
        )

    def real_tokens(self) -> np.ndarray:
        """Which rows are real tokens, broadcastable against u0's leading axes (..., N): the
        mask, or every token."""
        return np.ones(self.tokens, bool) if self.mask is None else self.mask

    def blocked(self) -> np.ndarray | None:
        """Where query i may not attend to key j (..., N, N), from the causal mask and the
        padding mask (a masked query sees itself only); None when nothing is blocked."""
        if not self.causal and self.mask is None:
            return None
        n = self.tokens
        blocked = np.triu(np.ones((n, n), bool), k=1) if self.causal else np.zeros((n, n), bool)
        if self.mask is not None:
            real = self.mask[..., None, :]
            blocked = np.where(real.swapaxes(-1, -2), blocked | ~real, ~np.eye(n, dtype=bool))
            if blocked.ndim == 3:  # one per batch entry, shared by the heads
                blocked = blocked[:, None]
        return blocked

    def score_bias(self, bk: Backend) -> Array | None:
        """The additive attention bias B: log w^x per key, and -inf where a query may not see
        a key (`blocked`: above the diagonal if causal, masked tokens), of shape (N, N), or
        (B, 1, N, N) with a per-input mask."""
        blocked = self.blocked()
        if self.token_weights is None and blocked is None:
            return None
        if self.token_maps is not None:  # one weight per key, for every query
            return bk.log(bk.asarray(self.token_weights, name="token_weights"))
        shape = (self.tokens, self.tokens) if blocked is None else blocked.shape
        bias = bk.asarray(np.zeros(shape))
        if self.token_weights is not None:
            bias += bk.log(bk.asarray(self.token_weights, name="token_weights"))
        if blocked is not None:
            bias[blocked] = bk.asarray(-np.inf)
        return bias

    def token_operators(self, bk: Backend) -> tuple[TokenMap, TokenMap, TokenMap] | None:
        """The token maps as operators x -> C x in bk (solvers.equation.operators.attention)."""
        if self.token_maps is None:
            return None
        matrices = [bk.constant(c, name="token_maps") for c in self.token_maps]
        return tuple(partial(bk.matmul, c) for c in matrices)

    def initial_state(self, bk: Backend) -> Array:
        """u(0) in bk (active): the manufactured solution at t = 0 when there is one (at
        working precision), else u0."""
        if self.manufactured is not None:
            return self.manufactured.state(bk, bk.asarray(0))
        return bk.asarray(self.u0, name="u0")
