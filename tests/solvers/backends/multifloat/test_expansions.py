"""Expansion arithmetic of 2, 3 and 4 limbs (solvers.backends.multifloat.expansions,
docs/rounding.md section 6) against exact rational arithmetic: the error-free
transformations are exact, and each operation's relative error, in units of
u^n = 2^(-53 n), stays within the bound of the table, on operands over forty decades, of
both signs, and cancelling; every result is ulp-nonoverlapping."""

from __future__ import annotations

from fractions import Fraction

import numba
import numpy as np
import pytest

from solvers.backends.multifloat import double_word as dw
from solvers.backends.multifloat import expansions as ex
from solvers.backends.multifloat import kernels
from tests.solvers.backends.multifloat.limbs import exact, with_tails

SAMPLES = 1500

BOUNDS = {
    "add": {2: 3.0, 3: 1.0, 4: 1.0},
    "sub": {2: 3.0, 3: 1.0, 4: 1.0},
    "mul": {2: 4.0, 3: 4.0, 4: 4.0},
    "div": {2: 4.0, 3: 2.0, 4: 2.0},
    "sqrt": {2: 4.0, 3: 2.0, 4: 2.0},
}
"""Relative error bounds in u^n (docs/rounding.md section 6): proven for n = 2's add and
mul, stated from these measurements elsewhere."""

EXACT = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
}
OPERATION = {"add": kernels.ADD, "sub": kernels.SUB, "mul": kernels.MUL, "div": kernels.DIV}


def _numbers(rng: np.random.Generator, n: int, size: int, positive: bool = False) -> np.ndarray:
    """Normalised n-limb numbers over forty decades, of both signs unless `positive`."""
    heads = 10.0 ** rng.uniform(-20, 20, size)
    if not positive:
        heads *= rng.choice([-1.0, 1.0], size)
    return with_tails(heads, rng, n)


def _exact(x: np.ndarray) -> list[Fraction]:
    return list(exact(x))


def _worst(got: np.ndarray, exact: list[Fraction], n: int) -> float:
    """max |got - exact| / |exact| in u^n (an exact zero must come out 0)."""
    unit = Fraction(1, 2 ** (53 * n))
    errors = [
        abs(v - e) / abs(e) / unit if e else abs(v) for v, e in zip(_exact(got), exact, strict=True)
    ]
    return float(max(errors))


def _normalised(z: np.ndarray) -> bool:
    """Each limb is at most an ulp of the one before (ulp-nonoverlapping), zero limbs last."""
    return all(np.all(np.abs(z[k + 1]) <= np.spacing(np.abs(z[k]))) for k in range(len(z) - 1))


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


@pytest.mark.parametrize("n", ex.LIMBS)
@pytest.mark.parametrize("name", sorted(EXACT))
def test_each_operation_is_within_its_bound(name, n):
    rng = np.random.default_rng(1 + n)
    x, y = _numbers(rng, n, SAMPLES), _numbers(rng, n, SAMPLES)
    z = kernels.binary(OPERATION[name], x, y)
    exact = [EXACT[name](a, b) for a, b in zip(_exact(x), _exact(y), strict=True)]
    worst = _worst(z, exact, n)
    assert worst <= BOUNDS[name][n], f"{name} x{n}: {worst:.3g} u^{n}"
    assert _normalised(z)


@pytest.mark.parametrize("n", ex.LIMBS)
@pytest.mark.parametrize("name", ["add", "sub", "mul"])
def test_operations_with_a_float64_operand_are_within_their_bound(name, n):
    rng = np.random.default_rng(5 + n)
    x = _numbers(rng, n, SAMPLES)
    c = 10.0 ** rng.uniform(-20, 20, SAMPLES) * rng.choice([-1.0, 1.0], SAMPLES)
    c[:20] = -x[0, :20]  # the leading limbs cancel: the tail is the answer
    z = kernels.binary_float(OPERATION[name], x, c)
    exact = [EXACT[name](a, Fraction(b)) for a, b in zip(_exact(x), c, strict=True)]
    worst = _worst(z, exact, n)
    assert worst <= BOUNDS[name][n], f"{name} x{n} by a float64: {worst:.3g} u^{n}"
    assert _normalised(z)
    scalar = kernels.binary_float(OPERATION[name], x, np.float64(c[0]))
    np.testing.assert_array_equal(scalar[:, 0], z[:, 0])


@pytest.mark.parametrize("n", ex.LIMBS)
def test_addition_keeps_its_bound_where_the_operands_cancel(n):
    """y = -x (1 + r 2^-k): the sum loses k bits of x, and the result keeps its own."""
    rng = np.random.default_rng(2)
    x = _numbers(rng, n, SAMPLES)
    k = rng.integers(10, 53 * n, SAMPLES)
    factor = np.zeros((n, SAMPLES))
    factor[0] = 1.0
    factor = kernels.binary(kernels.ADD, factor, _shift(rng.uniform(0.5, 1, SAMPLES), k, n))
    y = kernels.binary(kernels.MUL, -x, factor)
    exact = [a + b for a, b in zip(_exact(x), _exact(y), strict=True)]
    assert _worst(kernels.binary(kernels.ADD, x, y), exact, n) <= BOUNDS["add"][n]


def _shift(fraction: np.ndarray, k: np.ndarray, n: int) -> np.ndarray:
    """fraction 2^-k as an n-limb array (exact: a power of two times a float64)."""
    limbs = np.zeros((n, len(k)))
    limbs[0] = np.ldexp(fraction, -k)
    return limbs


@pytest.mark.parametrize("n", ex.LIMBS)
def test_the_square_root_is_within_its_bound(n):
    rng = np.random.default_rng(3)
    x = _numbers(rng, n, SAMPLES, positive=True)
    z = kernels.sqrt(x)
    unit = Fraction(1, 2 ** (53 * n))
    # sqrt's relative error e gives its square a relative error 2 e
    squares = [a * a for a in _exact(z)]
    worst = max(abs(s - e) / e / unit / 2 for s, e in zip(squares, _exact(x), strict=True))
    assert float(worst) <= BOUNDS["sqrt"][n]
    assert _normalised(z)
    assert kernels.sqrt(np.zeros((n, 1)))[0, 0] == 0.0
    assert np.isnan(kernels.sqrt(-np.ones((n, 1)))[0, 0])


@pytest.mark.parametrize("n", ex.LIMBS)
def test_operands_broadcast_like_numpy_arrays(n):
    x = np.zeros((n, 2, 3))
    x[0] = np.arange(1.0, 7.0).reshape(2, 3)
    y = np.zeros((n, 3))
    y[0] = [2.0, 4.0, 8.0]
    z = kernels.binary(kernels.DIV, x, y)
    assert z.shape == (n, 2, 3)
    np.testing.assert_array_equal(z[0], x[0] / y[0])
    assert not z[1:].any()


@pytest.mark.parametrize("n", ex.LIMBS)
def test_infinities_and_nan_come_out_as_in_float64(n):
    x = np.zeros((n, 4))
    x[0] = [np.inf, np.inf, 1.0, -np.inf]
    y = np.zeros((n, 4))
    y[0] = [1.0, np.inf, 0.0, 2.0]
    with np.errstate(all="ignore"):
        for operation, expected in (
            (kernels.ADD, x[0] + y[0]),
            (kernels.SUB, x[0] - y[0]),
            (kernels.MUL, x[0] * y[0]),
            (kernels.DIV, x[0] / y[0]),
        ):
            z = kernels.binary(operation, x, y)
            np.testing.assert_array_equal(z[0], expected)
            assert not np.any(z[1:][:, ~np.isnan(expected)])
    assert kernels.sqrt(x)[0, 0] == np.inf
