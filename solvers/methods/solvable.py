"""Whether a method has a flow to solve on a problem's layers (docs/limits.md sections 1 to 4)."""

from __future__ import annotations

import numpy as np

from solvers.equation.problem import Problem
from solvers.equation.weights import LayerWeights
from solvers.errors import InvalidInputError
from solvers.methods.stepping import SteppingMethod


def check_solvable(problem: Problem, method: SteppingMethod) -> None:
    """Raise InvalidInputError unless `method` can solve `problem`.

    A method that does not enter the constraint set (the Lie scheme "lie", the Transformer
    itself) steps any layers. Every other method steps the continuous flow, which for
    post-LN lives on the set of each layer's norm2 and needs scalar norms with a positive
    gain (docs/limits.md sections 1 to 3): per-feature gains or biases make the refined
    layers collapse onto fixed points of the norm maps, so there is no flow to solve
    (docs/limits.md section 4;
    convergence.limit.limit_check measures the collapse); two different norms with
    eps > 0 converge to the flow of `convergence.layer_norm_eps.lie_limit(problem)`,
    which is what to solve instead (docs/limits.md section 2).
    """
    if problem.norm.constrained and method.enters_constraint_set:
        for n, layer in enumerate(problem.controls.all_layers()):
            _check_flow_norms(n, layer, method.name)


def _check_flow_norms(n: int, layer: LayerWeights, method: str) -> None:
    for name in ("norm1", "norm2"):
        gain, bias = (np.ravel(part) for part in getattr(layer, name))
        if np.ptp(gain) or np.ptp(bias):
            raise InvalidInputError(
                f"layer {n} {name} has a per-feature gain or bias: the refined post-LN layers "
                "collapse onto fixed points of the norm maps, so method "
                f"{method!r} has no flow to solve (docs/limits.md section 4; measure the "
                "collapse with convergence.limit.limit_check, or solve with 'lie', the "
                "Transformer itself)"
            )
        if gain[0] <= 0:
            raise InvalidInputError(
                f"layer {n} {name} has gain {float(gain[0])!r} <= 0: the norm is not a "
                f"projection onto a constraint set, so method {method!r} has no flow to solve"
            )
    same = all(np.array_equal(a, b) for a, b in zip(layer.norm1, layer.norm2, strict=True))
    if not same and layer.eps:
        raise InvalidInputError(
            f"layer {n} has two different norms and eps = {layer.eps!r}: its limit is the flow "
            "on the shrunken sets (docs/limits.md section 2); solve "
            "convergence.layer_norm_eps.lie_limit(problem) with method "
            f"{method!r} instead"
        )
