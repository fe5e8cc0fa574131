"""The operators' primitives on Taylor series of arb balls (docs/enclosures.md section 2).

`TaylorBackend(arb)` (made by `arb.taylor_series()`) is a backend whose arrays are either
constants (object arrays of arb balls: the weights, the score bias, the rotary tables) or
`Series` recording a Taylor evaluation on a tape; every operator of docs/model.md runs on
it unchanged, so the Taylor coefficients of the field along a series of states come from
the same code that solves the flow. The smooth primitives and their recurrences
(solvers.backends.taylor.series):

- products and matrix products: Cauchy products, c_k = sum_j a_j b_{k-j};
- exp: e_k = (1/k) sum_{j=1}^k j a_j e_{k-j};
- sqrt (the norms' radius, variance + eps > 0):
  s_k = (a_k - sum_{j=1}^{k-1} s_j s_{k-j}) / 2 s_0;
- tanh (GELU's tanh form, DyT): y' = (1 - y^2) a';
- GELU a Phi(a): Phi' = exp(-a^2 / 2) a' / sqrt(2 pi);
- SiLU a / (1 + exp(-a)) and the row softmax exp(s - c) / sum exp(s - c), c the float64 row
  maximum of the scores' first coefficient (a constant: it cancels).

ReLU is not differentiable at 0, so it has no Taylor series there and is refused
(OutOfScopeError), as are log, cos and sin of a series, which no operator of the flow
takes of the state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from fractions import Fraction

import flint
import numpy as np

from solvers.backends.base import Array, Backend
from solvers.backends.taylor.series import (
    Series,
    Tape,
    exponential,
    hyperbolic_tangent,
    normal_cdf,
    product,
    square_root,
)
from solvers.errors import OutOfScopeError

GELU_TANH_CUBIC = Fraction(44715, 10**6)
"""The cubic coefficient 0.044715 of GELU's tanh form, an exact decimal."""


class TaylorBackend(Backend):
    """Taylor series whose coefficients are arb balls at `base`'s precision."""

    measures_rounding = True
    overflows = False

    def __init__(self, base: Backend) -> None:
        """`base` is an ArbBackend (ArbBackend.taylor_series makes this backend)."""
        self.base = base
        self.name = "taylor-arb"
        self.digits = base.digits
        self.unit_roundoff = base.unit_roundoff
        with base.active():
            root_half = flint.arb(2).rsqrt()
            self._density = (2 * flint.arb.pi()).rsqrt()  # 1 / sqrt(2 pi)
            self._root_two_over_pi = (2 / flint.arb.pi()).sqrt()
            self._cubic = flint.arb(
                flint.fmpq(GELU_TANH_CUBIC.numerator, GELU_TANH_CUBIC.denominator)
            )
        self._cdf = np.frompyfunc(lambda x: (-x * root_half).erfc() / 2, 1, 1)

    @property
    def key(self) -> tuple:
        return ("taylor", *self.base.key)

    def tape(self) -> Tape:
        """A fresh tape: its variables are the series an evaluation starts from."""
        return Tape()

    def coefficients(self, value: Array) -> list[Array]:
        """The coefficients of a series (a live list, which `Tape.advance` extends)."""
        if not isinstance(value, Series):
            raise TypeError("the value does not depend on the tape's variables")
        return value.coefficients

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        with self.base.active():
            yield

    def asarray(self, value: object, name: str = "value") -> Array:
        return self.base.asarray(value, name)

    def constant(self, value: object, name: str = "value") -> Array:
        return self.base.constant(value, name)

    def to_float64(self, value: Array) -> np.ndarray:
        """The midpoints of the first coefficient (the value at tau = 0)."""
        return self.base.to_float64(_first(value))

    def to_strings(self, value: Array) -> np.ndarray:
        return self.base.to_strings(_first(value))

    def to_output(self, value: Array) -> np.ndarray:
        return self.base.to_output(_first(value))

    def all_finite(self, value: Array) -> bool:
        if not isinstance(value, Series):
            return self.base.all_finite(value)
        return all(self.base.all_finite(c) for c in value.coefficients)

    def certainly_positive(self, value: Array) -> np.ndarray:
        return self.base.certainly_positive(_first(value))

    def max_radius(self, value: Array) -> float:
        return self.base.max_radius(_first(value))

    def midpoints(self, value: Array) -> Array:
        return self.base.midpoints(_first(value))

    def matmul(self, a: Array, b: Array) -> Array:
        if not isinstance(a, Series) and not isinstance(b, Series):
            return self.base.matmul(a, b)
        return product(a, b, self.base.matmul)

    def exp(self, a: Array) -> Array:
        if not isinstance(a, Series):
            return self.base.exp(a)
        return exponential(a, self.base.exp)

    def sqrt(self, a: Array) -> Array:
        if not isinstance(a, Series):
            return self.base.sqrt(a)
        return square_root(a, self.base.sqrt)

    def tanh(self, a: Array) -> Array:
        if not isinstance(a, Series):
            return self.base.tanh(a)
        return hyperbolic_tangent(a, self.base.tanh)

    def log(self, a: Array) -> Array:
        return self.base.log(_constant(a, "log"))

    def cos(self, a: Array) -> Array:
        return self.base.cos(_constant(a, "cos"))

    def sin(self, a: Array) -> Array:
        return self.base.sin(_constant(a, "sin"))

    def expm(self, a: Array) -> Array:
        return self.base.expm(_constant(a, "expm"))

    def pi(self) -> Array:
        return self.base.pi()

    def relu_(self, a: Array) -> Array:
        raise OutOfScopeError(
            "ReLU has no Taylor series where a pre-activation crosses 0 (an event of the "
            "flow); enclosures take smooth activations only (docs/enclosures.md section 5)"
        )

    def bias_relu_(self, a: Array, bias: Array) -> Array:
        return self.relu_(a)

    def gelu(self, a: Array) -> Array:
        """a Phi(a), Phi(a) = erfc(-a / sqrt 2) / 2."""
        if not isinstance(a, Series):
            return self.base.gelu(a)
        return a * normal_cdf(a, self._cdf, self.base.exp, self._density)

    def gelu_tanh(self, a: Array) -> Array:
        if not isinstance(a, Series):
            return self.base.gelu_tanh(a)
        inner = (a + a * a * a * self._cubic) * self._root_two_over_pi
        return a * (1 + self.tanh(inner)) / 2

    def sum(self, a: Array, axis: int) -> Array:
        if not isinstance(a, Series):
            return self.base.sum(a, axis)
        return a.map(lambda c: self.base.sum(c, axis))

    def softmax_(self, scores: Array) -> Array:
        """exp(s - c) / sum exp(s - c) with c the float64 row maximum of the first
        coefficient (a fresh series; scores is not written)."""
        if not isinstance(scores, Series):
            return self.base.softmax_(scores)
        shift = np.max(self.to_float64(scores), axis=-1, keepdims=True)
        weights = self.exp(scores - self.asarray(np.where(np.isfinite(shift), shift, 0.0)))
        return weights / self.sum(weights, -1)


def _first(value: Array) -> Array:
    return value.coefficients[0] if isinstance(value, Series) else value


def _constant(value: Array, name: str) -> Array:
    if isinstance(value, Series):
        raise OutOfScopeError(
            f"{name} of a series is not taken by any operator of the flow's field "
            "(docs/enclosures.md section 2)"
        )
    return value
