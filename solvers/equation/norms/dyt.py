"""The dynamic-tanh norm DyT (docs/model.md section 8; Zhu, Chen, He, LeCun and Liu,
"Transformers without Normalization", CVPR 2025)."""

from __future__ import annotations

import numpy as np

from solvers.backends import Array, Backend
from solvers.equation.norms.kind import NormKind, Parameters

INITIAL_ALPHA = 0.5
"""The paper's default initial alpha."""


def dynamic_tanh(
    bk: Backend, u: Array, gain: Array, bias: Array, alpha: Array, eps: Array, weights: object
) -> Array:
    """DyT(V) = g tanh(alpha V) + b entrywise in bk's arithmetic; eps (0: DyT has none) and
    the feature weights do not enter."""
    out = bk.tanh(u * alpha)
    out *= gain
    out += bias
    return out


class DynamicTanh(NormKind):
    """DyT(V)_i = g * tanh(alpha V_i) + b, entrywise, with a gain g and a bias b (scalars or
    vectors of length d) and one scalar alpha per norm. No statistic over the features, no
    eps; smooth everywhere. Not a projection (DyT(DyT(V)) != DyT(V)): repeating it at every
    step does not shrink with the step, so there is no post-DyT flow."""

    name = "dyt"
    title = "DyT"
    parameters = ("gain", "bias", "alpha")
    takes_eps = False
    operator = staticmethod(dynamic_tanh)
    post_refusal = (
        "DyT is not a projection: applied after every step it does not shrink with dt, so "
        "a post-DyT layer has no time-step limit (docs/model.md section 8); use norm='pre'"
    )

    def default(self) -> Parameters:
        return (1.0, 0.0, INITIAL_ALPHA)

    def random(self, rng: np.random.Generator, d: int, affine: bool) -> Parameters:
        """With `affine` gains 1 + 0.3 N(0, 1), biases 0.3 N(0, 1) and alpha
        0.5 exp(0.3 N(0, 1)); otherwise the defaults."""
        if not affine:
            return self.default()
        gain, bias = 1.0 + 0.3 * rng.standard_normal(d), 0.3 * rng.standard_normal(d)
        return gain, bias, INITIAL_ALPHA * float(np.exp(0.3 * rng.standard_normal()))

    def jacobian_bound(
        self, x: np.ndarray, parameters: Parameters, eps: float, weight: np.ndarray
    ) -> np.ndarray:
        """sum_i |g_i alpha (1 - tanh(alpha x_i)^2) W_iv|: the Jacobian is diagonal, so this
        is its exact l1 column sum."""
        gain, _, alpha = (np.asarray(p, dtype=np.float64) for p in parameters)
        slope = np.abs(alpha) * (1 - np.tanh(alpha * x) ** 2)
        return slope @ np.abs(gain.reshape(-1, 1) * weight)
