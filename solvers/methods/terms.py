"""The pieces a splitting is assembled from, as objects: the terms of the split field
(attention, feed-forward) with the constraint set each sub-step lands on, the sub-field a
sub-solver steps (ambient or tangent), and a sub-step (term, fraction of h, whether its
clock advances) (docs/schemes.md sections 1 and 5)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from solvers.backends import Array
from solvers.equation.flow import LayerFlow

TermField = Callable[[LayerFlow, int, Array, Array, Array | None], Array]
"""(flow, layer n, t, v, pattern) -> the term's value at (t, v)."""


@dataclass(frozen=True)
class Term:
    """One operator of the split field and the norm (1 or 2) whose constraint set its
    sub-step is projected onto (post-LN)."""

    name: str
    evaluate: TermField
    lands_on: int


def _attention(flow: LayerFlow, n: int, t: Array, v: Array, pattern: Array | None) -> Array:
    return flow.attention_term(n, t, v)


def _layer_ffn(flow: LayerFlow, n: int, t: Array, v: Array, pattern: Array | None) -> Array:
    return flow.ffn_term(n, t, v, pattern)


def _flow_ffn(flow: LayerFlow, n: int, t: Array, v: Array, pattern: Array | None) -> Array:
    return flow.field_ffn_term(n, t, v, pattern)


LAYER_ATTENTION = Term("attention", _attention, lands_on=1)
"""The Transformer's attention sub-step: A, then P1 (docs/model.md section 2)."""
LAYER_FFN = Term("ffn", _layer_ffn, lands_on=2)
"""The Transformer's feed-forward sub-step: F of the layer's own input, then P2."""
ATTENTION = Term("attention", _attention, lands_on=2)
"""The flow's attention term; every sub-step of the flow lands on norm2's set."""
FFN = Term("ffn", _flow_ffn, lands_on=2)
"""The flow's feed-forward term (docs/limits.md section 3)."""


@dataclass(frozen=True)
class SubField:
    """What a sub-solver steps: the term itself (ambient) or its tangent projection onto
    the constraint set, with the set's motion when the clock advances (tangent)."""

    name: str
    tangent: bool

    def restrict(
        self, flow: LayerFlow, n: int, t: Array, v: Array, g: Array, moving: bool = True
    ) -> Array:
        """g, or Pi_T(v) g plus the set's motion (LayerFlow.tangent)."""
        return flow.tangent(n, t, v, g, moving=moving) if self.tangent else g


AMBIENT = SubField("ambient", tangent=False)
TANGENT = SubField("tangent", tangent=True)
SUB_FIELDS = (AMBIENT, TANGENT)


@dataclass(frozen=True)
class SubStep:
    """Step `term` over `fraction` of h; its clock advances with it or stays frozen at the
    sub-step's start."""

    term: Term
    fraction: Fraction
    advances: bool
