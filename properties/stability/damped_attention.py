"""A stiff test family for stability maps: random attention plus an exactly linear FFN
damping, so the field has stiff, nearly real eigenvalues and, with norm "none", is
analytic (docs/stability.md section 4).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from solvers import LayerWeights
from solvers.errors import InvalidInputError
from solvers.validation import positive_number


def damped_attention_layer(
    d: int,
    heads: int,
    stiffness: float,
    rng: np.random.Generator | int = 0,
    *,
    attention_scale: float = 1.0,
) -> LayerWeights:
    """Seeded random attention (LayerWeights.random with weight_scale `attention_scale`)
    and the FFN F(U) = -U K written with ReLU pairs: W1 = [I | -I], b1 = 0,
    W2 = [-K ; K], b2 = 0, so relu(U) (-K) + relu(-U) K = -U K exactly. K = Q diag(k) Q^T
    with k evenly spaced on [1, stiffness] and Q a seeded random orthogonal matrix.

    With norm "none" the field A(U) - U K is analytic (use the reference without event
    location: every pre-activation crosses zero wherever a state entry does, and the
    kinks cancel in pairs). Domain: d >= 1, heads dividing d, stiffness >= 1.
    """
    rng = np.random.default_rng(rng)
    stiffness = positive_number("stiffness", stiffness)
    if stiffness < 1:
        raise InvalidInputError(f"stiffness must be >= 1, got {stiffness!r}")
    attention_scale = positive_number("attention_scale", attention_scale)
    layer = LayerWeights.random(d, heads, 2 * d, rng, weight_scale=attention_scale)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    damping = q @ np.diag(np.linspace(1.0, stiffness, d)) @ q.T
    identity = np.eye(d)
    return dataclasses.replace(
        layer,
        w1=np.hstack([identity, -identity]),
        b1=np.zeros(2 * d),
        w2=np.vstack([-damping, damping]),
        b2=np.zeros(d),
    )
