"""The layer norm LN and its constraint set S1 (docs/model.md section 1)."""

from __future__ import annotations

import numpy as np

from solvers.backends import Array, Backend
from solvers.equation.norms.kind import (
    NormKind,
    Parameters,
    radial_jacobian_bound,
    require_positive,
)
from solvers.errors import InvalidInputError


def layer_norm(
    bk: Backend,
    u: Array,
    gain: Array,
    bias: Array,
    eps: Array,
    weights: Array | None = None,
) -> Array:
    """LN(V)_i = g * (V_i - mean(V_i)) / sqrt(var(V_i) + eps) + b, per row over the d features.

    var is the population variance; on a non-uniform feature grid mean and variance are
    the quadrature sums with the feature weights w^y (`weights`, summing to 1). With
    eps = 0 and scalar g = sigma2 > 0, b = sigma1 this is the projection P onto
    S1 = {rows with mean sigma1 and variance sigma2^2} (Theorem 3.1; in the w^y-weighted
    inner product), defined only where var(V_i) > 0: a constant row raises
    UndefinedOperationError naming the token. With eps > 0 it is defined everywhere.
    """
    mean, variance = bk.moments(u, weights)
    if not np.any(bk.to_float64(eps)):
        require_positive(bk, variance, "the layer-norm projection P", "constant row", "variance")
    return bk.normalise_rows(u, mean, variance, eps, gain, bias)


def project_to_s1(bk: Backend, u: Array, sigma1: object, sigma2: object) -> Array:
    """The projection P(V)_i = sigma2 (V_i - mean(V_i)) / sqrt(var(V_i)) + sigma1 onto S1.

    Requires scalar sigma2 > 0 and var(V_i) > 0 for every row (see `layer_norm`).
    """
    sigma1_array, sigma2_array = np.asarray(sigma1, float), np.asarray(sigma2, float)
    if (
        sigma1_array.ndim
        or sigma2_array.ndim
        or not np.isfinite([sigma1_array, sigma2_array]).all()
    ):
        raise InvalidInputError(
            f"sigma1 and sigma2 must be finite scalars, got {sigma1!r}, {sigma2!r}"
        )
    if not sigma2_array > 0:
        raise InvalidInputError(f"sigma2 must be > 0 for a projection onto S1, got {sigma2!r}")
    return layer_norm(bk, u, bk.asarray(sigma2), bk.asarray(sigma1), bk.asarray(0.0))


def tangent_projection(bk: Backend, u: Array, g: Array, weights: Array | None = None) -> Array:
    """Pi_T(u) g: per row, remove the mean of g, then its component along u - mean(u).

    At a point u of S1 (mean sigma1, variance sigma2^2) this is the orthogonal projection
    onto the tangent space {t : mean t = 0, <t, u - sigma1> = 0}; elsewhere it projects
    onto the tangent space of the level set of (mean, variance) through u, so it needs
    var(u_i) > 0 but no sigma. With feature `weights` w^y, means and inner products are
    the w^y-weighted ones (the projection is orthogonal in that inner product).
    """
    mean_u, variance = bk.moments(u, weights)
    require_positive(bk, variance, "the layer-norm projection P", "constant row", "variance")
    return bk.tangent_rows(u, mean_u, variance, g, weights)


class LayerNorm(NormKind):
    """LN with gain and bias; with eps = 0 and a scalar gain > 0 the projection onto S1,
    whose tangent projection carries the post-LN flow."""

    name = "layer"
    title = "layer norm"
    extension = False
    operator = staticmethod(layer_norm)

    def jacobian_bound(
        self, x: np.ndarray, parameters: Parameters, eps: float, weight: np.ndarray
    ) -> np.ndarray:
        """With c = x - mean(x), r = sqrt(mean c^2 + eps) and W~ = diag(g) W:
        |W~ - mean_rows W~|_1 / r + |c|_1 |c^T W~| / (d r^3), the two parts of
        d LN(x) W / dx (the centring and the radius) bounded apart."""
        scaled = np.asarray(parameters[0], dtype=np.float64).reshape(-1, 1) * weight
        centred = x - x.mean(axis=-1, keepdims=True)
        direct = np.abs(scaled - scaled.mean(axis=0)).sum(axis=0)
        return radial_jacobian_bound(centred, direct, scaled, eps)

    def tangent(self, bk: Backend, u: Array, g: Array, weights: Array | None = None) -> Array:
        return tangent_projection(bk, u, g, weights)
