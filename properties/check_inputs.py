"""The inputs the operator checks share, validated: a layer, a state, and one layer's
problem, which carries the attention's positional context (causal mask, token weights) and
builds its score bias B (solvers.equation.problem.Problem.score_bias; docs/model.md section 1)."""

from __future__ import annotations

import numpy as np

from solvers import LayerWeights, PiecewiseControls, Problem
from solvers.errors import InvalidInputError
from solvers.validation import finite_array


def checked_layer(layer: object) -> LayerWeights:
    """`layer` if it is a LayerWeights (which validated its weights on construction)."""
    if not isinstance(layer, LayerWeights):
        raise InvalidInputError(f"layer must be a LayerWeights, got {type(layer).__name__}")
    return layer


def checked_state(name: str, value: object, d: int) -> np.ndarray:
    """A finite float64 state of shape (N, d) or (B, N, d) with N, B >= 1."""
    u = finite_array(name, value)
    if u.ndim not in (2, 3) or u.shape[-1] != d or 0 in u.shape:
        raise InvalidInputError(f"{name} must have shape (N, {d}) or (B, N, {d}), got {u.shape}")
    return u


def one_layer_problem(
    u: np.ndarray,
    layer: LayerWeights,
    norm: str = "post",
    causal: bool = False,
    token_weights: np.ndarray | None = None,
) -> Problem:
    """The flow of `layer` from u over [0, 1]: its score bias is log w^x per key (token
    weights w^x) and -inf above the diagonal if causal, None without either."""
    return Problem(u, PiecewiseControls([layer]), 1.0, norm, bool(causal), token_weights)


def checked_confidence(value: object) -> float:
    """A confidence level of an interval, in (0, 1)."""
    number = float(finite_array("confidence", value, ()))
    if not 0 < number < 1:
        raise InvalidInputError(f"confidence must lie in (0, 1), got {number!r}")
    return number
