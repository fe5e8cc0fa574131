"""Multi-float matrix products through float64 GEMMs (solvers.backends.multifloat.products,
docs/rounding.md section 7) against exact rationals, on inputs whose products cancel
and whose rows span six decades: each entry within BOUND u^n of
sum_k |a_ik| |b_kj| + 2 K 2^-G max_k |a_ik| max_k |b_kj| (G the guard bits), where its
exact value is far smaller."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from solvers.backends.multifloat import expansions as ex
from solvers.backends.multifloat import kernels, products
from solvers.backends.multifloat.backend import OPERATION_BOUND
from tests.solvers.backends.multifloat.limbs import exact, with_tails

BOUND = 1.0
"""In u^n = 2^(-53 n), relative to |A| |B| entrywise (docs/rounding.md section 7)."""


def _numbers(rng: np.random.Generator, shape: tuple[int, ...], n: int) -> np.ndarray:
    return with_tails(rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape), rng, n)


@pytest.mark.parametrize("path", ["splitting", "kernel"])
@pytest.mark.parametrize("n", ex.LIMBS)
@pytest.mark.parametrize("inner", [16, 128])
def test_cancelling_products_are_within_the_bound(n, inner, path, monkeypatch):
    """B's second half of rows is -(1 + 2^-40) times its first, A's columns repeat: every
    entry of A B cancels to about 2^-40 of its terms' magnitudes. The splitting keeps
    BOUND, the multiply-add kernel its K multiplications' and additions' roundings."""
    work = 0 if path == "splitting" else math.inf
    monkeypatch.setattr(products, "KERNEL_WORK", dict.fromkeys(ex.LIMBS, work))
    rng = np.random.default_rng(n + inner)
    half = _numbers(rng, (inner // 2, 24), n)
    factor = np.zeros((n, 1, 1))
    factor[0] = -(1 + 2.0**-40)
    b = np.concatenate([half, kernels.binary(kernels.MUL, half, factor)], axis=1)
    left = _numbers(rng, (9, inner // 2), n)
    a = np.concatenate([left, left], axis=2)
    c = products.matmul(a, b)
    exact_a, exact_b = exact(a), exact(b)
    product = exact_a.dot(exact_b)
    largest = np.max(np.abs(exact_a), axis=1)[:, None] * np.max(np.abs(exact_b), axis=0)
    guard = Fraction(2 * inner, 2**products.GUARD_BITS)
    magnitude = np.abs(exact_a).dot(np.abs(exact_b)) + guard * largest
    got = exact(c)
    unit = Fraction(1, 2 ** (53 * n))
    triples = zip(got.flat, product.flat, magnitude.flat, strict=True)
    ratios = [abs(g - e) / m / unit for g, e, m in triples]
    assert float(max(ratios)) <= (BOUND if path == "splitting" else 2 * inner * OPERATION_BOUND[n])
    assert float(max(abs(e) / m for e, m in zip(product.flat, magnitude.flat, strict=True))) < 1e-10


def test_small_products_take_the_kernel_and_agree():
    rng = np.random.default_rng(1)
    a, b = _numbers(rng, (4, 8), 3), _numbers(rng, (8, 8), 3)
    np.testing.assert_array_equal(products.matmul(a, b), kernels.matmul(a, b))
