"""Tensors and the pieces every Hugging Face reader shares: named float64 arrays checked
on the way out, activations, heads, linear maps and norms in the suite's right-acting
convention (docs/networks.md section 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from solvers.equation.weights import LayerWeights
from solvers.errors import InvalidInputError
from solvers.io.torch_modules import torch_style_norm

HF_ACTIVATIONS = {
    "gelu": "gelu",
    "relu": "relu",
    "gelu_new": "gelu-tanh",
    "gelu_pytorch_tanh": "gelu-tanh",
    "silu": "silu",
}
"""Hugging Face activation names and the suite's (docs/model.md section 1)."""


class Tensors:
    """Named float64 arrays of one source, checked on the way out: a missing name, a shape
    other than expected or a non-finite entry is a one-line InvalidInputError naming the
    source and the name."""

    def __init__(self, source: str, arrays: Mapping[str, Any], prefix: str = "") -> None:
        self.source, self.arrays, self.prefix = source, arrays, prefix

    def __call__(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        key = self.prefix + name
        if key not in self.arrays:
            raise InvalidInputError(f"{self.source}: tensor {key!r} is missing")
        array = np.asarray(self.arrays[key], dtype=np.float64)
        if array.shape != shape:
            raise InvalidInputError(
                f"{self.source}: tensor {key!r} has shape {array.shape}, expected {shape}"
            )
        if not np.isfinite(array).all():
            raise InvalidInputError(f"{self.source}: tensor {key!r} has NaN or infinite entries")
        return array

    def has(self, name: str) -> bool:
        return self.prefix + name in self.arrays


def activation_name(config: Mapping[str, Any], key: str, source: str, default: str = "gelu") -> str:
    """The suite's name of the configuration's activation `key` (`default`, the model
    type's own default in transformers, when the key is absent)."""
    name = config.get(key, default)
    if name not in HF_ACTIVATIONS:
        raise InvalidInputError(
            f"{source}: activation {key} = {name!r} is not supported "
            f"({', '.join(HF_ACTIVATIONS)} are)"
        )
    return HF_ACTIVATIONS[name]


def heads_of(config: Mapping[str, Any], d: int, key: str, source: str) -> int:
    heads = int(config[key])
    if d % heads:
        raise InvalidInputError(f"{source}: hidden size {d} is not a multiple of {heads} heads")
    return heads


def per_head(matrix: np.ndarray, heads: int) -> np.ndarray:
    """(d, heads d_k) acting on the right -> (heads, d, d_k)."""
    d, width = matrix.shape
    return matrix.reshape(d, heads, width // heads).transpose(1, 0, 2)


def layer_of(
    q: tuple[np.ndarray, np.ndarray],
    k: tuple[np.ndarray, np.ndarray],
    v: tuple[np.ndarray, np.ndarray],
    o: tuple[np.ndarray, np.ndarray],
    ffn: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    norms: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    heads: int,
    eps: float,
    activation: str,
    kv_heads: int | None = None,
    **parts: Any,
) -> LayerWeights:
    """LayerWeights from right-acting (weight, bias) pairs: q (d, H d_k), k and v
    (d, H_kv d_k) with H_kv = `kv_heads` (default H), o (H d_k, d), the FFN's (W1, b1, W2,
    b2) and the norms' per-feature (gain, bias); `parts` are further LayerWeights fields
    (a gate, the norm kind, the rotary base: docs/model.md section 7)."""
    d, width = q[0].shape
    d_k, kv_heads = width // heads, heads if kv_heads is None else kv_heads
    w1, b1, w2, b2 = ffn
    return LayerWeights(
        wq=per_head(q[0], heads),
        bq=q[1].reshape(heads, d_k),
        wk=per_head(k[0], kv_heads),
        bk=k[1].reshape(kv_heads, d_k),
        wv=per_head(v[0], kv_heads),
        bv=v[1].reshape(kv_heads, d_k),
        wo=o[0].reshape(heads, d_k, d),
        bo=o[1],
        w1=w1,
        b1=b1,
        w2=w2,
        b2=b2,
        norm1=torch_style_norm(*norms[0]),
        norm2=torch_style_norm(*norms[1]),
        eps=eps,
        activation=activation,
        **parts,
    )


def linear(t: Tensors, name: str, d_in: int, d_out: int, bias: bool = True):
    """A torch Linear (weight (out, in)) as a right-acting (W, b)."""
    weight = t(f"{name}.weight", (d_out, d_in)).T
    return weight, t(f"{name}.bias", (d_out,)) if bias else np.zeros(d_out)


def norm_pair(t: Tensors, name: str, d: int) -> tuple[np.ndarray, np.ndarray]:
    return t(f"{name}.weight", (d,)), t(f"{name}.bias", (d,))


@dataclass(frozen=True)
class EncoderNames:
    """The tensor names (before .weight and .bias) of one encoder layer written with torch
    Linear maps and LayerNorms: the query, key, value and output maps, the FFN's up and
    down maps, and the norms after (post-LN) or before (pre-LN) the attention and the FFN."""

    q: str
    k: str
    v: str
    o: str
    up: str
    down: str
    norm1: str
    norm2: str


def encoder_layer(
    t: Tensors,
    names: EncoderNames,
    dims: tuple[int, int, int],
    eps: float,
    activation: str,
    qkv_bias: bool = True,
) -> LayerWeights:
    """The LayerWeights of an encoder layer of width d, FFN width d_ff and H heads
    (`dims` = (d, d_ff, H)) from its tensors; without `qkv_bias` the query, key and value
    maps have none (zero biases)."""
    d, d_ff, heads = dims
    q, k, v = (linear(t, name, d, d, qkv_bias) for name in (names.q, names.k, names.v))
    ffn = (*linear(t, names.up, d, d_ff), *linear(t, names.down, d_ff, d))
    norms = (norm_pair(t, names.norm1, d), norm_pair(t, names.norm2, d))
    return layer_of(q, k, v, linear(t, names.o, d, d), ffn, norms, heads, eps, activation)
