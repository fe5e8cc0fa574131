"""Truncated Taylor series of arrays of arb balls, computed one order at a time
(docs/enclosures.md section 2).

A `Series` x(tau) = sum_k x_k tau^k holds its coefficients x_0, x_1, ... (object arrays of
one shape) and the rule that gives its next coefficient from those of its operands.
Evaluating an operator on series records one node per operation on a `Tape`, in creation
order, which is an order in which every node comes after its operands; `Tape.advance`
then gives every node its next coefficient. That is Taylor-mode automatic
differentiation: the k-th coefficient of a product costs k + 1 products of coefficients,
so K orders cost O(K^2) array operations, where re-evaluating at every order would cost
O(K^3). The independent variables (`Tape.variable`) get their coefficients from the
caller: for the flow u' = f(u), u_{k+1} = f(u)_k / (k + 1) (docs/enclosures.md section 2).

Operands that are not series are constants: their coefficients beyond the first are 0.
Series are never written in place; the in-place operators of numpy arrays fall back to
the plain ones, which return a new series (numpy arrays on the left defer to the
reflected operators: `__array_ufunc__ = None`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Rule = Callable[[int], Any]
"""Coefficient k of a node, from its operands' coefficients 0..k and its own 0..k-1."""


class Tape:
    """The nodes of one Taylor evaluation in creation order; `order` is the highest
    coefficient every node holds."""

    def __init__(self) -> None:
        self.nodes: list[Series] = []
        self.order = 0

    def variable(self, first: Any) -> Series:
        """An independent series with coefficient 0 `first`; the caller appends the others
        (to `coefficients`) before each `advance`."""
        return Series(self, np.asarray(first, dtype=object), None)

    def advance(self) -> None:
        """Coefficient order + 1 of every node (every variable must already have it)."""
        k = self.order + 1
        for node in self.nodes:
            if node.rule is None:
                if len(node.coefficients) <= k:
                    raise ValueError(f"a variable of the tape lacks its coefficient {k}")
            else:
                node.coefficients.append(np.asarray(node.rule(k), dtype=object))
        self.order = k


def coefficient(x: Any, k: int, shape: tuple[int, ...] | None = None) -> Any:
    """Coefficient k of a series or a constant (the constant itself for k = 0, else 0),
    broadcast to `shape` when one is given."""
    if isinstance(x, Series):
        value = x.coefficients[k]
    elif k == 0:
        value = np.asarray(x, dtype=object)
    else:
        return np.zeros(shape if shape is not None else np.shape(x), dtype=object)
    return value if shape is None else np.broadcast_to(value, shape)


def cauchy(a: Any, b: Any, k: int, low: int = 0, high: int | None = None) -> Any:
    """sum_{j = low}^{high} a_j b_{k - j} (high = k by default), entrywise."""
    high = k if high is None else high
    total = None
    for j in range(low, high + 1):
        term = coefficient(a, j) * coefficient(b, k - j)
        total = term if total is None else total + term
    return total


def weighted_cauchy(a: Any, b: Any, k: int) -> Any:
    """(1/k) sum_{j=1}^{k} j a_j b_{k-j}: coefficient k of the series y with y' = a' b
    (y_0 given), the recurrence of exp, tanh and the normal distribution function."""
    total = None
    for j in range(1, k + 1):
        term = coefficient(a, j) * coefficient(b, k - j) * j
        total = term if total is None else total + term
    return total / k


class Series:
    """A truncated Taylor series of an object array of balls (see the module docstring)."""

    __array_ufunc__ = None

    def __init__(self, tape: Tape, first: Any, rule: Rule | None) -> None:
        self.tape = tape
        self.coefficients = [np.asarray(first, dtype=object)]
        self.rule = rule
        tape.nodes.append(self)

    def _node(self, first: Any, rule: Rule) -> Series:
        return Series(self.tape, first, rule)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.coefficients[0].shape

    @property
    def ndim(self) -> int:
        return self.coefficients[0].ndim

    def map(self, function: Callable[[Any], Any]) -> Series:
        """function applied to every coefficient: a map linear in the array (a reshape, an
        index, a sum along an axis, a product with a constant)."""
        return self._node(function(self.coefficients[0]), lambda k: function(self.coefficients[k]))

    # arrangement: linear, coefficient by coefficient

    def reshape(self, *shape: Any) -> Series:
        return self.map(lambda c: c.reshape(*shape))

    def swapaxes(self, first: int, second: int) -> Series:
        return self.map(lambda c: np.swapaxes(c, first, second))

    def repeat(self, repeats: int, axis: int | None = None) -> Series:
        return self.map(lambda c: np.repeat(c, repeats, axis=axis))

    def __getitem__(self, index: Any) -> Series:
        return self.map(lambda c: c[index])

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func is np.concatenate:
            return concatenate(*args, **kwargs)
        if func in (np.swapaxes, np.repeat, np.reshape):
            first, *rest = args
            return getattr(first, func.__name__)(*rest, **kwargs)
        return NotImplemented

    # arithmetic

    def __neg__(self) -> Series:
        return self.map(lambda c: -c)

    def __add__(self, other: Any) -> Series:
        shape = np.broadcast_shapes(self.shape, np.shape(_first(other)))
        first = self.coefficients[0] + _first(other)
        if not isinstance(other, Series):
            return self._node(first, lambda k: coefficient(self, k, shape))
        return self._node(
            first, lambda k: coefficient(self, k, shape) + coefficient(other, k, shape)
        )

    __radd__ = __add__

    def __sub__(self, other: Any) -> Series:
        return self + (-other)

    def __rsub__(self, other: Any) -> Series:
        return (-self) + other

    def __mul__(self, other: Any) -> Series:
        if not isinstance(other, Series):
            return self.map(lambda c: c * other)
        return self._node(
            self.coefficients[0] * other.coefficients[0], lambda k: cauchy(self, other, k)
        )

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Series:
        if not isinstance(other, Series):
            return self.map(lambda c: c / other)
        return divide(self, other)

    def __rtruediv__(self, other: Any) -> Series:
        return divide(other, self)

    def __matmul__(self, other: Any) -> Series:
        raise TypeError("series products of matrices go through TaylorBackend.matmul")

    def __bool__(self) -> bool:
        raise TypeError("a series has no truth value (its operators may not branch on it)")


def _first(x: Any) -> Any:
    return x.coefficients[0] if isinstance(x, Series) else x


def _tape(*operands: Any) -> Tape:
    for x in operands:
        if isinstance(x, Series):
            return x.tape
    raise TypeError("no operand is a series")


def divide(a: Any, b: Series) -> Series:
    """q = a / b: q_k = (a_k - sum_{j<k} q_j b_{k-j}) / b_0."""
    shape = np.broadcast_shapes(np.shape(_first(a)), b.shape)
    q: Series

    def rule(k: int) -> Any:
        return (coefficient(a, k, shape) - cauchy(q, b, k, 0, k - 1)) / b.coefficients[0]

    q = Series(b.tape, _first(a) / b.coefficients[0], rule)
    return q


def concatenate(arrays: Any, axis: int = 0) -> Series:
    """np.concatenate of series and constants, coefficient by coefficient."""
    arrays = list(arrays)
    shapes = [np.shape(_first(x)) for x in arrays]
    return Series(
        _tape(*arrays),
        np.concatenate([_first(x) for x in arrays], axis=axis),
        lambda k: np.concatenate(
            [coefficient(x, k, s) for x, s in zip(arrays, shapes, strict=True)], axis=axis
        ),
    )


def product(a: Any, b: Any, multiply: Callable[[Any, Any], Any]) -> Series:
    """The bilinear `multiply` (a matrix product) of two operands, at least one a series:
    c_k = sum_j multiply(a_j, b_{k-j}), the constant's coefficients beyond 0 skipped."""
    if not isinstance(b, Series):
        return a.map(lambda c: multiply(c, b))
    if not isinstance(a, Series):
        return b.map(lambda c: multiply(a, c))

    def rule(k: int) -> Any:
        total = multiply(a.coefficients[0], b.coefficients[k])
        for j in range(1, k + 1):
            total = total + multiply(a.coefficients[j], b.coefficients[k - j])
        return total

    return Series(a.tape, multiply(a.coefficients[0], b.coefficients[0]), rule)


def exponential(a: Series, exp: Callable[[Any], Any]) -> Series:
    """e = exp(a): e' = a' e, so e_0 = exp(a_0) and e_k = (1/k) sum_{j=1}^k j a_j e_{k-j}."""
    e: Series
    e = Series(a.tape, exp(a.coefficients[0]), lambda k: weighted_cauchy(a, e, k))
    return e


def normal_cdf(
    a: Series, cdf: Callable[[Any], Any], exp: Callable[[Any], Any], scale: Any
) -> Series:
    """Phi(a) for the standard normal distribution function: Phi' = phi(a) a' with the
    density phi(a) = scale exp(-a^2 / 2), scale = 1 / sqrt(2 pi) (a ball): Phi_0 = cdf(a_0)
    and Phi_k = (1/k) sum_{j=1}^k j a_j phi_{k-j}, phi a series of its own."""
    density = exponential(-(a * a) / 2, exp) * scale
    return Series(a.tape, cdf(a.coefficients[0]), lambda k: weighted_cauchy(a, density, k))


def hyperbolic_tangent(a: Series, tanh: Callable[[Any], Any]) -> Series:
    """y = tanh(a): y' = a' w with w = 1 - y^2, so y_0 = tanh(a_0) and
    y_k = (1/k) sum_{j=1}^k j a_j w_{k-j}; w is a series recorded after y (its
    coefficient k needs y_k, and y_k needs w up to k - 1 only)."""
    w: Series
    y = Series(a.tape, tanh(a.coefficients[0]), lambda k: weighted_cauchy(a, w, k))
    w = 1 - y * y
    return y


def square_root(a: Series, sqrt: Callable[[Any], Any]) -> Series:
    """s = sqrt(a), a_0 > 0: s_k = (a_k - sum_{j=1}^{k-1} s_j s_{k-j}) / (2 s_0)."""
    s: Series

    def rule(k: int) -> Any:
        rest = cauchy(s, s, k, 1, k - 1) if k > 1 else 0
        return (a.coefficients[k] - rest) / (2 * s.coefficients[0])

    s = Series(a.tape, sqrt(a.coefficients[0]), rule)
    return s
