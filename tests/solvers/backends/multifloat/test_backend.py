"""The multi-float backends float64x2, float64x3, float64x4 (solvers.backends.multifloat,
docs/rounding.md section 6): registered as fixed formats, their numbers exchanged with
mpmath and arb exactly, numpy code running on their arrays, and whole solves against
mpmath at twice their digits. (The generic backend tests of
tests/solvers/backends/test_backends.py run on them too, as registered formats.)"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest

from solvers import InvalidInputError, LayerWeights, PiecewiseControls, Problem, backend, solve
from solvers.backends import convert
from solvers.backends.multifloat.array import MultiFloatArray

FORMATS = ("float64x2", "float64x3", "float64x4")


@pytest.mark.parametrize("name", FORMATS)
def test_each_format_is_a_registered_fixed_format(name):
    bk = backend(name)
    limbs = int(name[-1])
    assert bk.digits is None and bk.key == (name, None)
    assert 2.0 ** (-53 * limbs) <= bk.unit_roundoff <= 4 * 2.0 ** (-53 * limbs)
    with pytest.raises(InvalidInputError, match="fixed precision"):
        backend(name, 30)


@pytest.mark.parametrize("name", FORMATS)
def test_numbers_travel_exactly_to_and_from_mpmath_and_arb(name):
    """Numbers of 53 n bits (thirds at mpmath's 53 n bits) are read exactly, come back as
    the same Fractions, and arb reads their strings into balls of radius 0."""
    bk = backend(name)
    limbs = int(name[-1])
    mp = mpmath.MPContext()
    mp.prec = 53 * limbs - 4  # fewer bits than the limbs hold, whatever their exponents
    thirds = np.array([mp.mpf(k) / 3 for k in (1, -2, 7e10, 5e-30)], dtype=object)
    x = bk.asarray(thirds)
    exact = [Fraction(*map(int, mpmath.libmp.to_rational(v._mpf_))) for v in thirds]
    assert list(bk.portable(x)) == exact
    back = convert(x, bk, backend("mpmath", 80))
    assert [Fraction(*map(int, mpmath.libmp.to_rational(v._mpf_))) for v in back] == exact
    arb = convert(x, bk, backend("arb", 80))
    assert all(ball.rad() == 0 for ball in arb)
    assert bk.asarray(bk.to_strings(x)).limbs.tolist() == x.limbs.tolist()


def test_a_value_beyond_float64s_range_is_refused():
    with pytest.raises(InvalidInputError, match="beyond"):
        backend("float64x2").asarray(["1e400"], "weights")


def test_numpy_code_runs_on_the_arrays():
    """Shape functions move the element axes, not the limbs; arithmetic mixes with float
    arrays exactly; a silent conversion to float64 is refused."""
    bk = backend("float64x3")
    x = bk.asarray(np.arange(24.0).reshape(2, 3, 4)) / 3.0
    assert np.swapaxes(x, -1, -2).shape == (2, 4, 3)
    assert np.concatenate([x, x], axis=-1).shape == (2, 3, 8)
    assert x[..., 1:3].shape == (2, 3, 2)
    assert x.reshape(6, 4)[5].shape == (4,)
    y = np.where(np.arange(4) > 1, x, 0.0)
    assert not y.limbs[:, ..., :2].any()
    z = x * 3.0 - np.arange(24.0).reshape(2, 3, 4)
    assert np.abs(bk.to_float64(z)).max() < 1e-40
    z += 1.0
    assert bk.to_float64(z).min() > 0.99
    with pytest.raises(TypeError, match="convert"):
        np.asarray(x)
    with pytest.raises(TypeError):
        np.cumsum(x)


@pytest.mark.parametrize("name", FORMATS)
def test_whole_powers_are_repeated_products(name):
    """x ** k for whole k (the dense output's (j / 2)^(k - 1)) against exact Fractions:
    within k operation bounds relatively, 0 ** 0 = 1, a negative k the reciprocal, and a
    fractional k refused."""
    from solvers.backends.multifloat.backend import OPERATION_BOUND

    bk = backend(name)
    values = [Fraction(7, 3), Fraction(-5, 4), Fraction(0)]
    x = bk.asarray(np.array([float(v) for v in values]))
    exact_x = [Fraction(v) for v in bk.portable(x)]
    for k in (0, 1, 2, 5, 13, -3):
        got = bk.portable(x**k)
        for value, base in zip(got, exact_x, strict=True):
            if base == 0:
                assert value == (1 if k == 0 else 0) or k < 0
                continue
            exact = base**k
            bound = (abs(k) + 2) * OPERATION_BOUND[bk.limbs] * 2.0 ** (-53 * bk.limbs)
            assert abs(Fraction(value) - exact) <= bound * abs(exact), (k, float(base))
    assert bk.portable(bk.asarray(0.0) ** 0)[()] == 1
    with pytest.raises(TypeError):
        x**0.5


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("activation", ["gelu", "silu", "gelu-tanh"])
def test_a_solve_matches_mpmath_at_twice_the_digits(name, activation):
    """Lie, 8 steps per layer, on a pre-LN flow (2 layers, d 8, 2 heads, d_ff 16, 4
    tokens): within 1000 u^n of mpmath (the solve takes about 2000 operations per entry,
    most of them not in its error's path)."""
    rng = np.random.default_rng(5)
    layers = [
        LayerWeights.random(8, 2, 16, rng, activation=activation, affine=True) for _ in range(2)
    ]
    problem = Problem(rng.standard_normal((4, 8)), PiecewiseControls(layers), 2.0, norm="pre")
    bk = backend(name)
    digits = 2 * round(53 * int(name[-1]) * 0.30103) + 10
    truth = solve(problem, "lie", 8, backend("mpmath", digits))
    got = convert(solve(problem, "lie", 8, bk), bk, backend("mpmath", digits))
    error = max(abs(a - b) for a, b in zip(got.flat, truth.flat, strict=True))
    scale = max(1, max(abs(b) for b in truth.flat))
    assert error <= 1000 * bk.unit_roundoff * scale
    output = solve(problem, "lie", 1, bk)
    assert output.dtype == object and isinstance(output[0, 0], mpmath.mpf)


@pytest.mark.parametrize("name", FORMATS)
def test_the_output_is_mpmath_numbers_exactly(name):
    """`to_output` gives each number as the mpf that is exactly its limbs' sum."""
    bk = backend(name)
    x = bk.asarray(np.array([1.0, -2.0, 5e-200])) / 3.0
    output = bk.to_output(x)
    assert all(isinstance(v, mpmath.mpf) for v in output)
    assert list(bk.portable(output)) == list(bk.portable(x))
    assert isinstance(bk.asarray(output), MultiFloatArray)
