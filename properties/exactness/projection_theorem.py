"""Theorem 3.1 of the paper as claim checks: layer norm with eps = 0 and scalar gain is the
projection P onto S1 (docs/model.md section 1): P(V) on S1, idempotent, V - P(V) normal to
S1, P(V) the nearest point, P(cV) = P(V) for c > 0; and how far torch-style layer norm is
from idempotent. Every quantity is computed in the backend under test, within the
projection's rounding 8 (2 + kappa + log2 d) u (docs/rounding.md section 3).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from properties.claim_check import ClaimCheck, largest_magnitude
from solvers import backend
from solvers.backends import Array, Backend
from solvers.equation.norms import layer_norm, project_to_s1
from solvers.errors import InvalidInputError
from solvers.results.allowances import projection_allowance
from solvers.validation import finite_array

LOCAL_STEPS = (1e-1, 1e-2, 1e-3)
"""Distances from P(V) of the sampled points near it (nearest-point check)."""
SCALE_FACTORS = (0.125, 0.3, 7.0, 16.0)
"""The factors c of the scale-invariance check P(cV) = P(V)."""

Projection = Callable[[Backend, Array], Array]
"""A map under test in place of P, evaluated in the (active) backend."""


def s1_projection(sigma1: float, sigma2: float) -> Projection:
    """P onto S1(sigma1, sigma2) as a Projection (`solvers.equation.norms.project_to_s1`)."""

    def projection(bk: Backend, x: Array) -> Array:
        return project_to_s1(bk, x, sigma1, sigma2)

    return projection


def _configuration(bk: Backend, v: np.ndarray, sigma1: float, sigma2: float) -> dict[str, Any]:
    """What a check of P on the rows v records about itself."""
    return {
        "precision": repr(bk),
        "shape": list(v.shape),
        "sigma1": sigma1,
        "sigma2": sigma2,
        "conditioning": _conditioning(v),
    }


def _conditioning(v: np.ndarray) -> float:
    """kappa = max over rows of max|V_i| / std(V_i)."""
    return float(np.max(np.max(np.abs(v), axis=-1) / np.std(v, axis=-1)))


def _tolerance(bk: Backend, v: np.ndarray) -> float:
    """8 (2 + kappa + log2 d) u, the projection's relative rounding at the rows of v."""
    return projection_allowance(bk.unit_roundoff, _conditioning(v), v.shape[-1])


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
    Defects are relative to the size |sigma1| + sigma2 sqrt(d) of points of S1. The
    normality check measures V - P(V) against P(V) - sigma1, known only to a relative
    accuracy size / (sigma2 sqrt(d)), and a sampled point Q = P(W) carries the rounding
    of its own row W: those two tolerances are scaled accordingly.
    """
    bk = backend(precision)
    v = np.asarray(v, dtype=np.float64)
    d = v.shape[-1]
    projection = projection or s1_projection(sigma1, sigma2)
    size = abs(sigma1) + sigma2 * np.sqrt(d)
    tolerance = _tolerance(bk, v)
    configuration = _configuration(bk, v, sigma1, sigma2)

    def check(claim: str, defect: float, note: str, conditioning: float = 1.0) -> ClaimCheck:
        return ClaimCheck(claim, configuration, float(defect), tolerance * conditioning, note)

    with bk.active():
        x = bk.asarray(v)
        p = projection(bk, x)
        s1, s2 = bk.asarray(sigma1), bk.asarray(sigma2)
        mean, variance = bk.moments(p)
        std = bk.sqrt(variance)
        off_s1 = max(largest_magnitude(bk, mean - s1), largest_magnitude(bk, std - s2)) / size

        residual = x - p
        normal = p - s1
        residual -= bk.sum(residual, -1) / d
        along = bk.sum(residual * normal, -1) / bk.sum(normal * normal, -1)
        tangential = largest_magnitude(bk, residual - along * normal) / (size + np.abs(v).max())

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
    idempotent, rescaled = _idempotence_and_scale(bk, projection, v, size, configuration)
    return [
        check("P(V) lies on S1", off_s1, "max row |mean - sigma1|, |std - sigma2|, / size of S1"),
        idempotent,
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
        rescaled,
    ]


def check_projection_idempotence_and_scale(
    v: np.ndarray,
    sigma1: float,
    sigma2: float,
    *,
    precision: str | Backend = "float64",
    projection: Projection | None = None,
    scales: Sequence[float] = SCALE_FACTORS,
) -> list[ClaimCheck]:
    """P(P(V)) = P(V) and P(cV) = P(V) for c > 0, P(V)_i = sigma2 (V_i - mean V_i) / std V_i
    + sigma1 (`project_to_s1`, eps = 0, scalar gain). Domain: rows with var > 0.

    `projection` replaces P (say a layer norm with eps > 0, which fails both). Defects are
    max-abs over rows relative to size = |sigma1| + sigma2 sqrt(d); tolerance
    8 (2 + kappa + log2 d) u.
    """
    bk = backend(precision)
    v = finite_array("v", v)
    if v.ndim < 2 or v.shape[-1] < 2:
        raise InvalidInputError(f"v must have shape (..., N, d) with d >= 2, got {v.shape}")
    c = finite_array("scales", scales)
    if c.ndim != 1 or not len(c) or (c <= 0).any():
        raise InvalidInputError(
            f"scales must be a non-empty list of positive numbers, got {scales}"
        )
    size = abs(sigma1) + sigma2 * np.sqrt(v.shape[-1])
    configuration = _configuration(bk, v, sigma1, sigma2)
    projection = projection or s1_projection(sigma1, sigma2)
    return list(_idempotence_and_scale(bk, projection, v, size, configuration, c))


def _idempotence_and_scale(
    bk: Backend,
    projection: Projection,
    v: np.ndarray,
    size: float,
    configuration: dict[str, object],
    scales: Sequence[float] = SCALE_FACTORS,
) -> tuple[ClaimCheck, ClaimCheck]:
    """The checks P(P(V)) = P(V) and max over c in `scales` of P(cV) = P(V), / size."""
    tolerance = _tolerance(bk, v)
    with bk.active():
        x = bk.asarray(v, "v")
        p = projection(bk, x)
        idempotent = largest_magnitude(bk, projection(bk, p) - p) / size
        rescaled = max(largest_magnitude(bk, projection(bk, bk.asarray(s) * x) - p) for s in scales)
    rescaled /= size
    note = f"max over c in {[float(s) for s in scales]}, / size of S1"
    return (
        ClaimCheck(
            "P is idempotent",
            configuration,
            idempotent,
            tolerance,
            "max |P(P(V)) - P(V)| / size of S1",
        ),
        ClaimCheck("P(cV) = P(V) for c > 0", configuration, rescaled, tolerance, note),
    )


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
        defect = largest_magnitude(bk, layer_norm(bk, once, *args) - once) / largest_magnitude(
            bk, once
        )
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
