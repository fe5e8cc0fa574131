"""Double-word arithmetic (solvers.backends.double_word, docs/rounding.md section 6)
against exact rational arithmetic: the error-free transformations are exact, and each
operation's relative error, in units of u^2 = 2^-106, stays within its proven bound (add,
mul) or the bound stated for it (div, sqrt), on operands over forty decades, of both
signs, and cancelling."""

from __future__ import annotations

from fractions import Fraction

import numba
import numpy as np
import pytest

from solvers.backends import double_word as dw

U2 = Fraction(1, 2**106)
SAMPLES = 1500


def _words(rng: np.random.Generator, n: int, positive: bool = False) -> dw.Limbs:
    """Normalised double-words over forty decades: a high limb and a low limb below half
    its ulp."""
    high = 10.0 ** rng.uniform(-20, 20, n)
    if not positive:
        high *= rng.choice([-1.0, 1.0], n)
    low = high * 2.0**-53 * rng.uniform(-1, 1, n)
    s = high + low
    return s, low - (s - high)


def _exact(x: dw.Limbs) -> list[Fraction]:
    return [Fraction(h) + Fraction(low) for h, low in zip(*x, strict=True)]


def _errors(got: dw.Limbs, exact: list[Fraction]) -> list[Fraction]:
    """|got - exact| / |exact| per element, in u^2 (0 for an exact zero)."""
    values = _exact(got)
    return [abs(v - e) / abs(e) / U2 if e else abs(v) for v, e in zip(values, exact, strict=True)]


def _normalised(z: dw.Limbs) -> bool:
    """Every result has |low| <= ulp(high) / 2: high is the float64 nearest high + low."""
    return bool(np.all(z[0] + z[1] == z[0]))


@numba.njit
def _eft(a, b):
    s, t = dw.two_sum(a, b)
    p, e = dw.two_prod(a, b)
    return s, t, p, e


def test_the_error_free_transformations_are_exact():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(500) * 1e3, rng.standard_normal(500) * 1e-5
    for x, y in zip(a, b, strict=True):
        s, t, p, e = _eft(x, y)
        assert Fraction(s) + Fraction(t) == Fraction(x) + Fraction(y)
        assert Fraction(p) + Fraction(e) == Fraction(x) * Fraction(y)


OPERATIONS = {
    "add": (dw.add, lambda a, b: a + b, 3.0),
    "sub": (dw.sub, lambda a, b: a - b, 3.0),
    "mul": (dw.mul, lambda a, b: a * b, 4.0),
    "div": (dw.div, lambda a, b: a / b, 4.0),
}


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_each_operation_is_within_its_bound(name):
    operation, exact, bound = OPERATIONS[name]
    rng = np.random.default_rng(1)
    x, y = _words(rng, SAMPLES), _words(rng, SAMPLES)
    z = operation(x, y)
    worst = max(_errors(z, [exact(a, b) for a, b in zip(_exact(x), _exact(y), strict=True)]))
    assert float(worst) <= bound, f"{name}: {float(worst):.3g} u^2"
    assert _normalised(z)


def test_addition_keeps_its_bound_where_the_operands_cancel():
    """y = -x (1 + r 2^-k): the sum loses k bits of x, and the result keeps its own."""
    rng = np.random.default_rng(2)
    x = _words(rng, SAMPLES)
    k = rng.integers(10, 100, SAMPLES)
    shift = rng.uniform(0.5, 1, SAMPLES) * 2.0 ** (-k.astype(float))
    y = dw.mul((-x[0], -x[1]), dw.add((np.ones(SAMPLES), np.zeros(SAMPLES)), (shift, 0 * shift)))
    exact = [a + b for a, b in zip(_exact(x), _exact(y), strict=True)]
    assert float(max(_errors(dw.add(x, y), exact))) <= 3.0


def test_the_square_root_is_within_its_bound():
    rng = np.random.default_rng(3)
    x = _words(rng, SAMPLES, positive=True)
    z = dw.sqrt(x)
    squares = [a * a for a in _exact(z)]
    # sqrt's relative error e gives its square a relative error 2 e
    worst = max(abs(s - e) / e / U2 / 2 for s, e in zip(squares, _exact(x), strict=True))
    assert float(worst) <= 4.0
    assert _normalised(z)
    assert dw.sqrt((np.zeros(1), np.zeros(1)))[0][0] == 0.0
    assert np.isnan(dw.sqrt((-np.ones(1), np.zeros(1)))[0][0])


def test_operands_broadcast_like_numpy_arrays():
    x = (np.arange(1.0, 7.0).reshape(2, 3), np.zeros((2, 3)))
    y = (np.array([2.0, 4.0, 8.0]), np.zeros(3))
    z = dw.div(x, y)
    assert z[0].shape == (2, 3)
    np.testing.assert_array_equal(z[0], x[0] / y[0])
