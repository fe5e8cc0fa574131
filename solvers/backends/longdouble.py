"""The platform's long double (x87 80-bit extended on x86-64): numpy's arithmetic in the
format itself, and the few operations numpy and scipy have only in float64 done another way
(docs/schemes.md section 6)."""

from __future__ import annotations

import mpmath
import numpy as np

from solvers.backends.base import Array, Backend, exact_decimals
from solvers.backends.floats import NativeFloatBackend, tanh_gelu


class LongDoubleBackend(NativeFloatBackend):
    """np.longdouble: its numbers are wider than float64, so they travel as exact decimal
    expansions, 1 / sqrt(n), tanh-GELU and silu are evaluated in long double, and erf (float64
    only in scipy) comes from mpmath. expm runs in float64 and is rounded to the format."""

    def __init__(self) -> None:
        super().__init__("longdouble", np.longdouble)

    def portable(self, value: Array) -> np.ndarray:
        """The exact decimal expansions (a float64 would round them)."""
        return exact_decimals(np.asarray(value, dtype=self.dtype))

    def reciprocal_sqrt(self, n: int) -> Array:
        return Backend.reciprocal_sqrt(self, n)

    def gelu(self, a: Array) -> Array:
        with mpmath.workdps(30):
            erf = [
                mpmath.nstr(mpmath.erf(mpmath.mpf(str(x)) / mpmath.sqrt(2)), 25)
                for x in np.ravel(a)
            ]
        phi = (1 + np.array(erf, dtype=self.dtype).reshape(np.shape(a))) / 2
        return a * phi

    def silu(self, a: Array) -> Array:
        x = np.asarray(a, dtype=self.dtype)
        with np.errstate(over="ignore"):
            return x / (1 + np.exp(-x))

    def gelu_tanh(self, a: Array) -> Array:
        return tanh_gelu(np.asarray(a, dtype=self.dtype))
