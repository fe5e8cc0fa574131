"""LayerWeights: the parameters of one encoder layer in the PyTorch convention.

Weights act on the right (x @ W). For H heads with key width d_k and value width d_v:

    wq, wk: (H, d, d_k)   bq, bk: (H, d_k)
    wv:     (H, d, d_v)   bv:     (H, d_v)
    wo:     (H, d_v, d)   bo:     (d,)
    w1:     (d, m)        b1:     (m,)
    w2:     (m, d)        b2:     (d,)
    norm1, norm2: (gain, bias), each a scalar (sigma2, sigma1 of the projection onto S1)
                  or a per-feature vector of length d (torch-style layer norm)
    eps >= 0, scale > 0, or None (the default) for the canonical 1 / sqrt(d_k)

With eps = 0 and scalar gain > 0 a norm is the projection P onto S1 (docs/model.md section 1);
otherwise it is the torch-style layer norm, which is not a projection.

The canonical scale is the real number 1/sqrt(d_k), not its float64 rounding: each number
system evaluates it to its own precision when the weights are rounded into it
(`LayerWeights.scale_in`), so a 50-digit run solves the model with the exact scale. A scale given
as a number (a model's non-canonical one) is kept as given, like every other weight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from solvers.backends import Array, Backend
from solvers.errors import InvalidInputError
from solvers.validation import finite_array, positive_int

MAPS = ("wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo", "w1", "b1", "w2", "b2")
"""A layer's attention and FFN maps and biases: every array but the norms."""
ACTIVATIONS = ("relu", "gelu", "gelu-tanh", "silu")
"""The FFN's activation: relu (the projection onto the orthant, the paper's), gelu
(x Phi(x), smooth: BERT's and the Vision Transformer's), gelu-tanh (GELU's tanh form,
GPT-2's; docs/model.md section 1) or silu (x / (1 + exp(-x)), smooth: the Llama family's;
docs/model.md section 7)."""
ACTIVATION_LIPSCHITZ = {"relu": 1.0, "gelu": 1.129, "gelu-tanh": 1.129, "silu": 1.1}
"""sup |sigma'| of each activation, rounded up: relu 1; gelu Phi(x) + x phi(x) is largest
at x = sqrt(2), 1.12890...; its tanh form 1.12899... near x = 1.4185; silu 1.09984... near
x = 2.3994. Every one also has |sigma(z)| <= |z|, which the bounds use for sizes."""


def torch_style_norm(gain: np.ndarray, bias: np.ndarray) -> tuple[Any, Any]:
    """A layer norm's per-feature (gain, bias) as LayerWeights keeps them: a constant
    vector is exactly a scalar gain (or bias), and is kept as one."""
    return tuple(v[0] if np.all(v == v[0]) else v for v in (gain, bias))


@dataclass(frozen=True)
class BackendLayer:
    """One layer's weights rounded into a backend, with the q/k/v maps packed side by side.

    Packing puts every head's query, key and value columns into one matrix
    [Wq_1 .. Wq_H | Wk_1 .. Wk_H | Wv_1 .. Wv_H] so that one product U @ w_qkv gives them
    all (the layout of torch's in_proj_weight, transposed); w_o stacks Wo_1 .. Wo_H.
    """

    heads: int
    d_k: int
    d_v: int
    w_qkv: Array
    b_qkv: Array
    w_o: Array
    b_o: Array
    w1: Array
    b1: Array
    w2: Array
    b2: Array
    norm1: tuple[Array, Array]
    norm2: tuple[Array, Array]
    eps: Array
    scale: Array
    activation: str = "relu"


def frozen(array: np.ndarray) -> np.ndarray:
    """A read-only copy: the weights cannot change under the per-backend cache."""
    array = np.array(array, dtype=np.float64)
    array.flags.writeable = False
    return array


def _norm_pair(name: str, value: Any, d: int) -> tuple[np.ndarray, np.ndarray]:
    try:
        gain, bias = value
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{name} must be a pair (gain, bias), got {value!r:.80}") from exc
    pair = []
    for part, entry in (("gain", gain), ("bias", bias)):
        array = finite_array(f"{name} {part}", entry)
        if array.shape not in ((), (d,)):
            raise InvalidInputError(
                f"{name} {part} must be a scalar or a vector of length d={d}, "
                f"got shape {array.shape}"
            )
        pair.append(array)
    return pair[0], pair[1]


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
    norm1: tuple[np.ndarray, np.ndarray] = (np.float64(1.0), np.float64(0.0))
    norm2: tuple[np.ndarray, np.ndarray] = (np.float64(1.0), np.float64(0.0))
    eps: float = 0.0
    scale: float | None = None
    activation: str = "relu"
    _on_backend: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        wq = finite_array("wq", self.wq, (None, None, None))
        heads, d, d_k = wq.shape
        for name, size in (("heads", heads), ("d", d), ("d_k", d_k)):
            positive_int(f"{name} (from wq.shape)", size)
        wv = finite_array("wv", self.wv, (heads, d, None))
        d_v = positive_int("d_v (from wv.shape)", wv.shape[2])
        w1 = finite_array("w1", self.w1, (d, None))
        d_ff = positive_int("d_ff (from w1.shape)", w1.shape[1])
        shapes = {
            "wq": (heads, d, d_k),
            "bq": (heads, d_k),
            "wk": (heads, d, d_k),
            "bk": (heads, d_k),
            "wv": (heads, d, d_v),
            "bv": (heads, d_v),
            "wo": (heads, d_v, d),
            "bo": (d,),
            "w1": (d, d_ff),
            "b1": (d_ff,),
            "w2": (d_ff, d),
            "b2": (d,),
        }
        for name, shape in shapes.items():
            object.__setattr__(self, name, frozen(finite_array(name, getattr(self, name), shape)))
        for name in ("norm1", "norm2"):
            pair = _norm_pair(name, getattr(self, name), d)
            object.__setattr__(self, name, (frozen(pair[0]), frozen(pair[1])))
        eps = float(finite_array("eps", self.eps, ()))
        if eps < 0:
            raise InvalidInputError(f"eps must be >= 0, got {eps!r}")
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

    @property
    def heads(self) -> int:
        return self.wq.shape[0]

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
            norm1=(rounded("norm1 gain", self.norm1[0]), rounded("norm1 bias", self.norm1[1])),
            norm2=(rounded("norm2 gain", self.norm2[0]), rounded("norm2 bias", self.norm2[1])),
            eps=rounded("eps", self.eps),
            scale=rounded("scale", self.scale_in(bk)),
            activation=self.activation,
        )

    def scaled(self, factor: float) -> LayerWeights:
        """These weights with every attention and FFN map and bias multiplied by `factor` > 0.

        The norms, eps and the attention scale (canonical or given) are kept. With
        s = factor the scores grow like s^2, and the terms are s (b_o + b_2) plus s^2 times
        the value-output and the two-layer FFN products (relu is positively homogeneous):
        the weight scale of a Transformer, sweeping the field's size.
        """
        factor = float(finite_array("factor", factor, ()))
        if factor <= 0:
            raise InvalidInputError(f"factor must be > 0, got {factor!r}")
        return replace(self, **{name: getattr(self, name) * factor for name in MAPS})

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
    ) -> LayerWeights:
        """Seeded Gaussian weights that give non-trivial attention, with the FFN's
        `activation` (ACTIVATIONS).

        Each map is N(0, weight_scale^2 / fan_in), so for rows of unit mean square the
        queries and keys have O(1) entries and the default scale 1/sqrt(d_k) gives O(1)
        scores: attention rows are neither uniform nor one-hot. Biases are
        N(0, bias_scale^2). With `affine` the norms get per-feature gains 1 + 0.3 N(0, 1)
        and biases 0.3 N(0, 1) (torch-style LN); otherwise gain 1 and bias 0 (scalars).
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
        rng = np.random.default_rng(rng)

        def gaussian(shape: tuple[int, ...], fan_in: int) -> np.ndarray:
            return rng.standard_normal(shape) * (weight_scale / math.sqrt(fan_in))

        def bias(shape: tuple[int, ...]) -> np.ndarray:
            return rng.standard_normal(shape) * bias_scale

        def norm() -> tuple[Any, Any]:
            if affine:
                return 1.0 + 0.3 * rng.standard_normal(d), 0.3 * rng.standard_normal(d)
            return 1.0, 0.0

        return cls(
            wq=gaussian((heads, d, d_k), d),
            bq=bias((heads, d_k)),
            wk=gaussian((heads, d, d_k), d),
            bk=bias((heads, d_k)),
            wv=gaussian((heads, d, d_v), d),
            bv=bias((heads, d_v)),
            wo=gaussian((heads, d_v, d), heads * d_v),
            bo=bias((d,)),
            w1=gaussian((d, d_ff), d),
            b1=bias((d_ff,)),
            w2=gaussian((d_ff, d), d_ff),
            b2=bias((d,)),
            norm1=norm(),
            norm2=norm(),
            eps=eps,
            activation=activation,
        )
