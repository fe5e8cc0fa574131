"""IEEE binary floats: float64 and float32 natively; float16, bfloat16 as hardware does
(longdouble: solvers.backends.longdouble).

Rounding model of the low precisions (float16, and bfloat16 from `ml_dtypes`), as GPUs
and CPUs with mixed-precision units run them: every stored value and every elementwise
result (add, multiply, divide, exp, sqrt, relu) is rounded to the format; matrix
products and reductions (sums over features or tokens, and the layer-norm mean and
variance, as torch's half-precision layer-norm kernels compute them) take their operands
exactly into float32, compute and accumulate in float32, and round the result once to
the format. The unit roundoff u is 2^-11 for float16 and 2^-8 for bfloat16, against which
bounds are stated; the float32 accumulation adds at most K 2^-24 relatively for a length-K
sum.

The native floats round every operation to their own format (numpy and BLAS); float32
and float64 run exp, the row softmax, the layer norm, the tangent projection, relu with its
bias and GELU in the fused kernels of solvers.backends.fused (docs/schemes.md section 6).
"""

from __future__ import annotations

import decimal
import functools
import math
import warnings
from fractions import Fraction

import mpmath
import numpy as np
import scipy.linalg
import scipy.special

import solvers.backends.fused as fused
from solvers.backends.base import Array, Backend, ball_midpoints
from solvers.errors import InvalidInputError

LONG_DOUBLE_SIGNIFICAND = np.finfo(np.longdouble).nmant + 1
"""The bits of long double's significand: integers up to this size it holds exactly."""
LONG_DOUBLE_DIGITS = 40
"""Significant digits of the decimal a large Fraction is read through: well beyond the 21
that round-trip a long double, so the decimal's own rounding cannot move the result but at
an exact tie."""


EVALUATION_COST = {
    "float16": (104e-6, 0.205e-9),
    "bfloat16": (102e-6, 0.075e-9),
    "float32": (65e-6, 0.020e-9),
    "float64": (64e-6, 0.033e-9),
    np.dtype(np.longdouble).name: (512e-6, 3.30e-9),
}
"""A field evaluation's time (seconds, seconds a multiply-add) by dtype name (long
double's is float128 or float96 by platform), fitted to the best of 15 to 20 evaluations
on the 2-core machine of four problems of 2.3e3 to 4.7e7 multiply-adds (docs/schemes.md
section 7): long double, outside BLAS, costs 100 times float64 a multiply-add. The
multi-floats': solvers.backends.multifloat.backend.EVALUATION_COST."""


class NativeFloatBackend(Backend):
    """A numpy float dtype whose arithmetic numpy and BLAS perform natively."""

    def __init__(self, name: str, dtype: type | np.dtype) -> None:
        self.name = name
        self.dtype = np.dtype(dtype)
        self._info = np.finfo(self.dtype) if self.dtype.kind == "f" else _ml_finfo(self.dtype)
        self.unit_roundoff = float(self._info.eps) / 2
        with np.errstate(over="ignore"):  # long double's largest is beyond float64's
            self.largest = float(self._info.max)
        self.evaluation_cost = EVALUATION_COST[self.dtype.name]

    def asarray(self, value: object, name: str = "value") -> Array:
        """Round numbers, float arrays or decimal strings to the format.

        Strings are parsed in long double and rounded once (a ball "[m +/- r]" gives its
        midpoint m); a Fraction p/q is rounded as long double p / q; other objects (mpf,
        arb) go through float(). A finite value that overflows the format is an error.
        A value already in the format is copied, and a Fraction's rounding is computed
        once per format: the steppers convert their times and coefficients at every step.
        """
        if (isinstance(value, np.ndarray | np.generic) and value.dtype == self.dtype) or (
            type(value) is float and self.dtype == np.float64
        ):
            return np.array(value, dtype=self.dtype)
        if isinstance(value, Fraction):
            return _rounded_fraction(self, value.numerator, value.denominator, name).copy()
        return self._rounded(value, name)

    def _rounded(self, value: object, name: str) -> Array:
        source = np.asarray(value)
        if source.dtype.kind in "US":
            source = ball_midpoints(source)
        fractions = np.zeros(source.shape, bool)  # finite, even beyond long double's range
        with np.errstate(over="ignore"):  # overflows are refused below
            if source.dtype.kind == "O":
                fractions = np.vectorize(_is_fraction, otypes=[bool])(source)
                source = np.vectorize(_exact_enough, otypes=[np.longdouble])(source)
            if source.dtype.kind in "US":
                source = source.astype(np.longdouble)
        with np.errstate(over="ignore", invalid="ignore"):
            rounded = source.astype(self.dtype)
        overflowed = (np.isfinite(source) | fractions) & ~np.isfinite(rounded)
        if overflowed.any():
            where = tuple(int(i) for i in np.argwhere(overflowed)[0])
            value = source[where]
            shown = f"{float(value):.6g}" if np.isfinite(value) else "beyond long double's range"
            raise InvalidInputError(
                f"{name} {shown} at index {where} overflows {self.name} "
                f"(largest finite {float(self._info.max):.6g})"
            )
        return rounded

    def to_float64(self, value: Array) -> np.ndarray:
        return np.asarray(value, dtype=np.float64)

    def to_strings(self, value: Array) -> np.ndarray:
        value = np.asarray(value, dtype=self.dtype)
        # shortest strings that round-trip; bfloat16 values are exact float32 values
        source = value.astype(np.float32) if self.dtype.kind != "f" else value
        return np.vectorize(lambda x: np.format_float_scientific(x, unique=True), otypes=[str])(
            source
        )

    def portable(self, value: Array) -> np.ndarray:
        """float64 numbers: every value of a format no wider than float64 is one."""
        return self.to_float64(value)

    def to_output(self, value: Array) -> np.ndarray:
        return np.asarray(value, dtype=self.dtype)

    def all_finite(self, value: Array) -> bool:
        return bool(np.isfinite(value).all())

    def certainly_positive(self, value: Array) -> np.ndarray:
        return np.asarray(value) > 0

    def matmul(self, a: Array, b: Array) -> Array:
        """a @ b; a stack of matrices times one matrix is one product of all their rows
        (numpy would call the BLAS once per matrix)."""
        if np.ndim(a) > 2 and np.ndim(b) == 2:
            a = np.asarray(a)
            rows = np.matmul(a.reshape(-1, a.shape[-1]), b)
            return rows.reshape(*a.shape[:-1], rows.shape[-1])
        return np.matmul(a, b)

    def exp(self, a: Array) -> Array:
        return np.exp(a)

    def log(self, a: Array) -> Array:
        return np.log(a)

    def reciprocal_sqrt(self, n: int) -> Array:
        """float64's 1 / sqrt(n) rounded once into this format (the value torch uses; for
        float32 and below nearer the real number than two roundings in the format)."""
        return self.asarray(1.0 / math.sqrt(n))

    def sqrt(self, a: Array) -> Array:
        return np.sqrt(a)

    def cos(self, a: Array) -> Array:
        return np.cos(a)

    def sin(self, a: Array) -> Array:
        return np.sin(a)

    def tanh(self, a: Array) -> Array:
        """Evaluated in float64 (the C library's tanh) and rounded to the format."""
        return np.tanh(np.asarray(a, dtype=np.float64)).astype(self.dtype)

    def pi(self) -> Array:
        return self.asarray(np.pi)

    def expm(self, a: Array) -> Array:
        """scipy's scaling-and-squaring Pade expm in float64, rounded to the format."""
        return np.asarray(scipy.linalg.expm(np.asarray(a, np.float64))).astype(self.dtype)

    def relu_(self, a: Array) -> Array:
        return np.maximum(a, 0, out=a)

    def gelu(self, a: Array) -> Array:
        wide = np.asarray(a, dtype=np.float64)  # evaluated in float64, rounded to the format
        return (wide * (1 + scipy.special.erf(wide / np.sqrt(2))) / 2).astype(self.dtype)

    def silu(self, a: Array) -> Array:
        """Evaluated in float64 and rounded to the format (exp(-x) overflows to inf for
        x < -709, where silu(x) is -0 to float64's precision)."""
        wide = np.asarray(a, dtype=np.float64)
        with np.errstate(over="ignore"):
            return (wide / (1 + np.exp(-wide))).astype(self.dtype)

    def gelu_tanh(self, a: Array) -> Array:
        """Evaluated in float64 and rounded to the format."""
        return tanh_gelu(np.asarray(a, dtype=np.float64)).astype(self.dtype)

    def sum(self, a: Array, axis: int) -> Array:
        return np.sum(a, axis=axis, keepdims=True)

    def softmax_(self, scores: Array) -> Array:
        """Row softmax (the base formula, shift by the row maximum) with exp in place."""
        scores -= np.max(scores, axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= self.sum(scores, -1)
        return scores


class FusedFloatBackend(NativeFloatBackend):
    """float32 or float64, with exp, the row softmax, the layer norm (moments and
    normalisation), the tangent projection, relu with its bias and GELU in fused kernels
    (solvers.backends.fused): the same formulas as the base protocol, each row in one
    pass, exp vectorised (within 2u; the sums in any order)."""

    def exp(self, a: Array) -> Array:
        return fused.exp_(np.array(a, dtype=self.dtype, order="C"))

    def gelu(self, a: Array) -> Array:
        """GELU as in the native formats (evaluated in float64, rounded to the format), in
        one pass with the C library's erf."""
        a = np.asarray(a)
        if not self._fits(a):
            return super().gelu(a)
        return fused.gelu(a, np.empty_like(a))

    def bias_relu_(self, a: Array, bias: Array) -> Array:
        """max(a + b, 0) of the base protocol in one pass (arrays of other layouts or
        formats take the base path)."""
        bias = np.asarray(bias)
        if not (self._fits_in_place(a) and self._fits(bias) and bias.shape == a.shape[-1:]):
            return super().bias_relu_(a, bias)
        return fused.bias_relu_(a, bias)

    def softmax_(self, scores: Array) -> Array:
        """The base protocol's row softmax (shift by the row maximum), in place; arrays that
        are not C-contiguous, writeable and of this format take the base path."""
        if not self._fits_in_place(scores):
            return super().softmax_(scores)
        return fused.softmax_(scores)

    def moments(self, a: Array, weights: Array | None = None) -> tuple[Array, Array]:
        """The two-pass mean and variance of the base protocol, per row in one kernel
        (quadrature weights take the base path)."""
        if weights is not None or not (self._fits(a) and a.ndim):
            return super().moments(a, weights)
        mean = np.empty((*a.shape[:-1], 1), self.dtype)
        return fused.moments(a, mean, np.empty_like(mean))

    def normalise_rows(
        self, u: Array, mean: Array, variance: Array, eps: Array, gain: Array, bias: Array
    ) -> Array:
        """The layer norm of the base protocol given the moments, per row in one kernel
        (arrays of other shapes or formats take the base path)."""
        d = u.shape[-1] if np.ndim(u) else 0
        gain, bias = np.asarray(gain), np.asarray(bias)
        if not (
            self._fits_rows(u, mean, variance)
            and all(x.dtype == self.dtype and x.shape in ((), (d,)) for x in (gain, bias))
            and np.ndim(eps) == 0
        ):
            return super().normalise_rows(u, mean, variance, eps, gain, bias)
        gain, bias = (np.ascontiguousarray(np.broadcast_to(x, (d,))) for x in (gain, bias))
        return fused.normalise(u, mean, variance, float(eps), gain, bias, np.empty_like(u))

    def tangent_rows(
        self, u: Array, mean: Array, variance: Array, g: Array, weights: Array | None = None
    ) -> Array:
        """Pi_T(u) g of the base protocol, per row in one kernel (quadrature weights and
        arrays of other shapes or formats take the base path)."""
        if (
            not (weights is None and self._fits_rows(u, mean, variance) and self._fits(g))
            or g.shape != u.shape
        ):
            return super().tangent_rows(u, mean, variance, g, weights)
        return fused.tangent(u, mean, variance, g, np.empty_like(g))

    def _fits(self, a: Array) -> bool:
        """Whether a kernel can take `a`: a non-empty C-contiguous array of this format."""
        return (
            type(a) is np.ndarray and a.dtype == self.dtype and a.size > 0 and a.flags.c_contiguous
        )

    def _fits_in_place(self, a: Array) -> bool:
        """Whether a kernel can work along the last axis of `a` and write into it."""
        return self._fits(a) and a.ndim > 0 and a.flags.writeable

    def _fits_rows(self, u: Array, mean: Array, variance: Array) -> bool:
        """Whether a kernel can take rows u with their moments (last axis 1)."""
        return (
            all(map(self._fits, (u, mean, variance)))
            and mean.shape == (*u.shape[:-1], 1)
            and variance.shape == mean.shape
        )


class MixedPrecisionBackend(NativeFloatBackend):
    """float16 or bfloat16 storage and elementwise results; float32 products and sums."""

    def matmul(self, a: Array, b: Array) -> Array:
        product = np.matmul(np.asarray(a, np.float32), np.asarray(b, np.float32))
        return product.astype(self.dtype)

    def sum(self, a: Array, axis: int) -> Array:
        return np.sum(np.asarray(a, np.float32), axis=axis, keepdims=True).astype(self.dtype)

    def moments(self, a: Array, weights: Array | None = None) -> tuple[Array, Array]:
        wide = np.asarray(a, np.float32)
        weights = None if weights is None else np.asarray(weights, np.float32)
        mean = np.average(wide, axis=-1, weights=weights, keepdims=True)
        centred = wide - mean
        variance = np.average(centred * centred, axis=-1, weights=weights, keepdims=True)
        return mean.astype(self.dtype), variance.astype(self.dtype)

    def mean_square(self, a: Array, weights: Array | None = None) -> Array:
        wide = np.asarray(a, np.float32)
        weights = None if weights is None else np.asarray(weights, np.float32)
        square = np.average(wide * wide, axis=-1, weights=weights, keepdims=True)
        return square.astype(self.dtype)


@functools.lru_cache(maxsize=4096)
def _rounded_fraction(
    bk: NativeFloatBackend, numerator: int, denominator: int, name: str
) -> np.ndarray:
    """The fraction's rounding, cached by its two integers: a Fraction's own hash is Python
    code (a modular inverse), 1.7 us of every stepper coefficient's conversion."""
    return bk._rounded(Fraction(numerator, denominator), name)


def _is_fraction(x: object) -> bool:
    return isinstance(x, Fraction)


def _exact_enough(x: object) -> np.longdouble:
    """One object as long double, with no detour through float64: a Fraction p / q by one
    division when long double holds p and q exactly, else through its decimal expansion
    to LONG_DOUBLE_DIGITS significant digits (numbers of any size: an mpf's p and q may
    have thousands of digits, far beyond what numpy converts)."""
    if not isinstance(x, Fraction):
        return np.longdouble(x)
    p, q = x.numerator, x.denominator
    if max(abs(p).bit_length(), q.bit_length()) <= LONG_DOUBLE_SIGNIFICAND:
        return np.longdouble(p) / np.longdouble(q)
    context = decimal.Context(prec=LONG_DOUBLE_DIGITS, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
    value = context.divide(decimal.Decimal(p), decimal.Decimal(q))
    with warnings.catch_warnings():  # beyond long double's range: inf (refused) or 0
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.longdouble(str(value))


def tanh_gelu(x: np.ndarray) -> np.ndarray:
    """x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2 in x's own float arithmetic, its
    constants correctly rounded to x's format. The cube is x x x, two roundings, as torch
    computes it: numpy's x**3 calls the C library's pow, 47 ns an entry against 0.7 (the
    character-level GPT-2's flow spent half its field there)."""
    root, cubic = _tanh_gelu_constants(x.dtype)
    return x * (1 + np.tanh(root * (x + cubic * (x * x * x)))) / 2


@functools.cache
def _tanh_gelu_constants(dtype: np.dtype) -> tuple[np.floating, np.floating]:
    """sqrt(2 / pi) and 0.044715, each correctly rounded to the format `dtype`."""
    with mpmath.workdps(40):
        root = dtype.type(mpmath.nstr(mpmath.sqrt(2 / mpmath.pi), 36))
    return root, dtype.type("0.044715")


def _ml_finfo(dtype: np.dtype):
    import ml_dtypes

    return ml_dtypes.finfo(dtype)
