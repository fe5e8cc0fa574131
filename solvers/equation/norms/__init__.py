"""Norms: where a layer's norms sit (`Placement`) and what kind they are (`NormKind`).

Every question about a norm placement or a norm kind is asked of these objects; nothing
outside this package compares one with a string (tests/test_architecture.py). A new kind
is a module here with a NormKind subclass and one entry of KINDS.
"""

from __future__ import annotations

from solvers.equation.norms.dyt import DynamicTanh
from solvers.equation.norms.kind import NormKind, Parameters
from solvers.equation.norms.layer import LayerNorm, layer_norm, project_to_s1, tangent_projection
from solvers.equation.norms.placement import Placement, as_placement
from solvers.equation.norms.rms import RMSNorm, rms_norm
from solvers.errors import InvalidInputError

KINDS: dict[str, NormKind] = {kind.name: kind for kind in (LayerNorm(), RMSNorm(), DynamicTanh())}
"""Every norm kind by name: the one source of kind names."""
LAYER = KINDS["layer"]
"""The layer norm, the default kind."""


def as_norm_kind(value: object) -> NormKind:
    """`value` (a NormKind or its name) as a registered NormKind; InvalidInputError otherwise."""
    if isinstance(value, NormKind):
        return value
    if isinstance(value, str) and value in KINDS:
        return KINDS[value]
    names = ", ".join(repr(name) for name in KINDS)
    raise InvalidInputError(f"unknown norm_kind {value!r}; allowed: {names}")


__all__ = [
    "KINDS",
    "LAYER",
    "NormKind",
    "Parameters",
    "Placement",
    "as_norm_kind",
    "as_placement",
    "layer_norm",
    "project_to_s1",
    "rms_norm",
    "tangent_projection",
]
