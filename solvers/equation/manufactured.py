"""A manufactured solution of the layer flow on S1, exact at any precision.

u*(x, y, t) = sigma1 + sigma2 sqrt(2) cos(2 pi y + phi(x, t)) on the uniform grid lies on
S1 for every t when d >= 3; the forcing g = u*_t - Pi_T(u*)[(A + F)(u*)] (post-LN;
without Pi_T for pre and none, solvers.equation.flow) makes it an exact solution
(docs/model.md section 5).
"""

from __future__ import annotations

import numpy as np

from solvers.backends import Array, Backend, backend
from solvers.errors import InvalidInputError


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
        return self.state(backend("float64"), 0.0)
