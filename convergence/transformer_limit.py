"""How far a Transformer is from its own time-step limit, as the weights grow.

A stack of L encoder layers is the Lie scheme at dt = 1 on [0, L] (docs/model.md section 2;
the distance from the limit: docs/limits.md section 6).
Its time-step limit is the flow of `lie_limit(problem)`: the same controls, with eps > 0
post-LN norms replaced by the projection onto the shrunken sphere that LN_eps fixes
(convergence.layer_norm_eps). `transformer_limit_distance` scales every attention and FFN
map and bias by s (LayerWeights.scaled: the field is s times the output biases plus s^2
times the rest), and measures for each s the distance between the Transformer's output
(and every layer's output) and the limit flow at the same times, computed by the
extrapolation reference.

The reference's own error is measured too: the limit is solved at `reference_steps`
and twice that per unit (scaled with s^2, the field's size), and their difference is
reported; a distance is only meaningful well above it, and it is the precision floor
of the growth fit. The growth with s is fitted as C s^q by `estimate_order` (s in the
role of the step size). As s -> 0 the distance is of first order in the field's size
|f| when the input is off the constraint set (a raw embedding): the Transformer's first
sub-step moves P(u0 + f(u0)) by DP(u0) f(u0), the radial factor R / |u0 - mean| times
the tangent part of f at u0, where the flow moves P(u0) by the tangent part of f at
P(u0). From an input on the set the first-order terms agree and the Lie scheme's local
error |f| (|f| + |f'|) remains. With |f| ~ s (non-zero output biases b_o, b_2) or
|f| ~ s^2 (zero ones), q is 1 or 2 off the set and 2 or 4 on it, reached only at small
s; for large s the distance saturates at the size of the constraint set, and the
estimator drops those levels as pre-asymptotic.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from convergence.layer_norm_eps import lie_limit
from convergence.order import OrderEstimate, estimate_order
from solvers import PiecewiseControls, Problem, backend, solve_layers
from solvers.backends import Backend
from solvers.errors import InvalidInputError
from solvers.provenance import versions
from solvers.weights import LayerWeights


@dataclass(frozen=True)
class TransformerLimitDistance:
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
    versions: dict[str, str]
    wall_time: float


def transformer_limit_distance(
    layers: Sequence[LayerWeights],
    u0: np.ndarray,
    scales: Sequence[float],
    *,
    norm: str = "post",
    precision: str | Backend = "float64",
    reference_steps: int = 4,
    expected: float | None = None,
) -> TransformerLimitDistance:
    """Distance of the Transformer `layers` (scaled by each s) from its time-step limit.

    `layers` come from `from_torch` or `LayerWeights.random`; u0 is the input (N, d) or
    (B, N, d). `expected` is the growth order q to test (see the module docstring).
    The limit is solved at ceil(reference_steps max(1, s^2)) and twice that many steps
    per unit.
    """
    scales = [float(s) for s in scales]
    if len(scales) < 3 or not all(math.isfinite(s) and s > 0 for s in scales):
        raise InvalidInputError(
            f"scales must be at least 3 positive numbers (to fit the growth), got {scales}"
        )
    if len(set(scales)) != len(scales):
        raise InvalidInputError(f"scales must be distinct, got {scales}")
    started = time.perf_counter()
    bk = backend(precision)
    distance, frobenius, per_layer, reference_error, steps_used = [], [], [], [], []
    for s in scales:
        problem = Problem(u0, PiecewiseControls([w.scaled(s) for w in layers]), len(layers), norm)
        limit = lie_limit(problem)
        steps = max(1, math.ceil(reference_steps * max(1.0, s * s)))
        transformer = solve_layers(problem, "lie", 1, bk)
        coarse, fine = (solve_layers(limit, "reference", m, bk) for m in (steps, 2 * steps))
        with bk.active():
            gap = np.abs(bk.to_float64(transformer - fine))
            own = np.abs(bk.to_float64(fine - coarse)).max()
            limit_size = np.linalg.norm(bk.to_float64(fine[-1]))
        per_layer.append(gap.reshape(len(gap), -1).max(axis=1).tolist())
        distance.append(per_layer[-1][-1])
        frobenius.append(float(np.linalg.norm(gap[-1]) / limit_size))
        reference_error.append(float(own))
        steps_used.append(2 * steps)
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
        versions=versions(),
        wall_time=time.perf_counter() - started,
    )
