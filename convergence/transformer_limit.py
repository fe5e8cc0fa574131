"""How far a Transformer is from its own time-step limit, as the weights grow.

`transformer_limit_distance` scales every attention and FFN map and bias by s and
measures, for each s, the distance between the dt = 1 network's outputs (every layer's)
and its time-step limit (`lie_limit`), solved by the error-controlled reference, whose
error, assessed against a second run (docs/schemes.md section 7), is reported beside
the distance; the growth is fitted as C s^q
(docs/limits.md section 6 derives q).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from convergence.layer_norm_eps import lie_limit
from convergence.order import OrderEstimate, estimate_order
from solvers import PiecewiseControls, Problem, backend, solve_layers, solve_reference
from solvers.backends import Backend
from solvers.equation.weights import LayerWeights
from solvers.errors import InvalidInputError
from solvers.results.provenance import Provenance, timed


@dataclass(frozen=True)
class TransformerLimitDistance(Provenance):
    """Per weight scale: the dt = 1 Transformer's distance from its time-step limit."""

    scales: list[float]
    distance: list[float]
    relative_frobenius: list[float]
    distance_per_layer: list[list[float]]
    reference_error: list[float]
    reference_steps: list[int]
    growth: OrderEstimate
    norm: str
    precision: str


@timed
def transformer_limit_distance(
    layers: Sequence[LayerWeights],
    u0: np.ndarray,
    scales: Sequence[float],
    *,
    norm: str,
    precision: str | Backend = "float64",
    reference_steps: int = 4,
    expected: float | None = None,
) -> TransformerLimitDistance:
    """Distance of the Transformer `layers` (scaled by each s) from its time-step limit.

    `layers` come from `from_torch` or `LayerWeights.random`; u0 is the input (N, d) or
    (B, N, d). `norm` is the layers' placement ("post", "pre", "none"), with no default:
    the same weights read as post-LN or pre-LN are different networks (for a torch
    encoder, `solvers.io.torch_modules.torch_norm_placement`). `expected` is the growth order q
    to test (see the module docstring). The limit is solved by solve_reference in steps of
    at most 1 / ceil(reference_steps max(1, s^2)) (its error does not depend on them).
    """
    scales = [float(s) for s in scales]
    if len(scales) < 3 or not all(math.isfinite(s) and s > 0 for s in scales):
        raise InvalidInputError(
            f"scales must be at least 3 positive numbers (to fit the growth), got {scales}"
        )
    if len(set(scales)) != len(scales):
        raise InvalidInputError(f"scales must be distinct, got {scales}")
    bk = backend(precision)
    distance, frobenius, per_layer, reference_error, steps_used = [], [], [], [], []
    for s in scales:
        problem = Problem(u0, PiecewiseControls([w.scaled(s) for w in layers]), len(layers), norm)
        limit = lie_limit(problem)
        steps = max(1, math.ceil(reference_steps * max(1.0, s * s)))
        transformer = solve_layers(problem, "lie", 1, bk)
        solution = solve_reference(limit, backend=bk, steps_per_unit=steps, assess=True)
        fine = solution.states
        with bk.active():
            gap = np.abs(bk.to_float64(transformer - fine))
            limit_size = np.linalg.norm(bk.to_float64(fine[-1]))
        own = max(solution.error)
        per_layer.append(gap.reshape(len(gap), -1).max(axis=1).tolist())
        distance.append(per_layer[-1][-1])
        frobenius.append(float(np.linalg.norm(gap[-1]) / limit_size))
        reference_error.append(float(own))
        steps_used.append(steps)
    return TransformerLimitDistance(
        scales=scales,
        distance=distance,
        relative_frobenius=frobenius,
        distance_per_layer=per_layer,
        reference_error=reference_error,
        reference_steps=steps_used,
        growth=estimate_order(scales, distance, expected=expected, floor=max(reference_error)),
        norm=norm,
        precision=repr(bk),
    )
