"""Theorem 3.1 of the paper: layer norm with eps = 0 and scalar gain is the projection onto S1.

S1 = {V : every row has mean sigma1 and population variance sigma2^2} and
P(V)_i = sigma2 (V_i - mean V_i) / std(V_i) + sigma1. The checks measure, row by row:
P(V) on S1; P(P(V)) = P(V); V - P(V) normal to S1 at P(V) (the tangent space at p is
{t : mean t = 0, <t, p - sigma1> = 0}); |V - P(V)| <= |V - Q| for sampled Q on S1;
P(cV) = P(V) for c > 0. Torch-style layer norm (eps > 0, or per-feature gain and bias)
is checked for idempotence, which it fails by a measured amount.

Tolerances: P's rounding error relative to the size sigma1 + sigma2 sqrt(d) of points of
S1 is a few d u kappa, kappa = max_i max|V_i| / std(V_i) the conditioning of the row
(the cancellation in V_i - mean V_i). Each check allows 16 (d + 4) u kappa. The normality
check measures V - P(V) against the normal direction P(V) - sigma1, which the stored P(V)
carries only to a relative accuracy u (|sigma1| + sigma2 sqrt(d)) / (sigma2 sqrt(d)); its
tolerance is multiplied by that ratio.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from properties.claim_check import ClaimCheck
from solvers import backend
from solvers.backends import Array, Backend
from solvers.operators import layer_norm, project_to_s1

LOCAL_STEPS = (1e-1, 1e-2, 1e-3)
SCALE_FACTORS = (1e-3, 0.5, 7.0, 1e3)

Projection = Callable[[Backend, Array], Array]


def _conditioning(v: np.ndarray) -> float:
    return float(np.max(np.max(np.abs(v), axis=-1) / np.std(v, axis=-1)))


def check_projection_theorem(
    v: np.ndarray,
    sigma1: float,
    sigma2: float,
    rng: np.random.Generator,
    *,
    samples: int = 32,
    precision: str = "float64",
    projection: Projection | None = None,
) -> list[ClaimCheck]:
    """The five parts of Theorem 3.1 on the rows of v ((N, d) or (B, N, d)); see the module doc.

    `projection` is the map under test, P computed by `project_to_s1` by default; another
    map (say a layer norm with eps > 0) is checked against the same five properties.
    """
    bk = backend(precision)
    v = np.asarray(v, dtype=np.float64)
    d = v.shape[-1]
    if projection is None:

        def projection(bk: Backend, x: Array) -> Array:
            return project_to_s1(bk, x, sigma1, sigma2)

    def project(x: np.ndarray) -> np.ndarray:
        return bk.to_float64(projection(bk, bk.asarray(x)))

    p = project(v)
    size = abs(sigma1) + sigma2 * np.sqrt(d)
    tolerance = 16 * (d + 4) * bk.unit_roundoff * _conditioning(v)
    configuration = {
        "precision": precision,
        "shape": list(v.shape),
        "sigma1": sigma1,
        "sigma2": sigma2,
        "conditioning": _conditioning(v),
    }

    def check(claim: str, defect: float, note: str, conditioning: float = 1.0) -> ClaimCheck:
        return ClaimCheck(claim, configuration, float(defect), tolerance * conditioning, note)

    off_s1 = np.maximum(np.abs(p.mean(-1) - sigma1), np.abs(p.std(-1) - sigma2)).max() / size

    residual = v - p
    normal = p - sigma1
    centred = residual - residual.mean(-1, keepdims=True)
    along = np.sum(centred * normal, -1, keepdims=True) / np.sum(normal * normal, -1, keepdims=True)
    tangential = np.abs(centred - along * normal).max() / (size + np.abs(v).max())

    distance = np.linalg.norm(residual, axis=-1)
    candidates = [project(rng.standard_normal((samples, *v.shape)))]
    candidates += [
        project(p + step * rng.standard_normal((samples, *v.shape))) for step in LOCAL_STEPS
    ]
    others = np.linalg.norm(v - np.concatenate(candidates), axis=-1)
    nearer = max(float(np.max(distance - others)), 0.0) / size

    rescaled = max(np.abs(project(c * v) - p).max() for c in SCALE_FACTORS) / size
    return [
        check("P(V) lies on S1", off_s1, "max row |mean - sigma1|, |std - sigma2|, / size of S1"),
        check(
            "P is idempotent",
            np.abs(project(p) - p).max() / size,
            "max |P(P(V)) - P(V)| / size of S1",
        ),
        check(
            "V - P(V) is normal to S1 at P(V)",
            tangential,
            "tangential part of V - P(V)",
            conditioning=size / (sigma2 * np.sqrt(d)),
        ),
        check(
            "P(V) is the nearest point of S1",
            nearer,
            f"how much nearer the best of {samples * (1 + len(LOCAL_STEPS))} sampled points is",
        ),
        check("P(cV) = P(V) for c > 0", rescaled, f"max over c in {SCALE_FACTORS}"),
    ]


def check_layer_norm_idempotence(
    v: np.ndarray, gain: object, bias: object, eps: float, *, precision: str = "float64"
) -> ClaimCheck:
    """How far the torch-style layer norm g (V - mean) / sqrt(var + eps) + b is from idempotent.

    Idempotent (a projection) exactly when eps = 0 and g, b are scalars; otherwise the
    defect max |LN(LN(V)) - LN(V)| / max |LN(V)| measures how far from it.
    """
    bk = backend(precision)
    v = np.asarray(v, dtype=np.float64)
    args = (bk.asarray(gain), bk.asarray(bias), bk.asarray(eps))
    once = layer_norm(bk, bk.asarray(v), *args)
    twice = bk.to_float64(layer_norm(bk, once, *args))
    once = bk.to_float64(once)
    d = v.shape[-1]
    return ClaimCheck(
        claim="layer norm is idempotent (a projection)",
        configuration={
            "precision": precision,
            "shape": list(v.shape),
            "eps": eps,
            "per_feature_affine": np.ndim(gain) > 0 or np.ndim(bias) > 0,
        },
        defect=float(np.abs(twice - once).max() / np.abs(once).max()),
        tolerance=16 * (d + 4) * bk.unit_roundoff * _conditioning(v),
        note="max |LN(LN(V)) - LN(V)| / max |LN(V)|",
    )
