"""BackendLayer: one layer's weights rounded into a backend and packed for the operators.

Packing puts every query head's columns, then every key-value head's key and value
columns, into one matrix [Wq_1 .. Wq_H | Wk_1 .. Wk_Hkv | Wv_1 .. Wv_Hkv] so that one
product U @ w_qkv gives them all (the layout of torch's in_proj_weight, transposed, with
H_kv = H); w_o stacks Wo_1 .. Wo_H. The decoder parts of docs/model.md section 7 travel
with it: the norm kind, the gate map of a gated FFN, the rotary base and linear factor.
"""

from __future__ import annotations

from dataclasses import dataclass

from solvers.backends import Array
from solvers.equation.norms import LAYER, NormKind


def decoder_parts(
    norm_kind: NormKind, gated: bool, rotary: bool, heads: int, kv_heads: int
) -> list[str]:
    """The parts beyond docs/model.md section 1 a layer uses (section 7's, and a norm kind
    other than LN), named for messages that refuse them (an empty list: a layer of
    section 1)."""
    named = (
        (norm_kind.extension, norm_kind.title),
        (gated, "a gated FFN"),
        (rotary, "rotary positions"),
        (kv_heads != heads, "shared key-value heads"),
    )
    return [name for used, name in named if used]


@dataclass(frozen=True)
class BackendLayer:
    """One layer's weights in a backend (see the module docstring for the packing).

    `norm1`, `norm2` are the norms' parameters in the order of `norm_kind.parameters`;
    `w_gate`, `b_gate` are None for an ungated FFN; `rope` is None or (theta, factor), the
    rotary base and linear scaling factor as float64 numbers (the tables are built at the
    working precision from the token positions by the flow, solvers.equation.rotary).
    """

    heads: int
    kv_heads: int
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
    norm1: tuple[Array, ...]
    norm2: tuple[Array, ...]
    eps: Array
    scale: Array
    activation: str = "relu"
    w_gate: Array | None = None
    b_gate: Array | None = None
    norm_kind: NormKind = LAYER
    rope: tuple[float, float] | None = None

    STATIC = ("heads", "kv_heads", "d_k", "d_v", "eps", "activation", "norm_kind", "rope")
    """The fields that are not interpolated between keyframes (they must agree)."""

    @property
    def decoder_parts(self) -> list[str]:
        return decoder_parts(
            self.norm_kind,
            self.w_gate is not None,
            self.rope is not None,
            self.heads,
            self.kv_heads,
        )
