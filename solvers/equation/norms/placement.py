"""Where a layer's norms sit (docs/model.md section 2): after each residual update, before
each sub-layer, or nowhere."""

from __future__ import annotations

from enum import StrEnum

from solvers.errors import InvalidInputError


class Placement(StrEnum):
    """A norm placement. Its value is the name studies and model files use ("post", "pre",
    "none"); code asks its properties, never its name."""

    POST = "post"
    PRE = "pre"
    NONE = "none"

    def __repr__(self) -> str:
        return repr(self.value)

    @property
    def constrained(self) -> bool:
        """Whether the flow lives on the constraint set of the norm that ends each layer
        (post): its field is projected onto the set's tangent space, and the methods that
        enter the set project onto it (docs/model.md section 3)."""
        return self is Placement.POST

    @property
    def normalises_inputs(self) -> bool:
        """Whether each sub-layer sees the norm of the state (pre): the field is
        A(N1(u)) + F(N2(u)) on the whole space (docs/model.md section 2)."""
        return self is Placement.PRE

    @property
    def has_norms(self) -> bool:
        """Whether the layer applies its norms at all (not "none")."""
        return self is not Placement.NONE

    def refusal(self, kind: object) -> str | None:
        """Why a flow with this placement and norm `kind` (a NormKind) does not exist, or
        None when it does: a constrained flow needs the kind's constraint set and its
        tangent projection (`NormKind.post_refusal`)."""
        return kind.post_refusal if self.constrained else None


def as_placement(value: object) -> Placement:
    """`value` (a Placement or its name) as a Placement; InvalidInputError otherwise."""
    try:
        return Placement(value)
    except (TypeError, ValueError):
        names = ", ".join(repr(p.value) for p in Placement)
        raise InvalidInputError(f"unknown norm {value!r}; allowed: {names}") from None
