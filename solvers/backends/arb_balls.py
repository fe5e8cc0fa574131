"""Arb midpoint-radius balls (python-flint) at a chosen number of decimal digits.

Every operation returns a ball containing the exact result for every point of its
operands, so a final radius bounds the rounding error of the whole computation. Radii
overestimate error growth (the wrapping effect), so `certify` re-runs with guard bits
until the radii are below 10^-digits of the result (docs/schemes.md section 6). The
working precision is python-flint's global `ctx.prec`, set by `active()` and restored.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import flint
import numpy as np
from mpmath.libmp import dps_to_prec, repr_dps

from solvers.backends.base import Array, Backend, exact_decimals, matmul_by_matrix
from solvers.errors import (
    InvalidInputError,
    NumericalBreakdownError,
    UndefinedOperationError,
    WideBallsError,
)

FIRST_GUARD_BITS = 32
MARGIN_BITS = 16
MAX_ATTEMPTS = 5


class ArbBackend(Backend):
    """Object arrays of flint.arb balls."""

    measures_rounding = True
    overflows = False

    def __init__(self, digits: int, guard_bits: int = 0) -> None:
        self.name = "arb"
        self.digits = digits
        self.guard_bits = guard_bits
        self.prec = dps_to_prec(digits) + guard_bits
        self.unit_roundoff = 2.0 ** -dps_to_prec(digits)
        self._convert = np.frompyfunc(self._ball, 1, 1)
        # the methods themselves, not lambdas around them: a Python frame per ball costs
        # about as much as exp at 30 digits
        self._exp = np.frompyfunc(flint.arb.exp, 1, 1)
        self._log = np.frompyfunc(flint.arb.log, 1, 1)
        self._sqrt = np.frompyfunc(flint.arb.sqrt, 1, 1)
        self._cos = np.frompyfunc(flint.arb.cos, 1, 1)
        self._sin = np.frompyfunc(flint.arb.sin, 1, 1)
        self._tanh = np.frompyfunc(flint.arb.tanh, 1, 1)
        self._relu = np.frompyfunc(flint.arb.nonnegative_part, 1, 1)
        self._erf = np.frompyfunc(flint.arb.erf, 1, 1)
        self._gelu_tanh = np.frompyfunc(_gelu_tanh, 1, 1)
        with self.active():
            self._root_half = flint.arb(2).rsqrt()  # a ball containing 1 / sqrt 2
        self._float = np.frompyfunc(lambda x: float(x.mid()), 1, 1)
        self._radius = np.frompyfunc(lambda x: float(x.rad()), 1, 1)
        self._midpoint = np.frompyfunc(lambda x: flint.arb(x.mid()), 1, 1)
        self._positive = np.frompyfunc(lambda x: x > 0, 1, 1)
        self._finite = np.frompyfunc(lambda x: x.is_finite(), 1, 1)
        digits_out = repr_dps(self.prec)
        self._string = np.frompyfunc(lambda x: _ball_string(x, digits_out), 1, 1)

    @property
    def key(self) -> tuple:
        return (self.name, self.digits, self.guard_bits)

    def widened(self, extra_digits: int) -> Backend:
        return ArbBackend(self.digits + extra_digits)

    def certify(
        self, computation: Callable[[Backend], Array], tolerance: float | None = None
    ) -> Array:
        """computation(working) with radii at most `tolerance` times max(1, the largest
        magnitude), by default 10^-digits of the largest magnitude.

        Tries FIRST_GUARD_BITS guard bits, then adds the bits the attempt lost plus
        MARGIN_BITS, at most MAX_ATTEMPTS times; the last result is returned either way
        (its radii still bound its error). An attempt whose balls grew so wide that a
        division became undefined (a variance ball containing 0) is retried with four
        times the guard bits; on the last attempt that error is raised. A computation
        that watches its own radii raises WideBallsError as soon as they pass its target
        (the error-controlled reference does); the next attempt adds the bits it lacked,
        doubled for the rest of the run. (Radii grow by a factor per step, so long
        time-stepping runs need guard bits in proportion to their number of steps.)
        """
        guard = FIRST_GUARD_BITS
        for attempt in range(MAX_ATTEMPTS):
            working = ArbBackend(self.digits, guard)
            try:
                with working.active():
                    result = computation(working)
            except WideBallsError as wide:
                if attempt == MAX_ATTEMPTS - 1:
                    raise
                ratio = wide.radius / wide.target
                lacking = math.ceil(math.log2(ratio)) if math.isfinite(ratio) else guard
                guard = 2 * (guard + lacking) + MARGIN_BITS
                continue
            except (UndefinedOperationError, NumericalBreakdownError):
                # a ball grew wide enough to contain 0 where a division needs it not to
                if attempt == MAX_ATTEMPTS - 1:
                    raise
                guard = 4 * guard + MARGIN_BITS
                continue
            magnitude = float(np.max(np.abs(working.to_float64(result)), initial=0.0))
            radius = working.max_radius(result)
            if tolerance is None:
                target = 10.0**-self.digits * (magnitude if magnitude > 0 else 1.0)
            else:
                target = tolerance * max(1.0, magnitude)
            if radius <= target or not np.isfinite(radius):
                break
            guard += math.ceil(math.log2(radius / target)) + MARGIN_BITS
        return result

    def taylor_series(self) -> Backend:
        from solvers.backends.taylor.backend import TaylorBackend

        return TaylorBackend(self)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        saved = flint.ctx.prec
        flint.ctx.prec = self.prec
        try:
            yield
        finally:
            flint.ctx.prec = saved

    def _ball(self, x: object) -> object:
        if isinstance(x, flint.arb):
            return x
        if isinstance(x, Fraction):
            return flint.arb(flint.fmpq(x.numerator, x.denominator))
        if isinstance(x, np.floating | np.integer):
            x = x.item()
        if isinstance(x, float) and not np.isfinite(x):
            return flint.arb(x)  # -inf for masked attention scores
        if isinstance(x, float):
            # exact: a double is a dyadic rational
            return flint.arb(flint.fmpq(*x.as_integer_ratio()))
        try:
            return flint.arb(x)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"cannot read {x!r:.60} as an arb ball") from exc

    def asarray(self, value: object, name: str = "value") -> Array:
        source = np.asarray(value)
        if source.dtype.kind == "f" and source.dtype.itemsize > 8:
            source = exact_decimals(source)
        with self.active():
            return np.asarray(self._convert(source.astype(object)), dtype=object)

    def constant(self, value: object, name: str = "value") -> Array:
        """Read-only balls; a matrix also keeps its arb_mat for the many products to come."""
        balls = self.asarray(value, name)
        balls.flags.writeable = False  # before the view: neither can be written again
        if balls.ndim == 2:
            balls = balls.view(MatrixOperand)
            balls.flint_matrix = _flint_matrix(np.asarray(balls))
        return balls

    def to_float64(self, value: Array) -> np.ndarray:
        return np.asarray(self._float(np.asarray(value, dtype=object)), dtype=np.float64)

    def max_radius(self, value: Array) -> float:
        """The largest radius of the balls in `value` (rounded up to a float)."""
        radii = np.asarray(self._radius(np.asarray(value, dtype=object)), dtype=np.float64)
        return float(np.max(radii)) if radii.size else 0.0

    def midpoints(self, value: Array) -> Array:
        return np.asarray(self._midpoint(np.asarray(value, dtype=object)), dtype=object)

    def to_strings(self, value: Array) -> np.ndarray:
        return np.asarray(self._string(np.asarray(value, dtype=object)), dtype=str)

    def to_output(self, value: Array) -> np.ndarray:
        return np.asarray(value, dtype=object)

    def all_finite(self, value: Array) -> bool:
        return bool(np.all(self._finite(np.asarray(value, dtype=object))))

    def certainly_positive(self, value: Array) -> np.ndarray:
        return np.asarray(self._positive(np.asarray(value, dtype=object)), dtype=bool)

    def matmul(self, a: Array, b: Array) -> Array:
        def product(x: Array, y: Array) -> list:
            return (_flint_matrix(x) * _flint_matrix(y)).entries()

        with self.active():
            return matmul_by_matrix(a, b, product)

    def exp(self, a: Array) -> Array:
        return np.asarray(self._exp(a), dtype=object)

    def log(self, a: Array) -> Array:
        return np.asarray(self._log(a), dtype=object)

    def sqrt(self, a: Array) -> Array:
        return np.asarray(self._sqrt(a), dtype=object)

    def cos(self, a: Array) -> Array:
        return np.asarray(self._cos(a), dtype=object)

    def sin(self, a: Array) -> Array:
        return np.asarray(self._sin(a), dtype=object)

    def tanh(self, a: Array) -> Array:
        return np.asarray(self._tanh(a), dtype=object)

    def pi(self) -> Array:
        with self.active():
            return np.asarray(flint.arb.pi(), dtype=object)

    def expm(self, a: Array) -> Array:
        """arb_mat.exp: a ball matrix containing the exact exponential."""
        with self.active():
            result = _flint_matrix(np.asarray(a, dtype=object)).exp()
            return np.fromiter(result.entries(), dtype=object, count=np.size(a)).reshape(
                np.shape(a)
            )

    def gelu(self, a: Array) -> Array:
        """x (1 + erf(x r)) / 2 with r a ball containing 1 / sqrt 2, in whole-array operations."""
        a = np.asarray(a, dtype=object)
        return np.asarray(a * (self._erf(a * self._root_half) + 1) / 2, dtype=object)

    def gelu_tanh(self, a: Array) -> Array:
        return np.asarray(self._gelu_tanh(a), dtype=object)

    def relu_(self, a: Array) -> Array:
        a[...] = self._relu(a)
        return a

    def sum(self, a: Array, axis: int) -> Array:
        return np.sum(np.asarray(a, dtype=object), axis=axis, keepdims=True)


class MatrixOperand(np.ndarray):
    """A read-only 2-D object array of balls that also holds the same matrix as an arb_mat.

    Only the array `constant` made carries `flint_matrix` (arrays derived from it do
    not), and neither it nor the array it views can be written to (nor it made writeable),
    so the cached matrix never goes stale.
    """

    flint_matrix: flint.arb_mat | None = None


def _flint_matrix(x: Array) -> flint.arb_mat:
    cached = x.__dict__.get("flint_matrix") if isinstance(x, MatrixOperand) else None
    if cached is not None:
        return cached
    rows, columns = np.shape(x)
    return flint.arb_mat(rows, columns, np.ravel(x).tolist())


def _ball_string(x: flint.arb, digits: int) -> str:
    """Arb's own decimal form "[mid +/- rad]", which arb() reads back to a ball containing x."""
    return x.str(digits, radius=True, more=True)


def _gelu_tanh(x: Any) -> Any:
    """x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2 in the current precision (balls)."""
    root = (2 / flint.arb.pi()).sqrt()
    return x * (1 + (root * (x + flint.arb(44715) / 10**6 * x**3)).tanh()) / 2
