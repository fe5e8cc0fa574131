"""The number systems: registry, rounding model, cross-backend agreement, arb enclosures."""

from __future__ import annotations

import dataclasses
import math
import warnings
from fractions import Fraction

import flint
import ml_dtypes
import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solvers import (
    InvalidInputError,
    LayerWeights,
    PiecewiseControls,
    Problem,
    backend,
    solve,
)
from solvers.backends import convert
from solvers.backends.base import ball_midpoints
from solvers.equation.weights import ACTIVATION_LIPSCHITZ
from solvers.errors import NumericalBreakdownError
from tests.precisions import ALL_PRECISIONS


def _stack(seed: int, layers: int = 6, d: int = 16, heads: int = 4, d_ff: int = 32, **kw):
    rng = np.random.default_rng(seed)
    weights = [LayerWeights.random(d, heads, d_ff, rng, **kw) for _ in range(layers)]
    return PiecewiseControls(weights), rng.standard_normal((16, d))


@pytest.mark.parametrize(
    ("name", "digits", "message"),
    [
        ("float8", None, "unknown backend 'float8'; allowed: 'float16', 'bfloat16'"),
        ("mpmath", None, "backend 'mpmath' needs digits (a whole number 5..10000)"),
        ("arb", 4, "digits must lie in 5..10000, got 4"),
        ("arb", 10001, "digits must lie in 5..10000, got 10001"),
        ("mpmath", 30.5, "digits must be a whole number 5..10000, got 30.5"),
        ("float16", 10, "backend 'float16' has a fixed precision; digits must be None, got 10"),
    ],
)
def test_registry_rejects(name, digits, message):
    with pytest.raises(InvalidInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        backend(name, digits)


def test_backends_are_cached_and_solve_takes_a_name_or_an_object():
    assert backend("mpmath", 30) is backend("mpmath", 30)
    controls, u0 = _stack(0, layers=2)
    problem = Problem(u0, controls, 2)
    by_name = solve(problem, backend="float32")
    by_object = solve(problem, backend=backend("float32"))
    assert by_name.dtype == np.float32 and np.array_equal(by_name, by_object)


@pytest.mark.parametrize(
    ("precision", "dtype"),
    [("float16", np.float16), ("bfloat16", ml_dtypes.bfloat16), ("longdouble", np.longdouble)],
)
def test_solve_returns_the_format(precision, dtype):
    controls, u0 = _stack(1, layers=2)
    assert solve(Problem(u0, controls, 2), backend=precision).dtype == dtype


@pytest.mark.parametrize("precision", ["float16", "bfloat16"])
def test_low_precision_products_accumulate_in_float32_and_round_once(precision, rng):
    bk = backend(precision)
    a = bk.asarray(rng.standard_normal((7, 300)))
    b = bk.asarray(rng.standard_normal((300, 5)))
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32).astype(bk.dtype)
    got = bk.matmul(a, b)
    assert got.dtype == bk.dtype
    # float32 accumulation of 300 products differs from the exact sum by < 300 * 2^-24
    # relatively, far below half an ulp of the format except at rare ties
    assert np.mean(got == expected) > 0.97
    summed = bk.sum(a, -1)
    exact = a.astype(np.float64).sum(-1, keepdims=True).astype(np.float32).astype(bk.dtype)
    assert np.mean(summed == exact) > 0.97


@pytest.mark.parametrize("precision", ["float16", "bfloat16"])
def test_low_precision_elementwise_results_are_rounded_to_the_format(precision, rng):
    bk = backend(precision)
    x, y = bk.asarray(rng.standard_normal(1000)), bk.asarray(rng.standard_normal(1000) + 3)
    wide = x.astype(np.float64), y.astype(np.float64)
    for got, exact in (
        (x + y, wide[0] + wide[1]),
        (x * y, wide[0] * wide[1]),
        (x / y, wide[0] / wide[1]),
        (bk.exp(x), np.exp(wide[0])),
        (bk.sqrt(y), np.sqrt(wide[1])),
    ):
        assert got.dtype == bk.dtype
        assert np.array_equal(got, exact.astype(np.float32).astype(bk.dtype))


def test_low_precision_layer_norm_statistics_do_not_overflow():
    bk = backend("float16")
    row = bk.asarray(np.linspace(-400.0, 400.0, 16)[None])  # squares up to 1.6e5 > 65504
    _, variance = bk.moments(row)
    assert np.isfinite(variance).all()
    assert float(variance[0, 0]) == pytest.approx(np.var(np.linspace(-400, 400, 16)), rel=1e-3)


@pytest.mark.parametrize("precision", ["float16", "bfloat16", "float32"])
def test_values_that_overflow_the_format_are_rejected_by_name(precision):
    controls, u0 = _stack(2, layers=1)
    u0[3, 5] = 7e38
    largest = {"float16": "65504", "bfloat16": "3.38953e+38", "float32": "3.40282e+38"}
    with pytest.raises(InvalidInputError) as caught:
        solve(Problem(u0, controls, 1), backend=precision)
    message = str(caught.value)
    assert "u0 7e+38 at index (3, 5) overflows " + precision in message
    assert largest[precision] in message


def test_weights_that_overflow_float16_name_the_field():
    layer = LayerWeights.random(8, 2, 16, rng=3)
    w1 = layer.w1.copy()
    w1[1, 2] = 1e5
    big = dataclasses.replace(layer, w1=w1)
    with pytest.raises(InvalidInputError, match=r"w1 100000 at index \(1, 2\) overflows float16"):
        solve(
            Problem(np.random.default_rng(0).standard_normal((3, 8)), PiecewiseControls([big]), 1),
            backend="float16",
        )


def test_overflow_inside_a_low_precision_run_is_reported_not_returned():
    # weights large enough that the FFN of layer 0 exceeds float16's range
    controls, u0 = _stack(4, layers=2, d=16, weight_scale=60.0)
    problem = Problem(u0, controls, 2, norm="none")
    with pytest.raises(
        NumericalBreakdownError, match=r"backend\('float16'\) produced inf or NaN in layer 0"
    ):
        solve(problem, backend="float16")
    assert np.isfinite(solve(problem, backend="float64")).all()


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_float64_agrees_with_mpmath_at_50_digits(seed, norm):
    controls, u0 = _stack(seed)
    problem = Problem(u0, controls, 6, norm=norm)
    reference = backend("mpmath", 50).to_float64(solve(problem, backend=backend("mpmath", 50)))
    got = solve(problem)
    assert np.abs(got - reference).max() <= 1e-13 * np.abs(reference).max()


_MPF = st.one_of(
    st.just(0),
    st.builds(
        lambda man, exp: mpmath.mpf((man, exp)),
        st.integers(-(2**40), 2**40),
        st.integers(-50, 50),  # within the integer path's spread at 5 digits (144 bits)
    ),
)


@settings(max_examples=80, deadline=None)
@given(
    digits=st.sampled_from([5, 30, 100]),
    shape=st.tuples(*[st.integers(0, 4)] * 3),
    data=st.data(),
)
def test_mpmath_products_are_the_exact_sums_rounded_once(digits, shape, data):
    """Each entry of an mpmath matrix product, and of x @ y + b (`affine`), is
    sum_k x_ik y_kj (+ b_j) computed in rationals (Fractions of the stored numbers, wide
    exponent ranges and zeros included) and rounded once to nearest by mpmath's
    from_rational, y and b plain arrays or constants (whose integer forms are kept)."""
    n, k, m = shape
    bk = backend("mpmath", digits)

    def numbers(count: int) -> np.ndarray:
        return bk.asarray(
            np.array(data.draw(st.lists(_MPF, min_size=count, max_size=count)), object)
        )

    x, y, b = numbers(n * k).reshape(n, k), numbers(k * m).reshape(k, m), numbers(m)
    if data.draw(st.booleans()):  # a weight matrix, with its integer form kept
        y = bk.constant(y)
    if data.draw(st.booleans()):
        b = bk.constant(b)
    with_bias = data.draw(st.booleans())
    got = bk.affine(x, y, b) if with_bias else bk.matmul(x, y)
    assert got.shape == (n, m)
    prec = bk.context.prec
    for i in range(n):
        for j in range(m):
            total = sum(
                (_fraction(x[i, c]) * _fraction(y[c, j]) for c in range(k)), start=Fraction(0)
            )
            total += _fraction(b[j]) if with_bias else 0
            want = mpmath.libmp.from_rational(total.numerator, total.denominator, prec, "n")
            assert got[i, j]._mpf_ == want


@pytest.mark.parametrize("name", ["mpmath", "arb"])
def test_a_batch_times_a_weight_is_each_member_times_it(name):
    """A stack of states (2, 3, 4) times a constant weight (4, 5), taken as one product of
    its 6 rows, is each member's own product: bit for bit in mpmath (each entry the exact
    sum rounded once), and in arb balls that meet mpmath's 60 digits."""
    bk = backend(name, 30)
    rng = np.random.default_rng(0)
    states, weight = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5))
    with bk.active():
        x, w, bias = bk.asarray(states), bk.constant(weight), bk.constant(np.arange(5.0))
        stacked = [bk.matmul(x, w), bk.affine(x, w, bias)]
        members = [
            np.stack([bk.matmul(x[i], w) for i in range(2)]),
            np.stack([bk.affine(x[i], w, bias) for i in range(2)]),
        ]
    fine = backend("mpmath", 60)
    exact = fine.matmul(fine.asarray(states), fine.asarray(weight))
    for got, want in zip(stacked, members, strict=True):
        assert got.shape == want.shape == (2, 3, 5)
        if name == "mpmath":
            assert all(a._mpf_ == b._mpf_ for a, b in zip(got.ravel(), want.ravel(), strict=True))
    if name == "arb":
        with bk.active():  # the 60 digits read at the working precision: a ball of its own
            for balls, values in ((stacked[0], exact), (stacked[1], exact + np.arange(5))):
                for ball, value in zip(balls.ravel(), values.ravel(), strict=True):
                    assert ball.overlaps(flint.arb(mpmath.nstr(value, 60)))


def test_mpmath_affine_broadcasts_a_bias_of_another_shape_as_the_base_does():
    """A bias that is not one number per column (a row (1, m) kept as a constant, whose
    cached integer form is a matrix's, or a scalar) is added as numpy broadcasts it."""
    bk = backend("mpmath", 30)
    rng = np.random.default_rng(1)
    x, w = bk.asarray(rng.standard_normal((3, 4))), bk.asarray(rng.standard_normal((4, 5)))
    for bias in (bk.constant(np.array([[0.0, 1, 2, 3, 4]])), bk.asarray(2.5)):
        want = bk.matmul(x, w) + bias
        got = bk.affine(x, w, bias)
        assert got.shape == want.shape and all(
            a._mpf_ == b._mpf_ for a, b in zip(got.ravel(), want.ravel(), strict=True)
        )


def test_mpmath_products_with_infinities_or_wide_exponents_take_fdot():
    """inf, and a row holding 1 and 2^-100000 (an integer of 100000 bits), go to fdot."""
    bk = backend("mpmath", 30)
    x = bk.asarray(np.array([[1.0, np.inf], [2.0, 3.0]]))
    y = bk.asarray(np.array([[1.0], [-1.0]]))
    got = bk.matmul(x, y)
    assert mpmath.isinf(got[0, 0]) and got[0, 0] < 0 and got[1, 0] == -1
    tiny = bk.context.ldexp(1, -100000)
    wide = bk.asarray(np.array([[1, tiny]], dtype=object))
    got = bk.matmul(wide, bk.asarray(np.array([[1.0], [1.0]])))
    assert got[0, 0] == bk.context.fdot([1, tiny], [1, 1]) == 1
    # a bias as far from its products goes to fdot too, which drops it here, where the
    # integer path would round 1 + 2^-prec + 2^-100000 once, to 1 + 2^(1 - prec)
    half_ulp = bk.context.ldexp(1, -bk.context.prec)  # of 1: 1 + half_ulp is a tie
    row = bk.asarray(np.array([[1, half_ulp]], dtype=object))
    got = bk.affine(row, bk.asarray(np.ones((2, 1))), bk.constant(np.array([tiny], dtype=object)))
    assert got[0, 0] == bk.context.fdot([1, half_ulp, 1], [1, 1, tiny]) == 1


@pytest.mark.parametrize("name", ["mpmath", "arb"])
def test_a_constant_matrix_cannot_be_written_through_any_view(name):
    """mpmath and arb keep a faster form of a constant matrix (integers, arb_mat), and
    mpmath of a constant vector (integers), beside it: neither the array nor the array it
    views may be written, nor the array be made writeable."""
    bk = backend(name, 30)
    with bk.active():
        cached = [bk.constant(np.arange(6.0).reshape(2, 3))]
        if name == "mpmath":
            cached.append(bk.constant(np.ones(3)))
        for weights in cached:
            for target in (weights, weights.base):
                with pytest.raises(ValueError, match="read-only"):
                    target[..., 0] = bk.asarray(100.0)
            with pytest.raises(ValueError, match="WRITEABLE"):
                weights.flags.writeable = True


def _fraction(x: mpmath.mpf) -> Fraction:
    sign, man, exp, _ = x._mpf_
    return (-1) ** sign * Fraction(int(man)) * Fraction(2) ** int(exp)


@pytest.mark.parametrize("seed", range(2))
def test_arb_balls_contain_the_60_digit_mpmath_result_and_are_narrow(seed):
    controls, u0 = _stack(seed)
    problem = Problem(u0, controls, 6)
    arb50 = backend("arb", 50)
    balls = solve(problem, backend=arb50)
    assert arb50.max_radius(balls) < 1e-45
    strings = backend("mpmath", 60).to_strings(solve(problem, backend=backend("mpmath", 60)))
    with backend("arb", 80).active():  # read the 60-digit numbers without rounding them
        assert all(
            ball.contains(flint.arb(str(s)))
            for s, ball in zip(strings.flat, balls.flat, strict=True)
        )


def test_arb_relu_of_a_straddling_ball_is_its_non_negative_part():
    bk = backend("arb", 20)
    with bk.active():
        balls = np.array([flint.arb(-1, 2), flint.arb(2, 1), flint.arb(-3, 1)], dtype=object)
        out = bk.relu_(balls.copy())
        assert out[0].contains(0) and out[0].contains(1) and not out[0].contains(-0.001)
        assert out[1].contains(1) and out[1].contains(3)
        assert out[2].is_zero()


@pytest.mark.parametrize("precision", ALL_PRECISIONS, ids=repr)
@settings(max_examples=25, deadline=None)
@given(values=st.lists(st.floats(-1e4, 1e4, allow_nan=False), min_size=1, max_size=12))
def test_decimal_strings_read_back_to_the_same_numbers(precision, values):
    with precision.active():
        x = precision.asarray(np.asarray(values) / 3)  # not representable: exercises rounding
        back = precision.asarray(precision.to_strings(x))
        if precision.name == "arb":
            assert all(b.contains(a) for a, b in zip(x.flat, back.flat, strict=True))
        else:
            assert all(a == b for a, b in zip(x.flat, back.flat, strict=True))


def test_backends_leave_global_precision_alone():
    mp_before, flint_before = mpmath.mp.prec, flint.ctx.prec
    controls, u0 = _stack(5, layers=1)
    for precision in (backend("mpmath", 40), backend("arb", 40)):
        solve(Problem(u0, controls, 1), backend=precision)
    assert (mpmath.mp.prec, flint.ctx.prec) == (mp_before, flint_before)


def test_convert_between_number_systems():
    values = np.array([1 / 3, -2.5e-7, 12345.678])
    mp = backend("mpmath", 40)
    with mp.active():
        thirds = mp.asarray(values) / 7
    as_arb = convert(thirds, mp, backend("arb", 40))
    with backend("arb", 80).active():
        for number, ball in zip(thirds.flat, as_arb.flat, strict=True):
            scaled = mpmath.ldexp(number, 200)  # exact: the mpf is m 2^e with e > -200
            assert scaled == int(scaled)
            assert ball.contains(flint.arb(flint.fmpq(int(scaled), 2**200)))
    back = convert(as_arb, backend("arb", 40), mp)  # a ball becomes its midpoint
    assert max(abs(a - b) for a, b in zip(back.flat, thirds.flat, strict=True)) < 1e-38
    as_float = convert(as_arb, backend("arb", 40), "float64")
    assert np.array_equal(as_float, (values / 7))
    half = convert(thirds, mp, "float16")
    assert half.dtype == np.float16 and np.array_equal(half, (values / 7).astype(np.float16))


@pytest.mark.parametrize("source", ["float16", "bfloat16", "float32", "float64", "longdouble"])
@pytest.mark.parametrize("target", ["mpmath", "arb"])
def test_binary_floats_convert_exactly_into_high_precision(source, target):
    bk = backend(source)
    values = bk.to_output(bk.asarray([0.1, 1 / 3, -2.5e-7, 12345.678]))
    wide = convert(values, bk, backend(target, 60))
    for value, number in zip(values.flat, wide.flat, strict=True):
        numerator, denominator = np.longdouble(value).as_integer_ratio()
        # exact: the binary value itself, not its shortest decimal string (0.1 != 1/10)
        assert number * denominator == numerator


def test_longdouble_rounds_fractions_once():
    from fractions import Fraction

    bk = backend("longdouble")
    third = bk.asarray(Fraction(1, 3))
    assert third == np.longdouble(1) / np.longdouble(3)
    assert third != np.longdouble(1 / 3)  # not through float64


def test_longdouble_erfc_is_within_a_few_unit_roundoffs_of_mpmath():
    """Absolutely within 16 unit roundoffs everywhere (12 measured), and relatively within
    8 + 2 z^2 of them on the continued fraction's side while erfc is normal (1.5 z^2
    measured: its exp(-z^2) inherits the rounding of z^2). Inputs and values compared
    exactly (as the fractions they are)."""
    from solvers.backends.longdouble import erfc

    def exact(v):
        numerator, denominator = np.longdouble(v).as_integer_ratio()
        return mpmath.mpf(numerator) / denominator

    unit = np.finfo(np.longdouble).eps / 2
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [rng.uniform(-7, 106, 1500), np.linspace(-2.2, 2.2, 441), [1e-30, 2.0, -2.0]]
    ).astype(np.longdouble)
    with mpmath.workprec(256):
        truth = [mpmath.erfc(exact(v)) for v in x]
        error = np.array([float(abs(exact(v) - e)) for v, e in zip(erfc(x), truth, strict=True)])
        relative = np.array(
            [float(abs(exact(v) - e) / e) for v, e in zip(erfc(x), truth, strict=True)]
        )
    assert np.max(error) <= 16 * unit
    far = np.asarray(x >= 2)
    z = np.asarray(x[far], dtype=np.float64)
    assert np.all(relative[far] <= (8 + 2 * z**2) * unit)
    special = erfc(np.array([np.nan, np.inf, -np.inf, 0.0]))
    assert np.isnan(special[0]) and list(special[1:]) == [0, 2, 1]


def test_arb_certifies_a_result_that_is_exactly_zero():
    zero = backend("arb", 20).certify(lambda working: working.asarray(np.zeros(3)))
    assert all(ball.is_zero() for ball in zero)


def _gelu(t):
    return t * (1 + mpmath.erf(t / mpmath.sqrt(2))) / 2


def _gelu_tanh(t):
    root = mpmath.sqrt(2 / mpmath.pi)
    return t * (1 + mpmath.tanh(root * (t + mpmath.mpf("0.044715") * t**3))) / 2


def _silu(t):
    return t / (1 + mpmath.exp(-t))


INPUTS = (-6.0, -3.0, -0.5, -1e-3, 0.0, 0.7, 2.5, 9.0)
SMOOTH_ACTIVATIONS = {
    "gelu": (_gelu, 4, (-2.806, *INPUTS)),  # erf and the products round a few times
    "gelu_tanh": (_gelu_tanh, 8, INPUTS),  # the cubic, tanh and the products
    "silu": (_silu, 4, (-800.0, *INPUTS)),  # exp, the sum and the division
}
"""Each backend method's exact value (mpmath), its allowance in units of u, its inputs."""
LONG_DOUBLE_GELU = 16
"""Long double's GELU computes 1 - erf(z) below z = 2 from erf's series (within 12 u),
times |a| / 2 up to sqrt 2: 12.3 u measured at a = -2.806 (solvers.backends.longdouble)."""


@pytest.mark.parametrize("activation", sorted(SMOOTH_ACTIVATIONS))
@pytest.mark.parametrize("bk", ALL_PRECISIONS, ids=repr)
def test_smooth_activations_to_the_formats_rounding(bk, activation):
    """GELU x Phi(x), GPT-2's tanh form and silu x / (1 + exp(-x)) against mpmath at 60
    digits or twice the format's, within the allowance of u times max(|value|, 1); silu's
    exp(800) does not overflow the answer, which is -0 to any format's precision."""
    exact_of, allowance, points = SMOOTH_ACTIVATIONS[activation]
    if (bk.name, activation) == ("longdouble", "gelu"):
        allowance = LONG_DOUBLE_GELU
    x = np.array(points)
    with bk.active():
        strings = bk.to_strings(getattr(bk, activation)(bk.asarray(x)))
    inputs = ball_midpoints(bk.to_strings(bk.to_output(bk.asarray(x))))
    with mpmath.workprec(max(200, 2 * round(-math.log2(bk.unit_roundoff)) + 20)):
        for given, computed in zip(inputs, ball_midpoints(strings), strict=True):
            exact = exact_of(mpmath.mpf(str(given)))
            error = abs(mpmath.mpf(str(computed)) - exact)
            assert error <= allowance * bk.unit_roundoff * max(abs(exact), 1), (given, error)


def test_silu_is_torchs():
    import torch

    x = np.linspace(-30, 30, 2001)
    expected = torch.nn.functional.silu(torch.tensor(x)).numpy()
    assert np.abs(backend("float64").silu(x) - expected).max() <= 4 * 2.0**-53 * 30


@pytest.mark.parametrize("activation", sorted(ACTIVATION_LIPSCHITZ))
def test_each_activation_lipschitz_constant_bounds_its_slope_tightly(activation):
    """ACTIVATION_LIPSCHITZ is an upper bound on |sigma'| (central differences of the
    float64 activation on a fine grid over [-10, 10], where the extremes lie) and within
    1e-3 of it; |sigma(z)| <= |z| as the bounds assume."""
    bk = backend("float64")
    z = np.linspace(-10, 10, 200_001)
    sigma = {
        "relu": lambda v: np.maximum(v, 0),
        "gelu": bk.gelu,
        "gelu-tanh": bk.gelu_tanh,
        "silu": bk.silu,
    }[activation]
    h = 1e-5
    slope = np.abs(sigma(z + h) - sigma(z - h)) / (2 * h)
    bound = ACTIVATION_LIPSCHITZ[activation]
    assert slope.max() <= bound * (1 + 1e-9) and bound <= slope.max() + 1e-3  # 1e-9: rounding
    assert np.all(np.abs(sigma(z)) <= np.abs(z) + 1e-15)


def test_gelu_tanh_is_torchs_approximate_tanh():
    import torch

    x = np.linspace(-8, 8, 1001)
    expected = torch.nn.functional.gelu(torch.tensor(x), approximate="tanh").numpy()
    assert np.abs(backend("float64").gelu_tanh(x) - expected).max() <= 8 * 2.0**-53 * 8


def test_mpmath_numbers_round_once_into_the_binary_formats():
    """mpmath travels as exact fractions: into long double each number is within half a
    unit in the last place of the exact m 2^e (compared in rationals); numbers beyond long
    double's range underflow to 0 or are refused as an overflow, without warnings."""
    mp = backend("mpmath", 20)
    with mp.active():
        x = mp.asarray(np.random.default_rng(3).standard_normal(500)) / 7
        tiny = mp.asarray(np.array([1e-300])) ** 17
        huge = mp.asarray(np.array([1e300])) ** 17
    for number, rounded in zip(x, convert(x, mp, "longdouble"), strict=True):
        exact = Fraction(int(mpmath.ldexp(number, 200)), 2**200)  # exact: e > -200
        half_ulp = Fraction(*np.spacing(abs(rounded)).as_integer_ratio()) / 2
        assert abs(Fraction(*rounded.as_integer_ratio()) - exact) <= half_ulp
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert convert(tiny, mp, "float64")[0] == 0
        with pytest.raises(InvalidInputError, match="overflows float64"):
            convert(huge, mp, "float64")
