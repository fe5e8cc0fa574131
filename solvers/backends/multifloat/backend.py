"""The multi-float backends "float64x2", "float64x3" and "float64x4": fixed formats of 2, 3
and 4 float64 limbs (about 32, 48 and 64 decimal digits), computed in compiled float64
kernels (docs/rounding.md section 6).

Arrays are `MultiFloatArray`s; the operators run on them unchanged. Their numbers travel
exactly: `portable` gives each as the Fraction it is (the exact sum of its limbs), and
`asarray` reads numbers, strings and Fractions by taking each limb as the float64
nearest what the limbs before it leave, so a value that n limbs hold exactly is read
exactly (mpmath's and arb's numbers of up to 53 n bits, every float64 and long double).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from solvers.backends.base import Array, Backend
from solvers.backends.multifloat import conversion, functions, kernels, products, rows
from solvers.backends.multifloat import expansions as ex
from solvers.backends.multifloat.array import MultiFloatArray, limbs_of
from solvers.errors import InvalidInputError

OPERATION_BOUND = {2: 4.0, 3: 4.0, 4: 4.0}
"""The largest relative error of one arithmetic operation, in u^n = 2^(-53 n)
(docs/rounding.md section 6): the unit roundoff the rounding models count with."""

EVALUATION_COST = {2: (762e-6, 0.684e-9), 3: (852e-6, 5.60e-9), 4: (947e-6, 13.3e-9)}
"""A field evaluation's time (seconds, seconds a multiply-add) by limb count, fitted as
solvers.backends.floats.EVALUATION_COST is: a larger fixed part than a numpy format's
(each operation a compiled call), and at two limbs a fifth of long double's cost a
multiply-add."""

GELU_TANH_CUBIC = Fraction(44715, 10**6)
"""0.044715 of GELU's tanh form, exactly as the decimal."""


class MultiFloatBackend(Backend):
    """Numbers of `limbs` float64 limbs each, in MultiFloatArrays."""

    largest = float(np.finfo(np.float64).max)

    def __init__(self, limbs: int) -> None:
        if limbs not in ex.LIMBS:
            raise InvalidInputError(f"multi-floats have {ex.LIMBS} limbs, not {limbs!r}")
        self.limbs = limbs
        self.name = f"float64x{limbs}"
        self.unit_roundoff = OPERATION_BOUND[limbs] * 2.0 ** (-53 * limbs)
        self.evaluation_cost = EVALUATION_COST[limbs]

    def asarray(self, value: object, name: str = "value") -> Array:
        """Multi-floats from numbers, float arrays, decimal strings (a ball "[m +/- r]" gives
        its midpoint m), Fractions, mpmath numbers or multi-float arrays of this limb count
        (`conversion.read`). A finite value beyond float64's range is an error."""
        if isinstance(value, MultiFloatArray):
            return MultiFloatArray(limbs_of(value, self.limbs).copy())
        return MultiFloatArray(conversion.read(value, self.limbs, name))

    def constant(self, value: object, name: str = "value") -> Array:
        array = self.asarray(value, name)
        array.limbs.flags.writeable = False
        return array

    def _limbs(self, value: Array) -> np.ndarray:
        """The limbs of a multi-float array, or of anything `asarray` reads (the object
        arrays `to_output` makes)."""
        if isinstance(value, MultiFloatArray):
            return limbs_of(value, self.limbs)
        return conversion.read(value, self.limbs)

    def to_float64(self, value: Array) -> np.ndarray:
        """The limbs summed in float64 from the smallest up (the nearest float64 but for
        ties)."""
        limbs = self._limbs(value)
        with np.errstate(invalid="ignore"):
            total = np.sum(limbs[::-1], axis=0)
        return np.where(np.isfinite(limbs[0]), total, limbs[0])

    def portable(self, value: Array) -> np.ndarray:
        """Each number as the Fraction it is (its limbs' exact sum); inf and nan as floats."""
        return conversion.fractions(self._limbs(value))

    def to_strings(self, value: Array) -> np.ndarray:
        """The exact decimal expansions of the numbers (a binary fraction's is finite)."""
        return conversion.decimals(self._limbs(value))

    def to_output(self, value: Array) -> np.ndarray:
        """An object array of mpmath numbers (mpmath.mpf), each exactly its limbs' sum: what
        numpy code and mpmath take as they are; this backend reads them back exactly."""
        return conversion.mpmath_numbers(self._limbs(value))

    def all_finite(self, value: Array) -> bool:
        return bool(np.all(np.isfinite(self._limbs(value))))

    def certainly_positive(self, value: Array) -> np.ndarray:
        return self._limbs(value)[0] > 0

    def matmul(self, a: Array, b: Array) -> Array:
        """a @ b over the last two axes, broadcasting leading ones; a stack times one matrix
        is one product of all its rows."""
        left, right = limbs_of(a, self.limbs), limbs_of(b, self.limbs)
        n = self.limbs
        if left.ndim == 2:  # a vector: one row
            return self.matmul(MultiFloatArray(left[:, None, :]), b)[..., 0, :]
        if right.ndim == 3:
            rows = left.reshape(n, -1, left.shape[-1])
            product = products.matmul(rows, right)
            return MultiFloatArray(product.reshape(n, *left.shape[1:-1], right.shape[-1]))
        batch = np.broadcast_shapes(left.shape[1:-2], right.shape[1:-2])
        left = np.broadcast_to(left, (n, *batch, *left.shape[-2:]))
        right = np.broadcast_to(right, (n, *batch, *right.shape[-2:]))
        out = np.empty((n, *batch, left.shape[-2], right.shape[-1]))
        for index in np.ndindex(batch):
            at = (slice(None), *index)
            out[at] = products.matmul(left[at], right[at])
        return MultiFloatArray(out)

    def affine(self, a: Array, w: Array, b: Array) -> Array:
        """a @ w + b, the bias added into a fresh array by one kernel call."""
        product = limbs_of(self.matmul(a, w), self.limbs)
        return MultiFloatArray(kernels.binary(kernels.ADD, product, self._limbs(b)))

    def exp(self, a: Array) -> Array:
        return functions.exp(self.asarray(a))

    def log(self, a: Array) -> Array:
        return functions.log(self.asarray(a))

    def sqrt(self, a: Array) -> Array:
        return MultiFloatArray(kernels.sqrt(limbs_of(self.asarray(a), self.limbs)))

    def cos(self, a: Array) -> Array:
        return functions.cos(self.asarray(a))

    def sin(self, a: Array) -> Array:
        return functions.sin(self.asarray(a))

    def tanh(self, a: Array) -> Array:
        return functions.tanh(self.asarray(a))

    def pi(self) -> Array:
        return functions.constant("pi", self.limbs)

    def expm(self, a: Array) -> Array:
        """e^A of a square matrix: A / 2^s with norm at most 1/2, Taylor's series within
        u^n (Horner's scheme in matrix products), squared s times."""
        a = self.asarray(a)
        size = a.shape[-1]
        norm = float(np.max(np.sum(np.abs(self.to_float64(a)), axis=-1), initial=0.0))
        halvings = max(0, math.ceil(math.log2(norm)) + 1) if norm > 0 else 0
        scaled = MultiFloatArray(np.ldexp(a.limbs, -halvings))
        terms = functions.taylor_terms(0.5, self.limbs)
        identity = self.asarray(np.eye(size))
        total = identity.copy()
        for j in range(terms, 0, -1):
            total = identity + self.matmul(scaled, total) / float(j)
        for _ in range(halvings):
            total = self.matmul(total, total)
        return total

    def relu_(self, a: Array) -> Array:
        np.copyto(a.limbs, 0.0, where=~(a.limbs[0] > 0))  # every limb where the head is not > 0
        return a

    def gelu(self, a: Array) -> Array:
        """a Phi(a), Phi(a) = erfc(-a / sqrt 2) / 2: the kernel's erfc of a negative
        argument is 2 - erfc(|.|), so neither side cancels (`elementary.erfc`)."""
        return functions.gelu(self.asarray(a))

    def gelu_tanh(self, a: Array) -> Array:
        """a (1 + tanh(y)) / 2 = a logistic(2 y), y = sqrt(2 / pi) (a + 0.044715 a^3): the
        logistic form does not cancel where a is negative."""
        x = self.asarray(a)
        cubic = self.asarray(GELU_TANH_CUBIC)
        y = (x + cubic * x * x * x) * functions.constant("sqrt(2/pi)", self.limbs)
        return x * functions.logistic(y * 2.0)

    def silu(self, a: Array) -> Array:
        x = self.asarray(a)
        return x * functions.logistic(x)

    def sum(self, a: Array, axis: int) -> Array:
        limbs = limbs_of(a, self.limbs)
        axis = axis if axis < 0 else axis + 1
        rows = np.moveaxis(limbs, axis, -1)
        sums = kernels.row_sums(rows)[..., None]
        return MultiFloatArray(np.moveaxis(sums, -1, axis))

    def moments(self, a: Array, weights: Array | None = None) -> tuple[Array, Array]:
        """`Backend.moments` in one compiled call (`rows`) where no weights are given."""
        if weights is not None:
            return super().moments(a, weights)
        return rows.moments(self._own(a))

    def mean_square(self, a: Array, weights: Array | None = None) -> Array:
        """`Backend.mean_square` in one compiled call (`rows`) where no weights are given."""
        if weights is not None:
            return super().mean_square(a, weights)
        return rows.mean_square(self._own(a))

    def normalise_rows(
        self, u: Array, mean: Array, variance: Array, eps: Array, gain: Array, bias: Array
    ) -> Array:
        """`Backend.normalise_rows` in one compiled call (`rows`) for a scalar eps, the
        statistics one per row and the gain and bias scalars or of the rows' length."""
        u = self._own(u)
        rows_shape, length = (*u.shape[:-1], 1), u.shape[-1]
        if (
            np.size(eps) == 1
            and np.shape(mean) == np.shape(variance) == rows_shape
            and np.size(gain) in (1, length)
            and np.size(bias) in (1, length)
        ):
            return rows.normalise(u, mean, variance, eps, gain, bias)
        return super().normalise_rows(u, mean, variance, eps, gain, bias)

    def tangent_rows(
        self, u: Array, mean: Array, variance: Array, g: Array, weights: Array | None = None
    ) -> Array:
        """`Backend.tangent_rows` in one compiled call (`rows`) where no weights are given
        and g has u's shape."""
        u = self._own(u)
        if weights is None and np.shape(g) == u.shape:
            return rows.tangent(u, mean, variance, g)
        return super().tangent_rows(u, mean, variance, g, weights)

    def softmax_(self, scores: Array) -> Array:
        """`Backend.softmax_` (its float64 row maximum the shift) in one compiled call."""
        return rows.softmax_(scores)

    def _own(self, a: Array) -> MultiFloatArray:
        """a as a multi-float array of this limb count, not copied when it is one."""
        if isinstance(a, MultiFloatArray):
            limbs_of(a, self.limbs)  # the limb count checked
            return a
        return self.asarray(a)
