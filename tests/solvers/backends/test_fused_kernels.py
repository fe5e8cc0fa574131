"""The fused float kernels (solvers.backends.fused) against mpmath and the base formulas.

Truth here is mpmath at 40 digits: exp within 1 ulp everywhere float64 has a value, the
softmax and the moments within the rounding model's gamma bounds (docs/schemes.md
section 6).
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solvers import backend
from solvers.backends import fused
from solvers.backends.base import Backend

U64 = 2.0**-53
mpmath.mp.dps = 40


def _ulps(x: float, got: float) -> float:
    """|got - exp(x)| in units in the last place of exp(x) (float64)."""
    true = mpmath.exp(mpmath.mpf(x))
    if true < mpmath.mpf(2) ** -1075:  # rounds to 0
        return 0.0 if got == 0 else np.inf
    spacing = np.spacing(np.float64(float(true)))
    return float(abs(mpmath.mpf(got) - true) / mpmath.mpf(float(spacing)))


def test_exp_is_within_one_ulp_over_float64s_range():
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            rng.uniform(-745.2, 709.8, 4000),  # the whole range, subnormal results included
            rng.uniform(-1, 1, 2000),
            rng.uniform(-40, 0, 2000),  # where softmax arguments live
            np.arange(-1074, 1024) * np.log(2),  # near the reduction's boundaries
            np.arange(-1074, 1024) * np.log(2) + np.log(2) / 2,
        ]
    )
    x = x[x < 709.78]  # exp(709.79) overflows
    got = fused.exp_(x.copy())
    errors = np.array([_ulps(a, b) for a, b in zip(x, got, strict=True)])
    assert errors.max() <= 1.0, (x[errors.argmax()], errors.max())


def test_exp_of_special_values():
    x = np.array([[-np.inf, np.inf, np.nan, 0.0, -0.0, 709.79, -745.2, -1e300, 1e300]])
    got = fused.exp_(x)[0]
    assert got[0] == 0 and got[1] == np.inf and np.isnan(got[2])
    assert got[3] == 1 and got[4] == 1
    assert got[5] == np.inf and got[6] == 0 and got[7] == 0 and got[8] == np.inf


def _mp_softmax(row: np.ndarray) -> list:
    weights = [mpmath.exp(mpmath.mpf(float(s))) if np.isfinite(s) else 0 for s in row]
    total = mpmath.fsum(weights)
    return [w / total for w in weights]


@pytest.mark.parametrize("shape", [(3, 5), (4, 64, 64), (8, 128, 128)])
def test_softmax_matches_mpmath_within_the_rounding_bound(shape):
    rng = np.random.default_rng(1)
    scores = rng.standard_normal(shape) * 8
    scores[..., 1::3, 0] = -np.inf  # masked keys give exactly 0
    bk = backend("float64")
    weights = bk.softmax_(scores.copy())
    rows, got = scores.reshape(-1, shape[-1]), weights.reshape(-1, shape[-1])
    n = shape[-1]
    for i in range(0, rows.shape[0], max(1, rows.shape[0] // 40)):
        # docs/rounding.md section 2: the shift s - c rounds by u |s - c| (the weights move
        # by twice the largest), then exp, the sum and the division: gamma_{N+3}
        finite = rows[i][np.isfinite(rows[i])]
        shift = U64 * np.max(finite.max() - finite)
        bound = 2 * shift + (n + 3) * U64 / (1 - (n + 3) * U64)
        true = _mp_softmax(rows[i])
        for j in range(n):
            if true[j] == 0:
                assert got[i, j] == 0
            else:
                assert abs(got[i, j] - true[j]) <= bound * true[j], (i, j)


def test_softmax_rows_with_nan_or_inf_are_nan_as_in_numpy():
    scores = np.array([[0.0, np.nan, 1.0], [np.inf, 0.0, 1.0], [-np.inf, -np.inf, -np.inf]])
    with np.errstate(invalid="ignore"):
        expected = Backend.softmax_(backend("float64"), scores.copy())
    got = backend("float64").softmax_(scores.copy())
    assert np.isnan(got).all() and np.isnan(expected).all()


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(1, 300),
    st.floats(1e-3, 1e3),
    st.sampled_from(["float32", "float64"]),
)
def test_kernels_agree_with_the_base_formulas(rows, width, spread, name):
    """Any shape: the fused softmax and moments are the base protocol's
    formulas up to rounding (float32 computed in float64 inside, so closer still)."""
    bk = backend(name)
    rng = np.random.default_rng(rows * 1000 + width)
    a = (rng.standard_normal((rows, width)) * spread + spread).astype(bk.dtype)
    u = float(bk.unit_roundoff)
    with np.errstate(all="ignore"):
        base_weights = Backend.softmax_(bk, np.array(a, np.float64))
    weights = bk.softmax_(a.copy())
    assert weights.dtype == bk.dtype
    # relative to each weight: the shift, exp, the sum and the division of both sides
    tolerance = 4 * (width + 3) * u * (1 + np.abs(a).max(axis=-1, keepdims=True))
    # and the smallest subnormal of the format, where a weight underflows
    underflow = float(np.finfo(bk.dtype).smallest_subnormal)
    assert np.all(np.abs(weights - base_weights) <= tolerance * base_weights + underflow)
    mean, variance = bk.moments(a)
    exact_mean = a.astype(np.float64).mean(-1, keepdims=True)
    exact_variance = a.astype(np.float64).var(-1, keepdims=True)
    scale = np.abs(a).max(axis=-1, keepdims=True).astype(np.float64)
    assert np.all(np.abs(mean - exact_mean) <= 2 * width * u * scale)
    assert np.all(np.abs(variance - exact_variance) <= 8 * width * u * scale**2)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 30), st.integers(2, 200), st.sampled_from(["float32", "float64"]))
def test_the_tangent_projection_is_the_base_formula_and_tangent(rows, width, name):
    """Pi_T(u) g from the kernel: the base protocol's formula up to rounding, and, as
    docs/model.md section 1 proves of Pi_T, of mean 0 and orthogonal to u - mean(u)."""
    bk = backend(name)
    rng = np.random.default_rng(rows * 1000 + width)
    u = rng.standard_normal((rows, width)).astype(bk.dtype)
    g = (rng.standard_normal((rows, width)) * 3).astype(bk.dtype)
    mean, variance = bk.moments(u)
    got = bk.tangent_rows(u, mean, variance, g)
    base = Backend.tangent_rows(bk, u, mean, variance, g)
    u_ = float(bk.unit_roundoff)
    scale = np.abs(g).max() * (1 + np.abs(u).max() ** 2 / variance.min())
    assert np.abs(got - base).max() <= 8 * width * u_ * scale
    centred = u.astype(np.float64) - u.astype(np.float64).mean(-1, keepdims=True)
    assert np.abs(got.astype(np.float64).mean(-1)).max() <= 4 * width * u_ * scale
    along = (got.astype(np.float64) * centred).mean(-1)
    assert np.abs(along).max() <= 4 * width * u_ * scale * np.abs(centred).max()


def _layer_norm_in_mpmath(u, gain, bias, eps):
    """g (u - mean) / sqrt(var + eps) + b per row of float64 u, at 40 digits."""
    out = np.empty(u.shape)
    for i, row in enumerate(u.astype(np.float64)):
        row = [mpmath.mpf(float(x)) for x in row]
        mean = mpmath.fsum(row) / len(row)
        scale = mpmath.sqrt(mpmath.fsum((x - mean) ** 2 for x in row) / len(row) + eps)
        for j, x in enumerate(row):
            out[i, j] = float(mpmath.mpf(float(gain[j])) * (x - mean) / scale + float(bias[j]))
    return out


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(2, 40),
    st.sampled_from([0.0, 1e-5, 0.5]),
    st.booleans(),
    st.sampled_from(["float32", "float64"]),
)
def test_layer_norm_matches_mpmath_and_projects_onto_s1(rows, width, eps, per_feature, name):
    """The fused layer norm (moments, then normalise_rows) against mpmath at 40 digits on
    the same stored inputs: within a few roundings of each output's terms; with eps = 0
    and scalar gain sigma2 and bias sigma1 its rows have mean sigma1 and variance
    sigma2^2 (Theorem 3.1, docs/model.md section 1)."""
    bk = backend(name)
    rng = np.random.default_rng(rows * 1000 + width)
    u = (rng.standard_normal((rows, width)) * 5 + 3).astype(bk.dtype)
    shape = (width,) if per_feature else ()
    gain = (rng.uniform(0.5, 2, shape)).astype(bk.dtype)
    bias = rng.standard_normal(shape).astype(bk.dtype)
    mean, variance = bk.moments(u)
    got = bk.normalise_rows(u, mean, variance, bk.asarray(eps), gain, bias)
    assert got.dtype == bk.dtype and got.shape == u.shape
    g, b = np.broadcast_to(gain, (width,)), np.broadcast_to(bias, (width,))
    exact = _layer_norm_in_mpmath(u, g, b, float(bk.asarray(eps)))
    unit = float(bk.unit_roundoff)
    # the mean's error gamma_d max|u| over the deviation sd, the variance's gamma_d relative,
    # then the subtraction, sqrt, division and the last multiply-add: a few units each
    wide = u.astype(np.float64)
    sd = np.sqrt(wide.var(-1, keepdims=True) + float(bk.asarray(eps)))
    normalised = np.abs(exact - b) / np.abs(g)
    size = np.abs(g) * (normalised + np.abs(wide).max(-1, keepdims=True) / sd) + np.abs(b)
    assert np.all(np.abs(got - exact) <= 4 * (width + 4) * unit * size)
    if eps == 0.0 and not per_feature:
        rows_mean = got.astype(np.float64).mean(-1, keepdims=True)
        assert np.all(np.abs(rows_mean - float(bias)) <= 4 * (width + 4) * unit * size.max())
        relative = np.abs(got.astype(np.float64).var(-1) / float(gain) ** 2 - 1)
        assert relative.max() <= 16 * (width + 4) * unit * (1 + np.abs(wide).max() / sd.min())


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_layer_norm_kernel_and_base_path_agree_on_batches_and_views(name):
    """A batch of states (leading axes) takes the kernel; a strided view takes the base
    formula: both within the format's rounding of each other."""
    bk = backend(name)
    u = bk.asarray(np.random.default_rng(3).standard_normal((2, 3, 5, 16)))
    gain, bias = bk.asarray(np.linspace(0.5, 2, 16)), bk.asarray(0.25)
    mean, variance = bk.moments(u)
    eps = bk.asarray(1e-5)
    fused_rows = bk.normalise_rows(u, mean, variance, eps, gain, bias)
    base_rows = Backend.normalise_rows(bk, u, mean, variance, eps, gain, bias)
    np.testing.assert_allclose(fused_rows, base_rows, rtol=0, atol=64 * bk.unit_roundoff)
    view = u[..., ::2]
    mean, variance = bk.moments(view.copy())
    strided = bk.normalise_rows(view, mean, variance, eps, gain[::2], bias)
    contiguous = bk.normalise_rows(view.copy(), mean, variance, eps, gain[::2].copy(), bias)
    np.testing.assert_allclose(strided, contiguous, rtol=0, atol=64 * bk.unit_roundoff)


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_bias_relu_is_the_correctly_rounded_sum_then_the_projection(name):
    """max(a + b, 0): IEEE addition is correctly rounded, so the kernel equals numpy's
    a + b followed by the projection onto {z >= 0} bit for bit, NaN staying NaN and
    infinities kept, on a batch (kernel) and a strided view (base path)."""
    bk = backend(name)
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((3, 7, 33)) * 10).astype(bk.dtype)
    a[0, 0, :3] = [np.nan, np.inf, -np.inf]
    bias = (rng.standard_normal(33) * 10).astype(bk.dtype)
    expected = np.maximum(a + bias, 0)
    got = bk.bias_relu_(a.copy(), bias)
    np.testing.assert_array_equal(got, expected)
    assert np.isnan(got[0, 0, 0]) and got[0, 0, 1] == np.inf and got[0, 0, 2] == 0
    view = a.copy()[..., ::3]
    np.testing.assert_array_equal(bk.bias_relu_(view, bias[::3]), expected[..., ::3])


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_kernels_keep_the_shape_of_scalars_and_strided_arrays(name):
    """A 0-d value stays 0-d, and a strided view (the base path: scipy's erf for GELU)
    takes its copy's values (the kernels) to the format's rounding."""
    bk = backend(name)
    x = bk.asarray(0.75)
    assert np.shape(bk.gelu(x)) == () and np.shape(bk.exp(x)) == ()
    strided = bk.asarray(np.linspace(-3, 3, 24).reshape(4, 6))[:, ::2]
    for f in (bk.gelu, bk.exp):
        np.testing.assert_allclose(f(strided), f(strided.copy()), rtol=4 * bk.unit_roundoff)
