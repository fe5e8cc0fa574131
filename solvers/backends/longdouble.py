"""The platform's long double (x87 80-bit extended on x86-64): numpy's arithmetic in the
format itself, and the few operations numpy and scipy have only in float64 done another way
(docs/schemes.md section 6)."""

from __future__ import annotations

import math

import numpy as np

from solvers.backends.base import Array, Backend, exact_decimals
from solvers.backends.floats import NativeFloatBackend, tanh_gelu


class LongDoubleBackend(NativeFloatBackend):
    """np.longdouble: its numbers are wider than float64, so they travel as exact decimal
    expansions, 1 / sqrt(n), tanh-GELU and silu are evaluated in long double, and so is erf
    (float64 only in scipy), through erfc (`erfc`). expm runs in float64 and is rounded to
    the format."""

    def __init__(self) -> None:
        super().__init__("longdouble", np.longdouble)

    def portable(self, value: Array) -> np.ndarray:
        """The exact decimal expansions (a float64 would round them)."""
        return exact_decimals(np.asarray(value, dtype=self.dtype))

    def reciprocal_sqrt(self, n: int) -> Array:
        return Backend.reciprocal_sqrt(self, n)

    def gelu(self, a: Array) -> Array:
        """a (1 + erf(a / sqrt 2)) / 2 = a erfc(-a / sqrt 2) / 2, in long double (`erfc`)."""
        x = np.asarray(a, dtype=self.dtype)
        return x * erfc(-x / np.sqrt(np.longdouble(2))) / 2

    def silu(self, a: Array) -> Array:
        x = np.asarray(a, dtype=self.dtype)
        with np.errstate(over="ignore"):
            return x / (1 + np.exp(-x))

    def tanh(self, a: Array) -> Array:
        """The C library's tanhl in long double."""
        return np.tanh(np.asarray(a, dtype=self.dtype))

    def gelu_tanh(self, a: Array) -> Array:
        return tanh_gelu(np.asarray(a, dtype=self.dtype))


SERIES_EDGE = 2.0
"""erfc(z) comes from the series of erf below this z and from the continued fraction above."""
FAR = 1e4
"""|x| is taken as at most this: erfc(1e4) = exp(-1e8) / ... is 0 in long double."""


def erfc(x: np.ndarray) -> np.ndarray:
    """erfc(x) = 1 - erf(x) elementwise in long double (docs/schemes.md section 6); nan for
    nan. For z = |x| < SERIES_EDGE, 1 - erf(z) from the series of positive terms

        erf(z) = (2 / sqrt(pi)) exp(-z^2) sum_{n >= 0} (2 z^2)^n z / (1 3 5 ... (2n + 1)),

    summed until every term is below a unit roundoff of the sum (33 terms at z = 2 in the
    x87 format); no term cancels another, so the rounding grows only with the count of
    terms. For z >= SERIES_EDGE, Laplace's continued fraction

        erfc(z) = exp(-z^2) / sqrt(pi) / (z + (1/2) / (z + (2/2) / (z + (3/2) / (z + ...)))),

    evaluated from its tail at the depth that reaches a unit roundoff at z = 2
    (`fraction_terms`: 80 in the x87 format, more where long double is wider): relatively
    accurate, so GELU's negative side a erfc(-a / sqrt 2) / 2 keeps its relative digits
    for a < -2 sqrt 2 (between, 1 - erf cancels up to 1 / erfc(2) = 213-fold).
    erfc(-z) = 2 - erfc(z). Measured against mpmath (x87): within 12 unit roundoffs
    absolutely, and on the fraction's side within 1.5 z^2 of them relatively (exp(-z^2)
    inherits the rounding of z^2) until erfc is subnormal (z above 106.5);
    tests/solvers/backends/test_backends.py."""
    x = np.asarray(x, dtype=np.longdouble)
    unit = np.finfo(np.longdouble).eps / 2
    z = np.nan_to_num(np.minimum(np.abs(x), FAR), nan=0.0)
    near = np.minimum(z, SERIES_EDGE)
    square = near * near
    term, total, n = near, near, 0
    while np.any(term > unit * total):
        n += 1
        term = term * (2 * square) / (2 * n + 1)
        total = total + term
    root_pi = np.sqrt(4 * np.arctan(np.longdouble(1)))
    positive = 1 - total * np.exp(-square) * (2 / root_pi)
    far = z >= SERIES_EDGE
    if np.any(far):
        y = z[far]
        with np.errstate(under="ignore"):
            positive[far] = np.exp(-y * y) / root_pi / _fraction(y, unit)
    return np.where(np.isnan(x), x, np.where(x < 0, 2 - positive, positive))


def _fraction(y: np.ndarray, unit: float) -> np.ndarray:
    """y + (1/2) / (y + (2/2) / (y + (3/2) / (y + ...))) for y >= SERIES_EDGE, from its
    tail, fraction_terms(unit) deep."""
    value = y.copy()
    for k in range(fraction_terms(unit), 0, -1):
        value = y + np.longdouble(k) / 2 / value
    return value


def fraction_terms(unit: float) -> int:
    """The depth K at which the continued fraction is within `unit` at SERIES_EDGE: its
    truncation error falls as exp(b - 2 z sqrt(2 K)), b = 6.2 fitted at z = 2 (60 terms:
    3.4e-17, 80 terms: below 2^-64 in the x87 format); 80 terms there, 224 where long
    double is IEEE quad (2^-113)."""
    return math.ceil(((math.log(1 / unit) + 6.2) / (2 * SERIES_EDGE)) ** 2 / 2)
