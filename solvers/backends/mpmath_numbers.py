"""mpmath at a chosen number of decimal digits: the independent high-precision path.

Each backend owns its own `mpmath.MPContext`, so no global precision is touched and two
backends of different precision can be used side by side. Every operation rounds to
the context's binary precision prec = dps_to_prec(digits) (u = 2^-prec). Matrix
products are summed exactly in integers and rounded once per entry (`exact_product`),
sums use `fsum`. mpmath runs on gmpy2's integers when gmpy2 is installed (a core
dependency); its results are the same either way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from fractions import Fraction
from functools import partial
from operator import mul

import mpmath
import numpy as np
from mpmath.libmp import dps_to_prec, from_man_exp, repr_dps, to_rational, to_str

from solvers.backends.base import Array, Backend, ball_midpoints, exact_decimals, matmul_by_matrix
from solvers.errors import InvalidInputError


class MpmathBackend(Backend):
    """Object arrays of mpf numbers of one MPContext."""

    overflows = False

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
        self._tanh = np.frompyfunc(ctx.tanh, 1, 1)
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
        self._portable = np.frompyfunc(
            lambda x: Fraction(*map(int, to_rational(x._mpf_))) if ctx.isfinite(x) else float(x),
            1,
            1,
        )

    def widened(self, extra_digits: int) -> Backend:
        return MpmathBackend(self.digits + extra_digits)

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

    def portable(self, value: Array) -> np.ndarray:
        """Each finite mpf as the Fraction it is exactly (its repr-length decimal string
        would be rounded a second time by a more precise system); inf and NaN as floats."""
        return np.asarray(self._portable(np.asarray(value, dtype=object)), dtype=object)

    def to_output(self, value: Array) -> np.ndarray:
        return self._objects(value)

    def all_finite(self, value: Array) -> bool:
        return bool(np.all(self._finite(np.asarray(value, dtype=object))))

    def certainly_positive(self, value: Array) -> np.ndarray:
        return np.asarray(np.asarray(value, dtype=object) > 0, dtype=bool)

    def constant(self, value: object, name: str = "value") -> Array:
        """Read-only mpf numbers; a matrix also keeps its columns, and a vector itself, as
        integers times 2^e (`_scaled`), what `exact_product` makes of a right-hand factor
        or a bias, for the many products to come."""
        numbers = self.asarray(value, name)
        numbers.flags.writeable = False  # before the view: neither can be written again
        if numbers.ndim in (1, 2):
            vectors = numbers.T.tolist() if numbers.ndim == 2 else [numbers.tolist()]
            numbers = numbers.view(ScaledOperand)
            numbers.scaled = _scaled(vectors, 4 * self.context.prec + 64)
        return numbers

    def matmul(self, a: Array, b: Array) -> Array:
        return matmul_by_matrix(a, b, self.exact_product)

    def affine(self, a: Array, w: Array, b: Array) -> Array:
        """a @ w + b with each entry's sum and its bias rounded once (`exact_product`); a
        bias that is not one number per column of w is broadcast as the base does."""
        if np.ndim(b) != 1 or len(b) != np.shape(w)[-1]:
            return super().affine(a, w, b)
        return matmul_by_matrix(a, w, partial(self.exact_product, bias=b))

    def exact_product(self, x: Array, y: Array, bias: Array | None = None) -> Iterator:
        """x @ y (+ bias, 1-D, along each row) for 2-D arrays of mpf, its entries row by row,
        each sum_k x_ik y_kj (+ b_j) exactly, rounded once.

        x is M 2^e and y is N 2^f with integer matrices M, N and e, f the least exponents
        of their nonzero entries (mpf numbers are m 2^e with integer m), so the entry is
        (sum_k M_ik N_kj) 2^(e + f): an integer matrix product, each entry one sum in
        integers, rounded to the context's precision by mpmath's from_man_exp
        (docs/schemes.md section 6). A bias B 2^g joins each sum in integers at the
        exponent min(e + f, g). mpmath's fdot makes one Python call per entry and drops
        terms 2 prec bits below the running sum, which this does not. The integers have
        at most 5 prec + 64 bits: a factor whose nonzero exponents spread wider (an exp
        of a large negative number beside numbers near 1; over all the rows of x, which
        may be a whole batch), whose bias lies as far from its products, or that holds
        inf, nan or other types, sends the product to fdot, whose entries are then not
        always rounded once.
        """
        ctx = self.context
        spread = 4 * ctx.prec + 64
        rows = x.tolist()
        left = _scaled(rows, spread)
        right = _scaled_form(y, lambda: y.T.tolist(), spread)
        terms = None if bias is None else _scaled_form(bias, lambda: [bias.tolist()], spread)
        if terms is not None and not any(terms[0][0]):
            bias = None  # an exact zero bias: the product alone
        exact = left is not None and right is not None
        if exact and bias is not None:
            exact = terms is not None and abs(left[1] + right[1] - terms[1]) <= spread
        if not exact:
            columns = y.T.tolist()
            if bias is None:
                return (ctx.fdot(row, column) for row in rows for column in columns)
            one, biases = ctx.one, np.broadcast_to(bias, (len(columns),)).tolist()
            return (
                ctx.fdot([*row, one], [*column, b])
                for row in rows
                for column, b in zip(columns, biases, strict=True)
            )
        (left_integers, e), (right_integers, f) = left, right
        prec, rounding = ctx._prec_rounding
        make = ctx.make_mpf
        if bias is None:
            return (
                make(from_man_exp(sum(map(mul, row, column)), e + f, prec, rounding))
                for row in left_integers
                for column in right_integers
            )
        ([bias_integers], g), low = terms, min(e + f, terms[1])
        shift = e + f - low
        offsets = [b << (g - low) for b in bias_integers]
        return (
            make(from_man_exp((sum(map(mul, row, column)) << shift) + b, low, prec, rounding))
            for row in left_integers
            for column, b in zip(right_integers, offsets, strict=True)
        )

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

    def tanh(self, a: Array) -> Array:
        return self._objects(self._tanh(a))

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
        a = np.asarray(a, dtype=object)
        last = axis in (-1, a.ndim - 1)
        rows = a if last else np.moveaxis(a, axis, -1)
        fsum, count = self.context.fsum, math.prod(rows.shape[:-1])
        sums = np.fromiter(
            map(fsum, rows.reshape(count, rows.shape[-1]).tolist()), dtype=object, count=count
        )
        if last:
            return sums.reshape(*rows.shape[:-1], 1)
        return np.expand_dims(sums.reshape(rows.shape[:-1]), axis)


class ScaledOperand(np.ndarray):
    """A read-only object array of mpf numbers, a matrix or a vector, that also holds them
    in the integer form of `_scaled` (a matrix's columns, a vector as one; None when they
    have none).

    Only the array `constant` made carries `scaled` (arrays derived from it, a transpose
    or a slice, do not: `exact_product` scales them afresh), and neither it nor the array
    it views can be written to (nor it made writeable), so the cached form never goes
    stale.
    """

    scaled: tuple[list[list], int] | None = None


def _scaled_form(
    x: Array, vectors: Callable[[], list[list]], spread: int
) -> tuple[list[list], int] | None:
    """The integer form of x's `vectors()`: the one `constant` cached, else `_scaled`'s."""
    if isinstance(x, ScaledOperand) and "scaled" in x.__dict__:
        return x.__dict__["scaled"]
    return _scaled(vectors(), spread)


def _scaled(vectors: list[list], spread: int) -> tuple[list[list], int] | None:
    """Vectors of finite mpf numbers as integers times 2^e, e the least exponent of their
    nonzero entries: the integers (lists of the vectors' shape) and e; None when an entry
    is not a finite mpf number or the exponents of the nonzero entries spread over more
    than `spread` bits."""
    try:
        parts = [[x._mpf_ for x in vector] for vector in vectors]
    except AttributeError:
        return None
    flat = [p for vector in parts for p in vector]
    if any(p[2] for p in flat if not p[1]):
        return None  # inf or nan (mantissa 0, exponent not 0)
    of_nonzeros = [p[2] for p in flat if p[1]]
    low = min(of_nonzeros, default=0)
    if of_nonzeros and max(of_nonzeros) - low > spread:
        return None
    integers = [
        [((-p[1] if p[0] else p[1]) << (p[2] - low)) if p[1] else 0 for p in vector]
        for vector in parts
    ]
    return integers, low
