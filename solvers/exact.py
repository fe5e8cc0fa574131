"""Exact solutions of the layer flow (MODEL.md section 5), at any precision.

- Uniform attention (Wk = 0, or Wq = 0 and bq = 0: every score row is constant), zero
  value and output biases, FFN off (W2 = 0, b2 = 0), no norm: every token sees the
  token mean ubar, so ubar' = ubar M with M = sum_h Wv_h Wo_h, ubar(t) = ubar(0)
  expm(t M) layer by layer, and u_i - ubar is constant in time.
- A manufactured solution u*(x, y, t) = sigma1 + sigma2 sqrt(2) cos(2 pi y + phi(x, t))
  on the uniform grid, which lies on S1 for every t when d >= 3; the flow's forcing
  g = u*_t - Pi_T(u*)[(A + F)(u*)] (post-LN; without Pi_T for pre and none) makes it
  an exact solution (solvers.flow).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np

from solvers.backends import Array, Backend
from solvers.controls import PiecewiseControls
from solvers.errors import InvalidInputError

if TYPE_CHECKING:  # problem.py imports this module
    from solvers.problem import Problem


def uniform_attention_solution(problem: Problem, bk: Backend) -> Array:
    """u(t_final) of a uniform-attention problem (see the module docstring), in bk."""
    if not isinstance(problem.controls, PiecewiseControls):
        raise InvalidInputError("the uniform-attention solution needs PiecewiseControls")
    if (
        problem.norm != "none"
        or problem.causal
        or problem.token_weights is not None
        or problem.token_maps is not None
    ):
        raise InvalidInputError(
            "the uniform-attention solution needs norm='none', no causal mask, no token "
            "weights and no token maps"
        )
    for n, w in enumerate(problem.controls.layers):
        # Wk = 0 makes every key the constant bk; Wq = bq = 0 makes every query 0
        uniform = not w.wk.any() or (not w.wq.any() and not w.bq.any())
        if not uniform or w.bv.any() or w.bo.any() or w.w2.any() or w.b2.any():
            raise InvalidInputError(
                f"layer {n} is not a uniform-attention layer: it needs Wk = 0 (or Wq = bq = 0), "
                "bv = bo = 0 and a switched-off FFN (W2 = 0, b2 = 0)"
            )
    with bk.active():
        u0 = bk.asarray(problem.u0)
        tokens = u0.shape[-2]
        mean = bk.sum(u0, -2) / tokens
        deviation = u0 - mean
        t_final = Fraction(problem.t_final)
        for n in range(math.ceil(t_final)):
            w = problem.controls.layers[n]
            length = bk.asarray(min(t_final, n + 1) - n)
            generator = bk.matmul(bk.asarray(w.wv), bk.asarray(w.wo))  # (H, d, d)
            total = generator[0]
            for h in range(1, w.heads):
                total = total + generator[h]
            mean = bk.matmul(mean, bk.expm(total * length))
        return deviation + mean


class ManufacturedSolution:
    """u*_ik(t) = sigma1 + sigma2 sqrt(2) cos(2 pi y_k + phi_i(t)) on the uniform grid.

    x_i = i / N, y_k = k / d, phi_i(t) = 2 pi x_i + a sin(t) + b t cos(2 pi x_i), with
    amplitude a and drift b. For d >= 3 every row has mean sigma1 and population
    variance sigma2^2 at every t (the discrete sums of cos and cos^2 over a full period).
    """

    def __init__(
        self,
        tokens: int,
        d: int,
        sigma1: float = 0.0,
        sigma2: float = 1.0,
        amplitude: float = 0.5,
        drift: float = 0.3,
    ) -> None:
        if d < 3:
            raise InvalidInputError(f"a manufactured solution on S1 needs d >= 3, got d={d}")
        if not sigma2 > 0:
            raise InvalidInputError(f"sigma2 must be > 0, got {sigma2!r}")
        self.tokens, self.d = tokens, d
        self.sigma1, self.sigma2 = sigma1, sigma2
        self.amplitude, self.drift = amplitude, drift
        self._grids: dict[tuple, tuple[Array, Array, Array, Array]] = {}

    def _grid(self, bk: Backend) -> tuple[Array, Array, Array, Array]:
        if bk.key not in self._grids:
            two_pi = 2 * bk.pi()
            x = bk.asarray(np.arange(self.tokens)) / self.tokens * two_pi
            y = bk.asarray(np.arange(self.d)) / self.d * two_pi
            self._grids[bk.key] = (
                x[:, None],
                y[None, :],
                bk.cos(x)[:, None],
                bk.sqrt(bk.asarray(2.0)),
            )
        return self._grids[bk.key]

    def _phase(self, bk: Backend, t: Array) -> tuple[Array, Array]:
        x, y, cos_x, _ = self._grid(bk)
        t = bk.asarray(t)
        a, b = bk.asarray(self.amplitude), bk.asarray(self.drift)
        phase = x + a * bk.sin(t) + b * t * cos_x
        rate = a * bk.cos(t) + b * cos_x
        return y + phase, rate

    def state(self, bk: Backend, t: Array) -> Array:
        """u*(t), shape (N, d)."""
        angle, _ = self._phase(bk, t)
        root2 = self._grid(bk)[3]
        return bk.asarray(self.sigma1) + bk.asarray(self.sigma2) * root2 * bk.cos(angle)

    def derivative(self, bk: Backend, t: Array) -> Array:
        """du*/dt = -sigma2 sqrt(2) sin(2 pi y + phi) phi_t."""
        angle, rate = self._phase(bk, t)
        root2 = self._grid(bk)[3]
        return -(bk.asarray(self.sigma2) * root2) * bk.sin(angle) * rate

    def initial(self) -> np.ndarray:
        """u*(0) in float64 (the Problem's u0; solvers start from u*(0) at working precision)."""
        from solvers.backends import backend

        return self.state(backend("float64"), 0.0)
