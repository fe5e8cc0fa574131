"""Continuous controls: kernel functions on the unit square and one continuous layer.

A kernel k(a, b) maps numpy arrays of points in [0, 1) to values (broadcasting). Two
seeded smooth families:

- FourierKernel: sum_{p,q < modes} c_pq phi_p(a) phi_q(b) with the real Fourier basis
  phi_0 = 1, phi_{2j-1} = sqrt(2) cos(2 pi j a), phi_{2j} = sqrt(2) sin(2 pi j a): smooth
  and periodic in both variables (the trapezoid rule's best case);
- LegendreKernel: sum_{p,q < modes} c_pq P_p(2a - 1) P_q(2b - 1): smooth, not periodic.

Coefficients are N(0, 1) * decay^(p + q). Any callable of the same form can stand in.
A ContinuousLayer holds the kernels of docs/model.md section 3 for one layer (time-constant).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.polynomial import legendre

from solvers.errors import InvalidInputError

Kernel = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _fourier_basis(a: np.ndarray, modes: int) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    columns = [np.ones_like(a)]
    for j in range(1, modes):
        frequency = 2 * np.pi * ((j + 1) // 2) * a
        columns.append(np.sqrt(2) * (np.cos(frequency) if j % 2 else np.sin(frequency)))
    return np.stack(columns, axis=-1)


def _legendre_basis(a: np.ndarray, modes: int) -> np.ndarray:
    return legendre.legvander(2 * np.asarray(a, dtype=np.float64) - 1, modes - 1)


@dataclass(frozen=True)
class SeriesKernel:
    """k(a, b) = sum_pq c_pq phi_p(a) phi_q(b) for a basis family ("fourier" or "legendre")."""

    coefficients: np.ndarray
    family: str = "fourier"

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        basis = _fourier_basis if self.family == "fourier" else _legendre_basis
        modes = self.coefficients.shape[0]
        return np.einsum("...p,pq,...q->...", basis(a, modes), self.coefficients, basis(b, modes))

    @classmethod
    def random(
        cls,
        rng: np.random.Generator,
        family: str = "fourier",
        modes: int = 5,
        decay: float = 0.5,
        scale: float = 1.0,
    ) -> SeriesKernel:
        if family not in ("fourier", "legendre"):
            raise InvalidInputError(
                f"unknown kernel family {family!r}; allowed: 'fourier', 'legendre'"
            )
        powers = np.add.outer(np.arange(modes), np.arange(modes))
        return cls(scale * rng.standard_normal((modes, modes)) * decay**powers, family)


@dataclass(frozen=True)
class SeriesFunction:
    """beta(a) = sum_p c_p phi_p(a): a smooth function of one variable (biases)."""

    coefficients: np.ndarray
    family: str = "fourier"

    def __call__(self, a: np.ndarray) -> np.ndarray:
        basis = _fourier_basis if self.family == "fourier" else _legendre_basis
        return basis(a, len(self.coefficients)) @ self.coefficients

    @classmethod
    def random(cls, rng, family="fourier", modes=5, decay=0.5, scale=1.0) -> SeriesFunction:
        return cls(scale * rng.standard_normal(modes) * decay ** np.arange(modes), family)


@dataclass(frozen=True)
class ContinuousLayer:
    """The kernels of one layer (docs/model.md section 3); head h has kq[h], kk[h], kv[h], ko[h].

    kq, kk, kv map (y, eta) -> value, ko maps (eta, zeta); k1 maps (z, y), k2 (eta, z);
    beta1(z), beta2(eta); sigma1, sigma2 the layer-norm constraint; scale the temperature s.
    """

    kq: tuple[Kernel, ...]
    kk: tuple[Kernel, ...]
    kv: tuple[Kernel, ...]
    ko: tuple[Kernel, ...]
    k1: Kernel
    beta1: Callable[[np.ndarray], np.ndarray]
    k2: Kernel
    beta2: Callable[[np.ndarray], np.ndarray]
    scale: float = 1.0
    sigma1: float = 0.0
    sigma2: float = 1.0

    @property
    def heads(self) -> int:
        return len(self.kq)

    @classmethod
    def random(
        cls,
        rng: np.random.Generator | int,
        heads: int = 2,
        family: str = "fourier",
        scale: float = 1.0,
        modes: int = 5,
    ) -> ContinuousLayer:
        rng = np.random.default_rng(rng)

        def kernels() -> tuple[SeriesKernel, ...]:
            return tuple(SeriesKernel.random(rng, family, modes) for _ in range(heads))

        return cls(
            kq=kernels(),
            kk=kernels(),
            kv=kernels(),
            ko=kernels(),
            k1=SeriesKernel.random(rng, family, modes),
            beta1=SeriesFunction.random(rng, family, modes, scale=0.1),
            k2=SeriesKernel.random(rng, family, modes),
            beta2=SeriesFunction.random(rng, family, modes, scale=0.1),
            scale=scale,
        )
