"""Claim: the uniform-grid Lie scheme with dt = 1 is the standard Transformer."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from properties.claim_check import ClaimCheck
from solvers import LayerWeights, PiecewiseControls, Problem, backend, solve

Reference = Callable[[Sequence[LayerWeights], np.ndarray, str, bool], np.ndarray]

CLAIM = "Lie scheme, dt = 1, uniform grid = standard Transformer"


def check_lie_is_transformer(
    layers: Sequence[LayerWeights],
    u0: np.ndarray,
    reference: Reference,
    reference_name: str,
    *,
    norm: str = "post",
    causal: bool = False,
    precision: str = "float64",
) -> ClaimCheck:
    """Relative max-abs distance between solve(..., steps_per_unit=1) and `reference`.

    The reference (torch, or the textbook formulation) runs in float64; the tolerance is
    64 unit roundoffs of `precision` per layer, the growth of rounding errors through a
    stack whose layers are well conditioned.
    """
    bk = backend(precision)
    problem = Problem(u0, PiecewiseControls(layers), len(layers), norm=norm, causal=causal)
    got = bk.to_float64(solve(problem, backend=bk))
    expected = reference(layers, problem.u0, norm, causal)
    defect = float(np.max(np.abs(got - expected)) / np.max(np.abs(expected)))
    first = layers[0]
    return ClaimCheck(
        claim=CLAIM,
        configuration={
            "reference": reference_name,
            "precision": precision,
            "layers": len(layers),
            "tokens": problem.tokens,
            "d": first.d_model,
            "heads": first.heads,
            "d_ff": first.d_ff,
            "norm": norm,
            "eps": first.eps,
            "causal": causal,
            "per_feature_affine": first.norm1[0].ndim > 0,
        },
        defect=defect,
        tolerance=64 * len(layers) * bk.unit_roundoff,
        note="relative max-abs difference of the outputs",
    )
