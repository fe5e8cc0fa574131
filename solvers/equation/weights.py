"""LayerWeights: the parameters of one layer in the PyTorch convention.

Weights act on the right (x @ W). For H query heads and H_kv key-value heads (H_kv
divides H; docs/model.md section 7) with key width d_k and value width d_v:

    wq: (H, d, d_k)       bq: (H, d_k)
    wk: (H_kv, d, d_k)    bk: (H_kv, d_k)
    wv: (H_kv, d, d_v)    bv: (H_kv, d_v)
    wo: (H, d_v, d)       bo: (d,)
    w1: (d, m)            b1: (m,)      the up map of a gated FFN
    w2: (m, d)            b2: (d,)      its down map
    w_gate: (d, m) or None, b_gate: (m,) (zero if not given): the gate of a gated FFN
    norm1, norm2: the norms' parameters in the order of the kind's `parameters`, None
                  for its defaults: (gain, bias) for LN and RMSNorm, each a scalar
                  (sigma2, sigma1 of the projection onto S1) or a per-feature vector of
                  length d (torch-style layer norm); (gain, bias, alpha) for DyT
    norm_kind: a NormKind or its name (solvers.equation.norms.KINDS): "layer" (LN),
                  "rms" (RMSNorm, docs/model.md section 7; the biases are 0) or "dyt"
                  (DyT, section 8; no eps)
    eps >= 0, scale > 0, or None (the default) for the canonical 1 / sqrt(d_k)
    rope_theta > 0 or None: rotary positions with base theta (d_k even), rope_factor > 0
                  the linear scaling factor (positions x / factor)

With eps = 0 and scalar gain > 0 a layer norm is the projection P onto S1 (docs/model.md
section 1), an RMSNorm the projection onto the sphere S_R (section 7); otherwise the
torch-style norm, which is not a projection.

The canonical scale is the real number 1/sqrt(d_k), not its float64 rounding: each number
system evaluates it to its own precision when the weights are rounded into it
(`LayerWeights.scale_in`), so a 50-digit run solves the model with the exact scale. A scale given
as a number (a model's non-canonical one) is kept as given, like every other weight.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from solvers.backends import Array, Backend
from solvers.equation.norms import LAYER, NormKind, as_norm_kind
from solvers.equation.packed import BackendLayer, decoder_parts
from solvers.errors import InvalidInputError
from solvers.validation import finite_array, frozen, positive_int

MAPS = ("wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo", "w1", "b1", "w2", "b2")
"""A layer's attention and FFN maps and biases: every array but the norms (and the gate)."""
GATE_MAPS = ("w_gate", "b_gate")
"""The gate map and bias of a gated FFN (LayerWeights.map_names includes them when gated)."""
ACTIVATIONS = ("relu", "gelu", "gelu-tanh", "silu")
"""The FFN's activation: relu (the projection onto the orthant, the paper's), gelu
(x Phi(x), smooth: BERT's and the Vision Transformer's), gelu-tanh (GELU's tanh form,
GPT-2's; docs/model.md section 1) or silu (x / (1 + exp(-x)), smooth: the Llama family's;
docs/model.md section 7)."""
ACTIVATION_LIPSCHITZ = {"relu": 1.0, "gelu": 1.129, "gelu-tanh": 1.129, "silu": 1.1}
"""sup |sigma'| of each activation, rounded up: relu 1; gelu Phi(x) + x phi(x) is largest
at x = sqrt(2), 1.12890...; its tanh form 1.12899... near x = 1.4185; silu 1.09984... near
x = 2.3994. Every one also has |sigma(z)| <= |z|, which the bounds use for sizes."""


@dataclass(frozen=True, eq=False)
class LayerWeights:
    """One encoder layer (see the module docstring for shapes). Validated on construction."""

    wq: np.ndarray
    bq: np.ndarray
    wk: np.ndarray
    bk: np.ndarray
    wv: np.ndarray
    bv: np.ndarray
    wo: np.ndarray
    bo: np.ndarray
    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: np.ndarray
    norm1: tuple[np.ndarray, ...] | None = None
    norm2: tuple[np.ndarray, ...] | None = None
    eps: float = 0.0
    scale: float | None = None
    activation: str = "relu"
    w_gate: np.ndarray | None = None
    b_gate: np.ndarray | None = None
    norm_kind: NormKind | str = LAYER
    rope_theta: float | None = None
    rope_factor: float = 1.0
    _on_backend: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        wq = finite_array("wq", self.wq, (None, None, None))
        heads, d, d_k = wq.shape
        for name, size in (("heads", heads), ("d", d), ("d_k", d_k)):
            positive_int(f"{name} (from wq.shape)", size)
        wk = finite_array("wk", self.wk, (None, d, d_k))
        kv_heads = positive_int("key-value heads (from wk.shape)", wk.shape[0])
        if heads % kv_heads:
            raise InvalidInputError(
                f"the {kv_heads} key-value heads of wk must divide the {heads} query heads"
            )
        wv = finite_array("wv", self.wv, (kv_heads, d, None))
        d_v = positive_int("d_v (from wv.shape)", wv.shape[2])
        w1 = finite_array("w1", self.w1, (d, None))
        d_ff = positive_int("d_ff (from w1.shape)", w1.shape[1])
        shapes = {
            "wq": (heads, d, d_k),
            "bq": (heads, d_k),
            "wk": (kv_heads, d, d_k),
            "bk": (kv_heads, d_k),
            "wv": (kv_heads, d, d_v),
            "bv": (kv_heads, d_v),
            "wo": (heads, d_v, d),
            "bo": (d,),
            "w1": (d, d_ff),
            "b1": (d_ff,),
            "w2": (d_ff, d),
            "b2": (d,),
        }
        if self.w_gate is not None:
            shapes |= {"w_gate": (d, d_ff), "b_gate": (d_ff,)}
            if self.b_gate is None:
                object.__setattr__(self, "b_gate", np.zeros(d_ff))
        elif self.b_gate is not None:
            raise InvalidInputError("b_gate was given without w_gate")
        for name, shape in shapes.items():
            object.__setattr__(self, name, frozen(finite_array(name, getattr(self, name), shape)))
        kind = as_norm_kind(self.norm_kind)
        object.__setattr__(self, "norm_kind", kind)
        for name in ("norm1", "norm2"):
            value = getattr(self, name)
            checked = kind.checked(name, kind.default() if value is None else value, d)
            object.__setattr__(self, name, tuple(frozen(part) for part in checked))
        self._check_rope()
        eps = float(finite_array("eps", self.eps, ()))
        if eps < 0:
            raise InvalidInputError(f"eps must be >= 0, got {eps!r}")
        kind.check_eps(eps)
        object.__setattr__(self, "eps", eps)
        if self.activation not in ACTIVATIONS:
            raise InvalidInputError(
                f"activation must be one of {', '.join(ACTIVATIONS)}, got {self.activation!r}"
            )
        if self.scale is not None:  # None stays: the canonical 1/sqrt(d_k), exact per backend
            scale = float(finite_array("scale", self.scale, ()))
            if scale <= 0:
                raise InvalidInputError(f"scale must be > 0, got {scale!r}")
            object.__setattr__(self, "scale", scale)

    def _check_rope(self) -> None:
        factor = float(finite_array("rope_factor", self.rope_factor, ()))
        if factor <= 0:
            raise InvalidInputError(f"rope_factor must be > 0, got {factor!r}")
        object.__setattr__(self, "rope_factor", factor)
        if self.rope_theta is None:
            if factor != 1:
                raise InvalidInputError("rope_factor was given without rope_theta")
            return
        theta = float(finite_array("rope_theta", self.rope_theta, ()))
        if theta <= 0:
            raise InvalidInputError(f"rope_theta must be > 0, got {theta!r}")
        if self.d_k % 2:
            raise InvalidInputError(f"rotary positions need an even key width, got d_k={self.d_k}")
        object.__setattr__(self, "rope_theta", theta)

    @property
    def heads(self) -> int:
        return self.wq.shape[0]

    @property
    def kv_heads(self) -> int:
        """H_kv, the number of key-value heads (H for plain multi-head attention)."""
        return self.wk.shape[0]

    @property
    def gated(self) -> bool:
        return self.w_gate is not None

    @property
    def map_names(self) -> tuple[str, ...]:
        """The names of this layer's maps and biases: MAPS, and GATE_MAPS when gated."""
        return MAPS + GATE_MAPS if self.gated else MAPS

    @property
    def decoder_parts(self) -> list[str]:
        """The parts of docs/model.md section 7 this layer uses (solvers.equation.packed)."""
        return decoder_parts(
            self.norm_kind, self.gated, self.rope_theta is not None, self.heads, self.kv_heads
        )

    def refuse_decoder_parts(self, what: str) -> None:
        """Raise InvalidInputError naming `what` when this layer uses a part of docs/model.md
        section 7 that `what` does not implement."""
        if self.decoder_parts:
            raise InvalidInputError(
                f"{what} is not implemented for {', '.join(self.decoder_parts)}"
            )

    def kv_of_head(self, h: int) -> int:
        """The key-value head that query head h uses: floor(h H_kv / H)."""
        return h * self.kv_heads // self.heads

    @property
    def d_model(self) -> int:
        return self.wq.shape[1]

    @property
    def d_k(self) -> int:
        return self.wq.shape[2]

    @property
    def d_v(self) -> int:
        return self.wv.shape[2]

    @property
    def d_ff(self) -> int:
        return self.w1.shape[1]

    @property
    def activation_lipschitz(self) -> float:
        """The Lipschitz constant of the FFN's activation (ACTIVATION_LIPSCHITZ)."""
        return ACTIVATION_LIPSCHITZ[self.activation]

    @property
    def attention_scale(self) -> float:
        """The score scale as a float64 number, for arithmetic in float64 (bounds, studies,
        scale sweeps): the given scale, or 1/sqrt(d_k) rounded to float64 when canonical.
        Solves use `scale_in(bk)` instead, which is exact to the working precision."""
        return 1.0 / math.sqrt(self.d_k) if self.scale is None else self.scale

    def scale_in(self, bk: Backend) -> Array:
        """The score scale as a number of `bk` (active): the canonical one evaluated as
        accurately as bk can (Backend.reciprocal_sqrt), a given one rounded from its float."""
        if self.scale is None:
            return bk.reciprocal_sqrt(self.d_k)
        return bk.asarray(self.scale, "scale")

    def on(self, bk: Backend) -> BackendLayer:
        """These weights rounded into `bk` and packed (computed once per backend)."""
        key = bk.key
        if key not in self._on_backend:
            with bk.active():
                self._on_backend[key] = self._packed(bk)
        return self._on_backend[key]

    def _packed(self, bk: Backend) -> BackendLayer:
        def side_by_side(w: np.ndarray) -> np.ndarray:
            return np.concatenate(list(w), axis=-1)

        def rounded(name: str, value: object) -> Array:
            return bk.constant(value, name=name)

        heads = self.heads
        return BackendLayer(
            heads=heads,
            kv_heads=self.kv_heads,
            d_k=self.d_k,
            d_v=self.d_v,
            w_qkv=rounded(
                "wq, wk, wv",
                np.concatenate([side_by_side(w) for w in (self.wq, self.wk, self.wv)], axis=1),
            ),
            b_qkv=rounded(
                "bq, bk, bv", np.concatenate([self.bq.ravel(), self.bk.ravel(), self.bv.ravel()])
            ),
            w_o=rounded("wo", self.wo.reshape(heads * self.d_v, self.d_model)),
            b_o=rounded("bo", self.bo),
            w1=rounded("w1", self.w1),
            b1=rounded("b1", self.b1),
            w2=rounded("w2", self.w2),
            b2=rounded("b2", self.b2),
            norm1=self._norm_on("norm1", rounded),
            norm2=self._norm_on("norm2", rounded),
            eps=rounded("eps", self.eps),
            scale=rounded("scale", self.scale_in(bk)),
            activation=self.activation,
            w_gate=None if not self.gated else rounded("w_gate", self.w_gate),
            b_gate=None if not self.gated else rounded("b_gate", self.b_gate),
            norm_kind=self.norm_kind,
            rope=None if self.rope_theta is None else (self.rope_theta, self.rope_factor),
        )

    def _norm_on(self, name: str, rounded: Callable[[str, object], Array]) -> tuple[Array, ...]:
        parts = zip(self.norm_kind.parameters, getattr(self, name), strict=True)
        return tuple(rounded(f"{name} {part}", value) for part, value in parts)

    def scaled(self, factor: float) -> LayerWeights:
        """These weights with every attention and FFN map and bias multiplied by `factor` > 0.

        The norms, eps and the attention scale (canonical or given) are kept. With
        s = factor the scores grow like s^2, and the terms are s (b_o + b_2) plus s^2 times
        the value-output and the two-layer FFN products (relu is positively homogeneous;
        a gated FFN's gate is scaled too, its term is then not a power of s):
        the weight scale of a Transformer, sweeping the field's size.
        """
        factor = float(finite_array("factor", factor, ()))
        if factor <= 0:
            raise InvalidInputError(f"factor must be > 0, got {factor!r}")
        return replace(self, **{name: getattr(self, name) * factor for name in self.map_names})

    @classmethod
    def random(
        cls,
        d: int,
        heads: int,
        d_ff: int,
        rng: np.random.Generator | int = 0,
        *,
        d_k: int | None = None,
        d_v: int | None = None,
        weight_scale: float = 1.0,
        bias_scale: float = 0.1,
        eps: float = 0.0,
        affine: bool = False,
        activation: str = "relu",
        kv_heads: int | None = None,
        gated: bool = False,
        norm_kind: NormKind | str = LAYER,
        rope_theta: float | None = None,
    ) -> LayerWeights:
        """Seeded Gaussian weights that give non-trivial attention, with the FFN's
        `activation` (ACTIVATIONS) and, if asked, the decoder parts of docs/model.md
        section 7: `kv_heads` key-value heads (default `heads`), a `gated` FFN (its gate
        drawn like w1, after every other array), a norm kind other than LN (`norm_kind`,
        solvers.equation.norms.KINDS) and rotary positions of base `rope_theta`.

        Each map is N(0, weight_scale^2 / fan_in), so for rows of unit mean square the
        queries and keys have O(1) entries and the default scale 1/sqrt(d_k) gives O(1)
        scores: attention rows are neither uniform nor one-hot. Biases are
        N(0, bias_scale^2). With `affine` the norms get per-feature gains 1 + 0.3 N(0, 1)
        and biases 0.3 N(0, 1) (torch-style LN; NormKind.random); otherwise the kind's
        defaults (gain 1 and bias 0, scalars).
        `d_k` and `d_v` default to d // heads, which must then divide evenly.
        """
        d, heads, d_ff = (
            positive_int(n, v) for n, v in (("d", d), ("heads", heads), ("d_ff", d_ff))
        )
        if d_k is None or d_v is None:
            if d % heads:
                raise InvalidInputError(
                    f"heads={heads} does not divide d={d}; give d_k and d_v explicitly"
                )
        d_k = positive_int("d_k", d // heads if d_k is None else d_k)
        d_v = positive_int("d_v", d // heads if d_v is None else d_v)
        kv_heads = heads if kv_heads is None else positive_int("kv_heads", kv_heads)
        rng = np.random.default_rng(rng)

        def gaussian(shape: tuple[int, ...], fan_in: int) -> np.ndarray:
            return rng.standard_normal(shape) * (weight_scale / math.sqrt(fan_in))

        def bias(shape: tuple[int, ...]) -> np.ndarray:
            return rng.standard_normal(shape) * bias_scale

        kind = as_norm_kind(norm_kind)

        layer = cls(
            wq=gaussian((heads, d, d_k), d),
            bq=bias((heads, d_k)),
            wk=gaussian((kv_heads, d, d_k), d),
            bk=bias((kv_heads, d_k)),
            wv=gaussian((kv_heads, d, d_v), d),
            bv=bias((kv_heads, d_v)),
            wo=gaussian((heads, d_v, d), heads * d_v),
            bo=bias((d,)),
            w1=gaussian((d, d_ff), d),
            b1=bias((d_ff,)),
            w2=gaussian((d_ff, d), d_ff),
            b2=bias((d,)),
            norm1=kind.random(rng, d, affine),
            norm2=kind.random(rng, d, affine),
            eps=eps,
            activation=activation,
            norm_kind=kind,
            rope_theta=rope_theta,
        )
        if not gated:
            return layer
        return replace(layer, w_gate=gaussian((d, d_ff), d), b_gate=bias((d_ff,)))
