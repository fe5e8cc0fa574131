"""Unit directions in initial-data space and in weight space, and the perturbed weights.

The directions along which continuous dependence is measured (docs/well-posedness.md
section 4): given ones are checked and normalised, missing ones drawn as unit Gaussians.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np

from solvers import LayerWeights, PiecewiseControls
from solvers.equation.weights import MAPS
from solvers.errors import InvalidInputError
from solvers.validation import finite_array

PERTURBED_ARRAYS = MAPS
"""The weights perturbed in the control study (norms, eps and the attention scale are kept)."""

ControlDirection = Sequence[Mapping[str, np.ndarray]]
"""One direction in weight space: per layer, the change of each perturbed array."""


def initial_directions(
    given: Sequence[np.ndarray] | None,
    count: int,
    shape: tuple[int, ...],
    rng: np.random.Generator,
) -> list[np.ndarray]:
    """The `given` directions (arrays of u0's shape), or `count` Gaussian ones, of norm 1."""
    if given is None:
        raw = [rng.standard_normal(shape) for _ in range(count)]
    else:
        raw = [finite_array(f"initial direction {j}", x, shape) for j, x in enumerate(given)]
        if not raw:
            raise InvalidInputError("initial_directions must hold at least one direction, got none")
    for j, x in enumerate(raw):
        if not np.linalg.norm(x) > 0:
            raise InvalidInputError(f"initial direction {j} is zero")
    return [x / np.linalg.norm(x) for x in raw]


def _checked_control_direction(
    j: int, direction: ControlDirection, layers: Sequence[LayerWeights]
) -> list[dict[str, np.ndarray]]:
    if len(direction) != len(layers):
        raise InvalidInputError(
            f"control direction {j} must give one mapping per layer ({len(layers)}), "
            f"got {len(direction)}"
        )
    entry = []
    for n, (changes, w) in enumerate(zip(direction, layers, strict=True)):
        unknown = set(changes) - set(PERTURBED_ARRAYS)
        if unknown:
            raise InvalidInputError(
                f"control direction {j} layer {n}: unknown weights {sorted(unknown)}; "
                f"allowed: {', '.join(PERTURBED_ARRAYS)}"
            )
        entry.append(
            {
                name: finite_array(
                    f"control direction {j} layer {n} {name}", value, getattr(w, name).shape
                )
                for name, value in changes.items()
            }
        )
    return entry


def control_directions(
    given: Sequence[ControlDirection] | None,
    count: int,
    layers: Sequence[LayerWeights],
    arrays: Sequence[str],
    rng: np.random.Generator,
) -> list[list[dict[str, np.ndarray]]]:
    """The `given` directions, or `count` Gaussian ones in the weights `arrays`, each of
    Frobenius norm 1 over all its layers and arrays."""
    if given is None:
        raw = [
            [{name: rng.standard_normal(getattr(w, name).shape) for name in arrays} for w in layers]
            for _ in range(count)
        ]
    else:
        raw = [_checked_control_direction(j, d, layers) for j, d in enumerate(given)]
        if not raw:
            raise InvalidInputError("control_directions must hold at least one direction, got none")
    unit = []
    for j, direction in enumerate(raw):
        size = math.sqrt(
            sum(float(np.sum(x * x)) for changes in direction for x in changes.values())
        )
        if not size > 0:
            raise InvalidInputError(f"control direction {j} is zero")
        unit.append([{k: x / size for k, x in changes.items()} for changes in direction])
    return unit


def weights_size(layers: Sequence[LayerWeights], arrays: Sequence[str]) -> float:
    """|theta|: the Frobenius norm of the weights `arrays` over every layer."""
    return math.sqrt(sum(float(np.sum(getattr(w, name) ** 2)) for w in layers for name in arrays))


def perturbed_controls(
    controls: PiecewiseControls, direction: Sequence[Mapping[str, np.ndarray]], step: float
) -> PiecewiseControls:
    """The weights theta + step D for the direction D."""
    return PiecewiseControls(
        [
            dataclasses.replace(w, **{k: getattr(w, k) + step * x for k, x in changes.items()})
            for w, changes in zip(controls.layers, direction, strict=True)
        ]
    )
