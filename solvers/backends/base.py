"""The number-system protocol that every operator and scheme is written against.

A backend is to tide-suite what a context (`mp`, `fp`, `iv`) is to mpmath: the algorithm
is written once, in terms of array arithmetic (`+ - * /` with numpy broadcasting, on
float arrays or on object arrays of high-precision numbers) and the few primitives
below, and runs unchanged in each number system. Nothing above the backends branches on
precision.

Primitives whose names end in an underscore work in place (torch's convention): they
overwrite their argument, which must be a fresh intermediate the caller owns. Large
temporaries are the dominant cost of the float paths, so the operators update their own
intermediates in place (`x += b`), which every backend's arrays support.

Computations in a backend run inside `with bk.active():`, which sets any global state
the number system needs (python-flint's working precision) and restores it afterwards.
"""

from __future__ import annotations

import contextlib
import decimal
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from solvers.errors import InvalidInputError

Array = Any
"""A backend array: a numpy float array, or an object array of high-precision numbers."""


class Backend(ABC):
    """Primitives of one number system. Subclasses implement the abstract methods."""

    name: str
    digits: int | None = None
    unit_roundoff: float
    """u: the bound on the relative rounding error of one operation."""
    measures_rounding: bool = False
    """Whether results carry a rigorous bound of their rounding (ball radii, max_radius)."""
    largest: float = math.inf
    """The largest finite number the system holds (inf: an exponent of arbitrary size)."""
    evaluation_cost: tuple[float, float] | None = None
    """A fixed format's time for a field evaluation, (seconds, seconds a multiply-add): a
    fixed part (the operations' overhead) and one that grows with the matrix products,
    fitted on four problems (docs/schemes.md section 7). The assessment's tighter run
    takes the cheapest format that reaches its tolerance. None where the precision
    varies."""
    overflows: bool = True
    """Whether exp can overflow at the size of attention scores: a fixed format's exponent
    range is bounded; mpmath's and arb's exponents are arbitrary-precision integers (arb's
    exp overflows only beyond arguments of about 2^200)."""

    @property
    def key(self) -> tuple:
        """What identifies this number system (name, and precision where it varies)."""
        return (self.name, self.digits)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Scope in which this backend's arithmetic is valid (nothing to set by default)."""
        yield

    def certify(
        self, computation: Callable[[Backend], Array], tolerance: float | None = None
    ) -> Array:
        """The result of computation(working backend), accurate to this backend's precision
        (or to `tolerance` relative to max(1, its size) where that is coarser).

        Floating-point backends run it once in themselves. Ball arithmetic re-runs it at a
        higher working precision when the radii came out too wide (see ArbBackend).
        """
        with self.active():
            return computation(self)

    def widened(self, extra_digits: int) -> Backend:
        """This number system with `extra_digits` more decimal digits, where its precision
        varies (mpmath, arb); a fixed format is itself."""
        return self

    def taylor_series(self) -> Backend:
        """The number system of truncated Taylor series over this one's numbers, in which
        certified enclosures are computed (docs/enclosures.md section 2): only ball
        arithmetic bounds every rounding, so only arb has one."""
        raise InvalidInputError(
            f"enclosures are computed in arb balls, which bound every rounding; {self!r} "
            "does not (docs/enclosures.md section 2)"
        )

    def reciprocal_sqrt(self, n: int) -> Array:
        """1 / sqrt(n) for a whole number n, as a number of this system (active): evaluated
        in its own arithmetic (systems at least as precise as float64)."""
        return self.asarray(1) / self.sqrt(self.asarray(n))

    def error_scale(self, value: Array) -> float:
        """max(1, max |value|): the size absolute errors of a state are measured against
        (docs/schemes.md section 7)."""
        return max(1.0, float(np.max(np.abs(self.to_float64(value)))))

    def max_radius(self, value: Array) -> float:
        """The largest radius of the balls in `value`: 0 for point arithmetic (ArbBackend
        bounds its rounding this way)."""
        return 0.0

    def midpoints(self, value: Array) -> Array:
        """`value` with its balls shrunk to their midpoints (radius 0): the identity for
        point arithmetic."""
        return value

    @abstractmethod
    def asarray(self, value: object, name: str = "value") -> Array:
        """`value` (numbers, a float array, or decimal strings) rounded into this number system.

        `name` is what an error message calls the value (e.g. when it overflows the format).
        """

    def constant(self, value: object, name: str = "value") -> Array:
        """`asarray` for values that will never be modified (weights), made read-only.

        A backend may keep a faster form of such an array alongside it.
        """
        array = self.asarray(value, name)
        if isinstance(array, np.ndarray):
            array.flags.writeable = False
        return array

    @abstractmethod
    def to_float64(self, value: Array) -> np.ndarray:
        """Nearest float64 array (midpoints for balls), for plotting and comparison."""

    @abstractmethod
    def to_strings(self, value: Array) -> np.ndarray:
        """Decimal strings that `asarray` reads back to the same numbers (lossless JSON)."""

    def portable(self, value: Array) -> np.ndarray:
        """The numbers in a form every backend's `asarray` reads, as exactly as this system
        holds them (`solvers.backends.convert`): decimal strings here (a ball as its
        "[m +/- r]", which arb reads back whole and the others as its midpoint)."""
        return self.to_strings(value)

    @abstractmethod
    def to_output(self, value: Array) -> np.ndarray:
        """The array `solve` returns: a float array of this precision, or an object array."""

    @abstractmethod
    def all_finite(self, value: Array) -> bool:
        """True when no entry is infinite or NaN (for balls: no infinite radius either)."""

    @abstractmethod
    def certainly_positive(self, value: Array) -> np.ndarray:
        """Boolean array: entry > 0 (for balls, the whole ball is > 0)."""

    @abstractmethod
    def matmul(self, a: Array, b: Array) -> Array:
        """a @ b over the last two axes, with broadcasting over leading axes."""

    def affine(self, a: Array, w: Array, b: Array) -> Array:
        """a @ w + b, the bias b (1-D) along the last axis: a layer's map U W + b."""
        out = self.matmul(a, w)
        out += b
        return out

    @abstractmethod
    def exp(self, a: Array) -> Array:
        """Elementwise exp."""

    @abstractmethod
    def log(self, a: Array) -> Array:
        """Elementwise natural log of a positive array."""

    @abstractmethod
    def sqrt(self, a: Array) -> Array:
        """Elementwise square root of a non-negative array."""

    @abstractmethod
    def cos(self, a: Array) -> Array:
        """Elementwise cosine."""

    @abstractmethod
    def sin(self, a: Array) -> Array:
        """Elementwise sine."""

    @abstractmethod
    def tanh(self, a: Array) -> Array:
        """Elementwise hyperbolic tangent (the DyT norm's, docs/model.md section 8)."""

    @abstractmethod
    def pi(self) -> Array:
        """pi in this number system."""

    @abstractmethod
    def expm(self, a: Array) -> Array:
        """The matrix exponential of a square 2-D array."""

    @abstractmethod
    def relu_(self, a: Array) -> Array:
        """max(a, 0) elementwise, the projection onto the non-negative orthant, written into a."""

    def bias_relu_(self, a: Array, bias: Array) -> Array:
        """max(a + b, 0) elementwise, the bias b along the last axis, written into a: the
        FFN's relu layer sigma(U W1 + b1) once U W1 is known (docs/model.md section 1)."""
        a += bias
        return self.relu_(a)

    @abstractmethod
    def gelu(self, a: Array) -> Array:
        """GELU(a) = a Phi(a) = a (1 + erf(a / sqrt 2)) / 2 elementwise (the exact form, as
        torch's approximate="none"), a smooth activation rather than a projection."""

    @abstractmethod
    def gelu_tanh(self, a: Array) -> Array:
        """GELU's tanh form a (1 + tanh(sqrt(2 / pi) (a + 0.044715 a^3))) / 2 elementwise
        (torch's approximate="tanh", GPT-2's "gelu_new"), the decimal 0.044715 exact."""

    def silu(self, a: Array) -> Array:
        """silu(x) = x / (1 + exp(-x)) (the Llama family's activation, smooth), in this
        system's own arithmetic: exp at the working precision."""
        return a / (1 + self.exp(-a))

    @abstractmethod
    def sum(self, a: Array, axis: int) -> Array:
        """Sum along `axis`, keeping the axis."""

    def moments(self, a: Array, weights: Array | None = None) -> tuple[Array, Array]:
        """Population mean and variance over the last axis (axis kept): the layer-norm statistics.

        mean = sum(a) / d, variance = sum((a - mean)^2) / d, the two-pass formula; with
        quadrature `weights` w (summing to 1), mean = sum(w a), variance = sum(w (a - mean)^2).
        """
        if weights is None:
            d = a.shape[-1]
            mean = self.sum(a, -1) / d
            centred = a - mean
            return mean, self.sum(centred * centred, -1) / d
        mean = self.sum(a * weights, -1)
        centred = a - mean
        return mean, self.sum(centred * centred * weights, -1)

    def mean_square(self, a: Array, weights: Array | None = None) -> Array:
        """rms(a)^2 over the last axis (axis kept): sum(a^2) / d, or sum(w a^2) with quadrature
        `weights` w summing to 1; the RMSNorm statistic (docs/model.md section 7)."""
        if weights is None:
            return self.sum(a * a, -1) / a.shape[-1]
        return self.sum(a * a * weights, -1)

    def normalise_rows(
        self, u: Array, mean: Array, variance: Array, eps: Array, gain: Array, bias: Array
    ) -> Array:
        """g (u - mean) / sqrt(variance + eps) + b per row, with u's `mean` and `variance`
        (from `moments`; variance + eps > 0), `gain` g and `bias` b scalars or of length d:
        the layer norm LN of docs/model.md section 1 once the moments are known, a fresh
        array."""
        centred = u - mean
        centred /= self.sqrt(variance + eps)
        centred *= gain
        centred += bias
        return centred

    def tangent_rows(
        self, u: Array, mean: Array, variance: Array, g: Array, weights: Array | None = None
    ) -> Array:
        """Per row, with u's `mean` and `variance` (from `moments`, variance > 0):
        c = g - mean(g), then c - mean(c (u - mean)) / variance (u - mean), a fresh array:
        Pi_T(u) g of docs/model.md section 1, the means w^y-weighted when weights are
        given."""

        def row_mean(x: Array) -> Array:
            return self.sum(x, -1) / x.shape[-1] if weights is None else self.sum(x * weights, -1)

        centred_u = u - mean
        centred_g = g - row_mean(g)
        centred_g -= row_mean(centred_g * centred_u) / variance * centred_u
        return centred_g

    def softmax_(self, scores: Array) -> Array:
        """Row softmax over the last axis, exp(s - c) / sum exp(s - c), written into scores.

        Any constant c per row gives the same result. Where exp can overflow c is the
        float64 row maximum of the scores, an exact number in every backend, so exp cannot
        overflow and a ball's radius is not widened by the shift; elsewhere c = 0 (no
        shift: mpmath and arb). -inf entries (masked scores) give exactly 0.
        """
        if self.overflows:
            scores -= self.asarray(np.max(self.to_float64(scores), axis=-1, keepdims=True))
        scores[...] = self.exp(scores)
        scores /= self.sum(scores, -1)
        return scores

    def __repr__(self) -> str:
        digits = "" if self.digits is None else f", digits={self.digits}"
        return f"backend({self.name!r}{digits})"


def matmul_by_matrix(a: Array, b: Array, product: Callable[[Array, Array], Iterable]) -> Array:
    """a @ b for object arrays: `product` of each pair of matrices, broadcasting leading axes.

    `product(x, y)` takes two 2-D object arrays and returns the entries of their product,
    (x.shape[0], y.shape[1]), row by row as one flat iterable. They are read with
    np.fromiter: np.asarray on a list of numbers that are not numpy's inspects each one
    for an array interface, which cost more than an arb ball's own multiplication.
    """
    if np.ndim(a) == 2 and np.ndim(b) == 2:  # keep array subclasses that carry a matrix form
        return _matrix(product(a, b), (a.shape[0], b.shape[1]))
    if np.ndim(b) == 2:  # a stack of rows times one matrix (a weight): one product, as rows
        a = np.asarray(a, dtype=object)
        rows = a.reshape(math.prod(a.shape[:-1]), a.shape[-1])
        out = _matrix(product(rows, b), (rows.shape[0], b.shape[1]))
        return out.reshape(*a.shape[:-1], b.shape[1])
    a, b = np.asarray(a, dtype=object), np.asarray(b, dtype=object)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if a.shape[:-2] != batch:
        a = np.broadcast_to(a, (*batch, *a.shape[-2:]))
    if b.shape[:-2] != batch:
        b = np.broadcast_to(b, (*batch, *b.shape[-2:]))
    out = np.empty((*batch, a.shape[-2], b.shape[-1]), dtype=object)
    for index in np.ndindex(batch):
        out[index] = _matrix(product(a[index], b[index]), out.shape[-2:])
    return out


def _matrix(entries: Iterable, shape: tuple[int, int]) -> np.ndarray:
    """An object array of `shape` from its entries row by row."""
    return np.fromiter(entries, dtype=object, count=shape[0] * shape[1]).reshape(shape)


def exact_decimals(values: np.ndarray) -> np.ndarray:
    """The exact decimal expansions of binary floats (any width, e.g. longdouble).

    A binary float m 2^-k has a finite decimal expansion of at most k digits after the
    point; reading it into a wider format is exact, where the shortest round-trip
    string would be rounded a second time (0.1 in float64 is not the decimal 0.1).
    """

    def expansion(x: np.floating) -> str:
        if not np.isfinite(x):
            return str(float(x))
        numerator, denominator = x.as_integer_ratio()
        digits = len(str(abs(numerator))) + denominator.bit_length()
        with decimal.localcontext(decimal.Context(prec=digits)):
            return str(decimal.Decimal(numerator) / decimal.Decimal(denominator))

    return np.vectorize(expansion, otypes=[str])(values)


def ball_midpoints(strings: np.ndarray) -> np.ndarray:
    """Decimal strings with arb's "[m +/- r]" balls replaced by their midpoints m."""
    strings = np.asarray(strings, dtype=str)
    is_ball = np.char.startswith(strings, "[")
    if not is_ball.any():
        return strings
    middles = np.char.strip(np.char.partition(strings, "+/-")[..., 0], "[ ")
    return np.where(is_ball, middles, strings)
