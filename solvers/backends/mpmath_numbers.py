"""mpmath at a chosen number of decimal digits: the independent high-precision path.

Each backend owns its own `mpmath.MPContext`, so no global precision is touched and two
backends of different precision can be used side by side. Every operation rounds to
the context's binary precision prec = dps_to_prec(digits) (u = 2^-prec). Matrix
products and sums use `fdot` and `fsum`, which accumulate exactly and round once.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
from mpmath.libmp import dps_to_prec, repr_dps, to_str

from solvers.backends.base import Array, Backend, ball_midpoints, exact_decimals, matmul_by_matrix
from solvers.errors import InvalidInputError


class MpmathBackend(Backend):
    """Object arrays of mpf numbers of one MPContext."""

    def __init__(self, digits: int) -> None:
        self.name = "mpmath"
        self.digits = digits
        self.context = mpmath.MPContext()
        self.context.prec = dps_to_prec(digits)
        self.unit_roundoff = 2.0**-self.context.prec
        ctx = self.context
        self._convert = np.frompyfunc(self._number, 1, 1)
        self._exp = np.frompyfunc(ctx.exp, 1, 1)
        self._log = np.frompyfunc(ctx.log, 1, 1)
        self._sqrt = np.frompyfunc(ctx.sqrt, 1, 1)
        self._cos = np.frompyfunc(ctx.cos, 1, 1)
        self._sin = np.frompyfunc(ctx.sin, 1, 1)
        self._relu = np.frompyfunc(lambda x: x if x > 0 else ctx.zero, 1, 1)
        root2 = ctx.sqrt(2)
        self._gelu = np.frompyfunc(lambda x: x * (1 + ctx.erf(x / root2)) / 2, 1, 1)
        root, cubic = ctx.sqrt(2 / ctx.pi), ctx.mpf(44715) / 10**6
        self._gelu_tanh = np.frompyfunc(
            lambda x: x * (1 + ctx.tanh(root * (x + cubic * x**3))) / 2, 1, 1
        )
        self._float = np.frompyfunc(float, 1, 1)
        digits_out = repr_dps(ctx.prec)
        self._string = np.frompyfunc(lambda x: to_str(x._mpf_, digits_out), 1, 1)
        self._finite = np.frompyfunc(ctx.isfinite, 1, 1)

    def _number(self, x: object) -> object:
        if isinstance(x, Fraction):
            return self.context.mpf(x.numerator) / x.denominator
        if isinstance(x, np.floating | np.integer):
            x = x.item()
        try:
            return self.context.mpf(x)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"cannot read {x!r:.60} as an mpmath number") from exc

    def _objects(self, result: object) -> Array:
        return np.asarray(result, dtype=object)

    def asarray(self, value: object, name: str = "value") -> Array:
        """mpf numbers of this context from numbers, float arrays, mpf or decimal strings.

        Decimal strings are rounded correctly once (a ball "[m +/- r]" gives its midpoint).
        """
        source = np.asarray(value)
        if (
            source.dtype.kind == "O"
            and source.size
            and all(isinstance(x, self.context.mpf) for x in source.flat)
        ):
            return source.copy()
        if source.dtype.kind in "US":
            source = ball_midpoints(source)
        if source.dtype.kind == "f" and source.dtype.itemsize > 8:
            source = exact_decimals(source)
        return self._objects(self._convert(source.astype(object)))

    def to_float64(self, value: Array) -> np.ndarray:
        return np.asarray(self._float(np.asarray(value, dtype=object)), dtype=np.float64)

    def to_strings(self, value: Array) -> np.ndarray:
        return np.asarray(self._string(np.asarray(value, dtype=object)), dtype=str)

    def to_output(self, value: Array) -> np.ndarray:
        return self._objects(value)

    def all_finite(self, value: Array) -> bool:
        return bool(np.all(self._finite(np.asarray(value, dtype=object))))

    def certainly_positive(self, value: Array) -> np.ndarray:
        return np.asarray(np.asarray(value, dtype=object) > 0, dtype=bool)

    def matmul(self, a: Array, b: Array) -> Array:
        fdot = self.context.fdot

        def product(x: Array, y: Array) -> list:
            columns = y.T.tolist()
            return [[fdot(row, column) for column in columns] for row in x.tolist()]

        return matmul_by_matrix(a, b, product)

    def exp(self, a: Array) -> Array:
        return self._objects(self._exp(a))

    def log(self, a: Array) -> Array:
        return self._objects(self._log(a))

    def sqrt(self, a: Array) -> Array:
        return self._objects(self._sqrt(a))

    def cos(self, a: Array) -> Array:
        return self._objects(self._cos(a))

    def sin(self, a: Array) -> Array:
        return self._objects(self._sin(a))

    def pi(self) -> Array:
        return self._objects(+self.context.pi)

    def expm(self, a: Array) -> Array:
        """mpmath's expm (Taylor with scaling and squaring) at this context's precision."""
        result = self.context.expm(self.context.matrix(np.asarray(a, dtype=object).tolist()))
        return self._objects(result.tolist())

    def gelu(self, a: Array) -> Array:
        return self._objects(self._gelu(a))

    def gelu_tanh(self, a: Array) -> Array:
        return self._objects(self._gelu_tanh(a))

    def relu_(self, a: Array) -> Array:
        a[...] = self._relu(a)
        return a

    def sum(self, a: Array, axis: int) -> Array:
        a = np.moveaxis(np.asarray(a, dtype=object), axis, -1)
        fsum = self.context.fsum
        sums = np.empty(a.shape[:-1], dtype=object)
        for index in np.ndindex(sums.shape):
            sums[index] = fsum(a[index].tolist())
        return np.expand_dims(sums, axis)
