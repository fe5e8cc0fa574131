"""How a stack's weights vary over depth (docs/depth.md sections 1 and 4, docs/networks.md
section 3).

A layer's weights theta_k as one vector: every map and bias of LayerWeights.map_names and
both norms' parameters as per-feature vectors. `unscaled` divides a depth-scaled member's
folded step h back out of its attention output map and bias and its FFN's down map and
bias; `weight_increments` gives the largest relative increment
I = max_k |theta_{k+1} - theta_k| / max_k |theta_k| and the total variation
V = sum_k |theta_{k+1} - theta_k| / max_k |theta_k| (Euclidean norms); `depth_change`
the increment of each layer relative to that layer, |theta_{k+1} - theta_k| / |theta_k|.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

import numpy as np

from solvers.equation.weights import LayerWeights
from solvers.errors import InvalidInputError

FOLDED = ("wo", "bo", "w2", "b2")
"""The maps and biases a residual branch scaled by h multiplies by h: the attention output
map and bias, the FFN's down map and bias (docs/depth.md section 1)."""


@dataclass(frozen=True)
class Increments:
    """A stack's largest relative increment and its total variation over depth (module
    docstring); both None for a single layer, which has no increment."""

    largest: float | None
    variation: float | None


def unscaled(layers: Sequence[LayerWeights], h: float) -> list[LayerWeights]:
    """The layers with FOLDED divided by the folded step h > 0 (docs/depth.md section 1)."""
    if not (np.isfinite(h) and h > 0):
        raise InvalidInputError(f"the folded step h must be finite and > 0, got {h!r}")
    return [replace(w, **{name: getattr(w, name) / h for name in FOLDED}) for w in layers]


def weight_vector(w: LayerWeights) -> np.ndarray:
    """All of a layer's weights as one vector: its maps and biases, then both norms'
    parameters broadcast to per-feature vectors (module docstring)."""
    parts = [getattr(w, name) for name in w.map_names]
    parts += [np.broadcast_to(v, (w.d_model,)) for v in (*(w.norm1 or ()), *(w.norm2 or ()))]
    return np.concatenate([np.ravel(p) for p in parts])


def weight_increments(layers: Sequence[LayerWeights]) -> Increments:
    """I and V of the layers as given (module docstring): None for a single layer; 0 for
    a stack of zero weights that does not change."""
    vectors = [weight_vector(w) for w in layers]
    if len(vectors) < 2:
        return Increments(None, None)
    steps = [float(np.linalg.norm(b - a)) for a, b in pairwise(vectors)]
    size = max(float(np.linalg.norm(v)) for v in vectors)
    if size == 0:
        return Increments(0.0, 0.0)
    return Increments(max(steps) / size, sum(steps) / size)


def depth_change(layers: Sequence[LayerWeights]) -> list[float]:
    """|theta_{k+1} - theta_k| / |theta_k| for consecutive layers (module docstring)."""
    vectors = [weight_vector(w) for w in layers]
    return [float(np.linalg.norm(b - a) / np.linalg.norm(a)) for a, b in pairwise(vectors)]
