"""The compiled row operations (`rows`) and the fused GELU and affine map of the
multi-float backends give the generic methods' results (solvers/backends/base.py,
composed of the elementwise operations) on every limb, masked softmax entries exactly 0."""

from __future__ import annotations

import numpy as np
import pytest

from solvers import backend
from solvers.backends.base import Backend
from solvers.backends.multifloat import functions

FORMATS = ("float64x2", "float64x3", "float64x4")


def _random(bk, shape, seed):
    rng = np.random.default_rng(seed)
    base = rng.standard_normal(shape)
    tail = rng.standard_normal(shape) * 2.0**-60  # numbers with more than one limb
    return bk.asarray(base) + bk.asarray(tail)


def _same(ours, generic):
    assert np.array_equal(ours.limbs, generic.limbs)


@pytest.mark.parametrize("name", FORMATS)
def test_norm_rows_are_the_generic_methods(name):
    bk = backend(name)
    u, g = _random(bk, (3, 5, 8), 1), _random(bk, (3, 5, 8), 2)
    gain, bias, eps = _random(bk, (8,), 3), _random(bk, (8,), 4), bk.asarray(1e-5)
    mean, variance = bk.moments(u)
    generic_mean, generic_variance = Backend.moments(bk, u)
    _same(mean, generic_mean)
    _same(variance, generic_variance)
    _same(bk.mean_square(u), Backend.mean_square(bk, u))
    for scale in (gain, bk.asarray(2.5)):
        ours = bk.normalise_rows(u, mean, variance, eps, scale, bias)
        _same(ours, Backend.normalise_rows(bk, u, mean, variance, eps, scale, bias))
    _same(bk.tangent_rows(u, mean, variance, g), Backend.tangent_rows(bk, u, mean, variance, g))


@pytest.mark.parametrize("name", FORMATS)
def test_softmax_is_the_generic_one_and_masked_entries_are_zero(name):
    bk = backend(name)
    scores = _random(bk, (2, 4, 6), 5) * 30.0
    scores[:, 1, 3:] = -np.inf
    ours, generic = bk.softmax_(scores.copy()), Backend.softmax_(bk, scores.copy())
    _same(ours, generic)
    assert np.all(ours.limbs[:, :, 1, 3:] == 0.0)
    row_sums = bk.to_float64(bk.sum(ours, -1))
    assert np.allclose(row_sums, 1.0, rtol=0, atol=1e-15)


@pytest.mark.parametrize("name", FORMATS)
def test_gelu_and_affine_are_their_elementwise_forms(name):
    bk = backend(name)
    n = bk.limbs
    x = _random(bk, (4, 16), 6) * 4.0
    x[0, :3] = bk.asarray([np.inf, -np.inf, np.nan])
    elementwise = x * (functions.erfc(x * -functions.constant("1/sqrt(2)", n)) * 0.5)
    ours = bk.gelu(x)
    finite = np.isfinite(bk.to_float64(x))
    assert np.array_equal(ours.limbs[:, finite], elementwise.limbs[:, finite])
    assert bk.to_float64(ours)[0, 0] == np.inf and np.isnan(bk.to_float64(ours)[0, 1:3]).all()
    a, w, b = _random(bk, (5, 8), 7), _random(bk, (8, 3), 8), _random(bk, (3,), 9)
    _same(bk.affine(a, w, b), Backend.affine(bk, a, w, b))
