"""What eps > 0 in a torch-style layer norm does to the time-step limit (docs/limits.md
section 2).

`lie_limit` builds the limit problem (each post-LN norm replaced by the projection onto
the shrunken set the Lie scheme's rows settle on under LN_eps), and
`eps_limit_study` measures the Lie scheme's order towards it for each eps and the
distance of that flow from the eps = 0 flow against eps. Configurations without such a limit raise
UndefinedOperationError.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from convergence.order import OrderEstimate, estimate_order
from convergence.time_step import MethodConvergence, time_step_study
from solvers import PiecewiseControls, Problem, backend, solve_layers
from solvers.backends import Backend
from solvers.equation.weights import LayerWeights
from solvers.errors import InvalidInputError, UndefinedOperationError
from solvers.results.provenance import Provenance, timed


def _scalar_norm(n: int, name: str, pair: tuple[np.ndarray, np.ndarray]) -> tuple[float, float]:
    """(gain, bias) of a norm whose gain is one positive number and bias one number."""
    gain, bias = (np.ravel(part) for part in pair)
    if np.ptp(gain) or np.ptp(bias):
        raise UndefinedOperationError(
            f"layer {n} {name} has per-feature gain or bias: the LN map is not idempotent and "
            "the refined Lie scheme has no meaningful time-step limit (see convergence.limit)"
        )
    if gain[0] <= 0:
        raise UndefinedOperationError(
            f"layer {n} {name} has gain {float(gain[0])!r} <= 0: the LN map is not idempotent"
        )
    return float(gain[0]), float(bias[0])


def _limit_layer(n: int, layer: LayerWeights) -> LayerWeights:
    """The layer with each norm replaced by the projection onto the set the Lie scheme's
    states settle on (docs/limits.md section 2): with eps > 0 the radius r_k of the rows
    after norm k solves r1^2 = s1^2 r2^2 / (r2^2 + eps), r2^2 = s2^2 r1^2 / (r1^2 + eps)
    (each norm sees the variance the other one left), that is
    r1^2 = s1^2 - eps (s1^2 + eps) / (s2^2 + eps) and symmetrically; with one norm per
    layer r^2 = s^2 - eps."""
    (s1, a1), (s2, a2) = (_scalar_norm(n, name, getattr(layer, name)) for name in NORMS)
    eps = layer.eps
    radii = (
        s1 * s1 - eps * (s1 * s1 + eps) / (s2 * s2 + eps),
        s2 * s2 - eps * (s2 * s2 + eps) / (s1 * s1 + eps),
    )
    for name, square in zip(NORMS, radii, strict=True):
        if square <= 0:
            raise UndefinedOperationError(
                f"layer {n} {name}: with eps = {eps!r} the set of rows LN_eps leaves fixed "
                f"is empty (its variance would be {square!r} <= 0)"
            )
    norm1, norm2 = ((math.sqrt(r), a) for r, a in zip(radii, (a1, a2), strict=True))
    return dataclasses.replace(layer, norm1=norm1, norm2=norm2, eps=0.0)


NORMS = ("norm1", "norm2")


def lie_limit(problem: Problem) -> Problem:
    """The problem whose flow is the Lie scheme's time-step limit (module docstring).

    Post-LN with scalar norms (the two norms of a layer may differ): eps -> 0 and each
    gain sigma2 -> sqrt(sigma2^2 - eps), the two sets shrinking separately
    (docs/limits.md sections 2 and 3). Pre-LN and no norm: the problem itself (eps only
    changes a smooth field).
    """
    if not problem.norm.constrained:
        return problem
    if not isinstance(problem.controls, PiecewiseControls):
        raise InvalidInputError(
            "the Lie limit of post-LN layers is built for PiecewiseControls (a Transformer "
            "stack), got SmoothControls"
        )
    layers = [_limit_layer(n, w) for n, w in enumerate(problem.controls.layers)]
    return dataclasses.replace(problem, controls=PiecewiseControls(layers))


def with_eps(problem: Problem, eps: float) -> Problem:
    """`problem` with every layer norm's eps set to `eps` (piecewise controls)."""
    if not isinstance(problem.controls, PiecewiseControls):
        raise InvalidInputError("eps studies need PiecewiseControls, got SmoothControls")
    layers = [dataclasses.replace(w, eps=eps) for w in problem.controls.layers]
    return dataclasses.replace(problem, controls=PiecewiseControls(layers))


@dataclass(frozen=True)
class EpsLimitStudy(Provenance):
    """Per eps: the Lie scheme's convergence towards its limit, and the limit's distance
    (max-abs at the final time, and per layer boundary) from the eps = 0 flow."""

    eps: list[float]
    convergence: list[MethodConvergence]
    distance: list[float]
    distance_per_layer: list[list[float]]
    distance_fit: OrderEstimate
    reference: str
    precision: str


@timed
def eps_limit_study(
    problem: Problem,
    eps_values: Sequence[float],
    steps_per_unit: Sequence[int],
    *,
    precision: str | Backend = "float64",
    reference_steps: int = 8,
) -> EpsLimitStudy:
    """The Lie scheme with LN_eps, for each eps, against the shrunken-set flow; and that
    flow's distance from the eps = 0 flow, fitted as C eps^q (expected q = 1).

    `problem` is post-LN with scalar norms; its own eps is replaced by each value.
    Both flows come from the extrapolation reference at `reference_steps` per unit.
    """
    if not problem.norm.constrained:
        raise InvalidInputError(f"eps studies are for post-LN problems, got norm {problem.norm!r}")
    eps_values = [float(e) for e in eps_values]
    if len(eps_values) < 3 or not all(math.isfinite(e) and e > 0 for e in eps_values):
        raise InvalidInputError(
            f"eps_values must be at least 3 positive numbers (to fit the power), got {eps_values}"
        )
    bk = backend(precision)
    eps0 = solve_layers(lie_limit(with_eps(problem, 0.0)), "reference", reference_steps, bk)
    convergence, distance, per_layer = [], [], []
    for eps in eps_values:
        studied = with_eps(problem, eps)
        limit = lie_limit(studied)
        study = time_step_study(
            studied,
            ["lie"],
            steps_per_unit,
            limit=limit,
            expected={"lie": 1.0},
            precision=bk,
            reference_steps=reference_steps,
        )
        convergence.append(study.methods[0])
        shrunken = solve_layers(limit, "reference", reference_steps, bk)
        with bk.active():
            gap = np.abs(bk.to_float64(shrunken - eps0)).reshape(len(eps0), -1).max(axis=1)
        distance.append(float(gap[-1]))
        per_layer.append(gap.tolist())
    return EpsLimitStudy(
        eps=eps_values,
        convergence=convergence,
        distance=distance,
        distance_per_layer=per_layer,
        distance_fit=estimate_order(eps_values, distance, expected=1.0),
        reference=f"extrapolation reference, {reference_steps} steps per unit",
        precision=repr(bk),
    )
