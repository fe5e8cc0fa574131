"""The table of stepping methods by name, and the check that a method can solve a problem."""

from __future__ import annotations

import numpy as np

from solvers.errors import InvalidInputError
from solvers.problem import Problem
from solvers.reference import Reference
from solvers.schemes import LIE, SPLITTINGS, UNSPLIT, SteppingMethod
from solvers.validation import choice

METHODS: dict[str, SteppingMethod] = {
    method.name: method
    for method in (
        *SPLITTINGS,
        *UNSPLIT,
        Reference(),
        Reference(name="reference-no-events", events=False),
    )
}


def resolve_method(method: str | SteppingMethod) -> SteppingMethod:
    """The method called `method` (a SteppingMethod is returned as it is)."""
    if isinstance(method, SteppingMethod):
        return method
    return METHODS[choice("method", method, tuple(METHODS))]


def checked_method(problem: Problem, method: str | SteppingMethod) -> SteppingMethod:
    """The method (resolved from its name) if it can solve `problem`.

    A post-LN flow lives on one constraint set per layer, so every method but the Lie
    scheme (the Transformer itself, which alternates between two) needs norm1 == norm2.
    """
    if not isinstance(problem, Problem):
        raise InvalidInputError(f"problem must be a Problem, got {type(problem).__name__}")
    method = resolve_method(method)
    if problem.norm == "post" and method is not LIE:
        for n, layer in enumerate(problem.controls.all_layers()):
            same = all(np.array_equal(a, b) for a, b in zip(layer.norm1, layer.norm2, strict=True))
            if not same:
                raise InvalidInputError(
                    f"layer {n}: the post-LN flow of method {method.name!r} lives on one "
                    "constraint set per layer, so norm1 and norm2 must be equal (only the "
                    "Lie scheme, the Transformer itself, alternates between two)"
                )
    return method
