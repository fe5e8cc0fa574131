"""Theorem 3.1 of the paper: layer norm with eps = 0 and scalar gain is the projection onto S1.

S1 = {V : every row has mean sigma1 and population variance sigma2^2} and
P(V)_i = sigma2 (V_i - mean V_i) / std(V_i) + sigma1. The checks measure, row by row:
P(V) on S1; P(P(V)) = P(V); V - P(V) normal to S1 at P(V) (the tangent space at p is
{t : mean t = 0, <t, p - sigma1> = 0}); |V - P(V)| <= |V - Q| for sampled Q on S1;
P(cV) = P(V) for c > 0. Torch-style layer norm (eps > 0, or per-feature gain and bias)
is checked for idempotence, which it fails by a measured amount. Every quantity is
computed in the backend under test, so the check is as fine as its precision.

Tolerances: relative to the size |sigma1| + sigma2 sqrt(d) of points of S1, P's rounding
error is about (2 + kappa + log2 d) u: the cancellation in V_i - mean V_i costs
kappa u, kappa = max_i max|V_i| / std(V_i) the conditioning of the row; the sums cost
log2 d u (pairwise summation); the divide, the gain and the bias a few u. Each check
allows 8 (2 + kappa + log2 d) u. The normality
check measures V - P(V) against the normal direction P(V) - sigma1, which the stored P(V)
carries only to a relative accuracy u (|sigma1| + sigma2 sqrt(d)) / (sigma2 sqrt(d)); its
tolerance is multiplied by that ratio. A sampled point Q = P(W) carries the rounding of
its own row W, whose conditioning can far exceed V's (points near P(V) when |sigma1| >>
sigma2), so the nearest-point tolerance uses the larger of the two conditionings.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from properties.claim_check import ClaimCheck
from solvers import backend
from solvers.backends import Array, Backend
from solvers.operators import layer_norm, project_to_s1

LOCAL_STEPS = (1e-1, 1e-2, 1e-3)
SCALE_FACTORS = (0.125, 0.3, 7.0, 16.0)

Projection = Callable[[Backend, Array], Array]


def _conditioning(v: np.ndarray) -> float:
    return float(np.max(np.max(np.abs(v), axis=-1) / np.std(v, axis=-1)))


def _tolerance(bk: Backend, v: np.ndarray) -> float:
    """8 (2 + kappa + log2 d) u, the rounding allowance derived in the module docstring."""
    return 8 * (2 + _conditioning(v) + np.log2(v.shape[-1])) * bk.unit_roundoff


def _largest(bk: Backend, x: Array) -> float:
    """max |x| as a float (midpoints for balls)."""
    return float(np.max(np.abs(bk.to_float64(x))))


def check_projection_theorem(
    v: np.ndarray,
    sigma1: float,
    sigma2: float,
    rng: np.random.Generator,
    *,
    samples: int = 32,
    precision: str | Backend = "float64",
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

    size = abs(sigma1) + sigma2 * np.sqrt(d)
    tolerance = _tolerance(bk, v)
    configuration = {
        "precision": repr(bk), "shape": list(v.shape), "sigma1": sigma1, "sigma2": sigma2,
        "conditioning": _conditioning(v),
    }  # fmt: skip

    def check(claim: str, defect: float, note: str, conditioning: float = 1.0) -> ClaimCheck:
        return ClaimCheck(claim, configuration, float(defect), tolerance * conditioning, note)

    with bk.active():
        x = bk.asarray(v)
        p = projection(bk, x)
        s1, s2 = bk.asarray(sigma1), bk.asarray(sigma2)
        mean, variance = bk.moments(p)
        std = bk.sqrt(variance)
        off_s1 = max(_largest(bk, mean - s1), _largest(bk, std - s2)) / size

        residual = x - p
        normal = p - s1
        residual -= bk.sum(residual, -1) / d
        along = bk.sum(residual * normal, -1) / bk.sum(normal * normal, -1)
        tangential = _largest(bk, residual - along * normal) / (size + np.abs(v).max())

        def distance(a: Array, b: Array) -> np.ndarray:
            gap = a - b
            return bk.to_float64(bk.sqrt(bk.sum(gap * gap, -1)))[..., 0]

        nearest = distance(x, p)
        p64 = bk.to_float64(p)
        candidates = [rng.standard_normal((samples, *v.shape))]
        candidates += [p64 + h * rng.standard_normal((samples, *v.shape)) for h in LOCAL_STEPS]
        candidates = np.concatenate(candidates)
        others = distance(x, projection(bk, bk.asarray(candidates)))
        # a sampled point carries the rounding of its own (possibly ill-conditioned) row
        sampled_conditioning = max(_tolerance(bk, candidates) / tolerance, 1.0)
        # distances are of the size of V, and so are their rounding errors
        nearer = max(float(np.max(nearest - others)), 0.0) / (size + np.abs(v).max())

        idempotent = _largest(bk, projection(bk, p) - p) / size
        rescaled = max(_largest(bk, projection(bk, bk.asarray(c) * x) - p) for c in SCALE_FACTORS)
    return [
        check("P(V) lies on S1", off_s1, "max row |mean - sigma1|, |std - sigma2|, / size of S1"),
        check("P is idempotent", idempotent, "max |P(P(V)) - P(V)| / size of S1"),
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
            conditioning=sampled_conditioning,
        ),
        check("P(cV) = P(V) for c > 0", rescaled / size, f"max over c in {SCALE_FACTORS}"),
    ]


def check_layer_norm_idempotence(
    v: np.ndarray, gain: object, bias: object, eps: float, *, precision: str | Backend = "float64"
) -> ClaimCheck:
    """How far the torch-style layer norm g (V - mean) / sqrt(var + eps) + b is from idempotent.

    Idempotent (a projection) exactly when eps = 0 and g, b are scalars; otherwise the
    defect max |LN(LN(V)) - LN(V)| / max |LN(V)| measures how far from it.
    """
    bk = backend(precision)
    v = np.asarray(v, dtype=np.float64)
    with bk.active():
        args = (bk.asarray(gain), bk.asarray(bias), bk.asarray(eps))
        once = layer_norm(bk, bk.asarray(v), *args)
        defect = _largest(bk, layer_norm(bk, once, *args) - once) / _largest(bk, once)
    return ClaimCheck(
        claim="layer norm is idempotent (a projection)",
        configuration={
            "precision": repr(bk),
            "shape": list(v.shape),
            "eps": eps,
            "per_feature_affine": np.ndim(gain) > 0 or np.ndim(bias) > 0,
        },
        defect=defect,
        tolerance=_tolerance(bk, v),
        note="max |LN(LN(V)) - LN(V)| / max |LN(V)|",
    )
