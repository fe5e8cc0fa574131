"""Claim: the paper's six sub-steps equal the post-LN Lie layer at dt = 1, exactly when
eps = 0 (docs/model.md section 2)."""

from __future__ import annotations

import numpy as np

from properties.claim_check import ClaimCheck, largest_magnitude
from solvers import LayerWeights, backend
from solvers.backends import Backend
from solvers.methods.transformer_layer import lie_step, paper_six_substeps

CLAIM = "six sub-steps (FFN as I + W', halving) = post-LN layer"


def check_six_substeps(
    layer: LayerWeights, u: np.ndarray, precision: str | Backend = "float64"
) -> ClaimCheck:
    """Relative max-abs distance between `paper_six_substeps` and the post-LN Lie step, dt = 1.

    Equal in exact arithmetic when both norms are projections (P(cV) = P(V) absorbs the
    halving); the tolerance is 64 unit roundoffs of `precision`. With eps > 0 the halving
    shrinks the variance that eps is added to, and the measured defect is that effect.
    """
    bk = backend(precision)
    with bk.active():
        w = layer.on(bk)
        state = bk.asarray(u)
        post = lie_step(bk, state, layer, bk.asarray(1.0), "post")
        difference = largest_magnitude(bk, paper_six_substeps(bk, state, w) - post)
        scale = largest_magnitude(bk, post)
    return ClaimCheck(
        claim=CLAIM,
        configuration={
            "precision": repr(bk),
            "tokens": u.shape[-2],
            "d": layer.d_model,
            "heads": layer.heads,
            "eps": layer.eps,
            "per_feature_affine": layer.norm1[0].ndim > 0,
        },
        defect=difference / scale,
        tolerance=64 * bk.unit_roundoff,
        note="relative max-abs difference after one layer",
    )
