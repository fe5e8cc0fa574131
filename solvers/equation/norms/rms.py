"""RMSNorm (docs/model.md section 7)."""

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


def rms_norm(
    bk: Backend,
    u: Array,
    gain: Array,
    bias: Array,
    eps: Array,
    weights: Array | None = None,
) -> Array:
    """R(V)_i = g V_i / sqrt(rms(V_i)^2 + eps) per row, rms(V_i)^2 = (1/d) sum_y V_iy^2 (the
    w^y-weighted sum with feature `weights`): RMSNorm (docs/model.md section 7). `bias` is
    the norm's zero bias (RMSNorm refuses another), added so that this and `layer_norm`
    take the same arguments. With eps = 0 and scalar g > 0 it is the projection onto the
    sphere S_R = {rms = g}, defined only where rms(V_i) > 0: a zero row raises
    UndefinedOperationError naming the token. With eps > 0 it is defined everywhere.
    """
    square = bk.mean_square(u, weights)
    if not np.any(bk.to_float64(eps)):
        require_positive(bk, square, "the RMSNorm projection", "zero row", "mean square")
    return bk.normalise_rows(u, square * 0, square, eps, gain, bias)


class RMSNorm(NormKind):
    """RMSNorm with a gain and a zero bias. Its sphere S_R is a constraint set, but the
    tangent projection onto it is not implemented: no post-norm flow."""

    name = "rms"
    title = "RMSNorm"
    operator = staticmethod(rms_norm)
    post_refusal = (
        "post-norm RMSNorm flows are not implemented (docs/model.md section 7); use norm='pre'"
    )

    def _own_checks(self, name: str, parameters: Parameters) -> Parameters:
        if parameters[1].any():
            raise InvalidInputError(f"{name}: an RMSNorm has no bias, got a non-zero one")
        return parameters

    def random(self, rng: np.random.Generator, d: int, affine: bool) -> Parameters:
        """Gains 1 + 0.3 N(0, 1) with `affine` (and bias 0), else the defaults."""
        return (1.0 + 0.3 * rng.standard_normal(d), 0.0) if affine else self.default()

    def jacobian_bound(
        self, x: np.ndarray, parameters: Parameters, eps: float, weight: np.ndarray
    ) -> np.ndarray:
        """|W~|_1 / r + |x|_1 |x^T W~| / (d r^3), r = sqrt(mean x^2 + eps), W~ = diag(g) W."""
        scaled = np.asarray(parameters[0], dtype=np.float64).reshape(-1, 1) * weight
        return radial_jacobian_bound(x, np.abs(scaled).sum(axis=0), scaled, eps)
