"""The platform's long double (x87 80-bit extended on x86-64): numpy's arithmetic in the
format itself, and the few operations numpy and scipy have only in float64 done another way
(docs/schemes.md section 6)."""

from __future__ import annotations

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

    def gelu_tanh(self, a: Array) -> Array:
        return tanh_gelu(np.asarray(a, dtype=self.dtype))


SERIES_EDGE = 2.0
"""erfc(z) comes from the series of erf below this z and from the continued fraction above."""
FAR = 1e4
"""|x| is taken as at most this: erfc(1e4) = exp(-1e8) / ... is 0 in long double."""
FRACTION_TERMS = 80
"""Terms of the continued fraction: enough for a unit roundoff at z = SERIES_EDGE."""


def erfc(x: np.ndarray) -> np.ndarray:
    """erfc(x) = 1 - erf(x) elementwise in long double (docs/schemes.md section 6); nan for
    nan. For z = |x| < SERIES_EDGE, 1 - erf(z) from the series of positive terms

        erf(z) = (2 / sqrt(pi)) exp(-z^2) sum_{n >= 0} (2 z^2)^n z / (1 3 5 ... (2n + 1)),

    summed until every term is below a unit roundoff of the sum (at most 26 terms); no
    term cancels another, so the rounding grows only with the count of terms. For z >=
    SERIES_EDGE, Laplace's continued fraction

        erfc(z) = exp(-z^2) / sqrt(pi) / (z + (1/2) / (z + (2/2) / (z + (3/2) / (z + ...)))),

    FRACTION_TERMS deep, evaluated from its tail: relatively accurate, so 1 + erf(x) =
    erfc(-x) keeps its digits where erf(x) is near -1 (GELU's negative side). erfc(-z) =
    2 - erfc(z). Against mpmath at 40 digits: within 8 unit roundoffs absolutely, and on
    the fraction's side within 2.5 z^2 of them relatively (exp(-z^2) inherits the rounding
    of z^2); tests/solvers/test_backends.py."""
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
    series = 1 - total * np.exp(-square) * (2 / root_pi)
    far = np.maximum(z, SERIES_EDGE)
    fraction = far
    for k in range(FRACTION_TERMS, 0, -1):
        fraction = far + np.longdouble(k) / 2 / fraction
    with np.errstate(under="ignore"):
        tail = np.exp(-far * far) / root_pi / fraction
    positive = np.where(z < SERIES_EDGE, series, tail)
    return np.where(np.isnan(x), x, np.where(x < 0, 2 - positive, positive))
