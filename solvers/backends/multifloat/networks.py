"""Branch-free addition and multiplication of three- and four-limb expansions: fixed
sequences ("accumulation networks") of TwoSum, FastTwoSum, TwoProd and plain float64
operations, with no comparison, sort or data-dependent branch, so that a kernel running
them over an array is straight-line code the compiler can pipeline and vectorise
(docs/rounding.md section 6).

The networks are those of D. K. Zhang's MultiFloats.jl, found by search; the method of
verifying such networks (an SMT-based abstraction of floating-point sums) is Zhang and
Aiken's ("Automatic verification of floating-point accumulation networks", CAV 2025).
The error bounds the suite states for them are measured here, not proven: each result a
normalised expansion within a small multiple of u^n (u = 2^-53) of the exact sum or
product, for normalised operands whose results stay in float64's normal range.

- addition: the limbs' pairwise TwoSums x_k + y_k, then the partial sums and their errors
  carried down level by level and renormalised by FastTwoSum sweeps.
- multiplication: the products x_a y_b with a + b < n - 1 exactly (TwoProd), those on
  diagonal n - 1 rounded, the ones below dropped (under 2^(-53 n) relative), accumulated
  diagonal by diagonal and renormalised.

tests/solvers/backends/multifloat/test_expansions.py measures the errors against exact
rationals, cancellation included.
"""

from __future__ import annotations

import numba

from solvers.backends.multifloat.double_word import fast_two_sum, two_prod, two_sum


@numba.njit(cache=True, inline="always", error_model="numpy")
def add3(x0, x1, x2, y0, y1, y2):
    """(x0 + x1 + x2) + (y0 + y1 + y2) as a normalised three-limb expansion."""
    a, b = two_sum(x0, y0)
    c, d = two_sum(x1, y1)
    e, f = two_sum(x2, y2)
    a, c = fast_two_sum(a, c)
    b += f
    d, e = two_sum(d, e)
    a, d = fast_two_sum(a, d)
    b, c = two_sum(b, c)
    c += e
    c, d = two_sum(c, d)
    b, c = two_sum(b, c)
    a, b = fast_two_sum(a, b)
    c += d
    b, c = fast_two_sum(b, c)
    a, b = fast_two_sum(a, b)
    b, c = fast_two_sum(b, c)
    return a, b, c


@numba.njit(cache=True, inline="always", error_model="numpy")
def add4(x0, x1, x2, x3, y0, y1, y2, y3):
    """(x0 + ... + x3) + (y0 + ... + y3) as a normalised four-limb expansion."""
    a, b = two_sum(x0, y0)
    c, d = two_sum(x1, y1)
    e, f = two_sum(x2, y2)
    g, h = two_sum(x3, y3)
    a, c = fast_two_sum(a, c)
    b += h
    d, e = two_sum(d, e)
    f, g = two_sum(f, g)
    b, g = two_sum(b, g)
    c, d = fast_two_sum(c, d)
    e, f = two_sum(e, f)
    a, c = fast_two_sum(a, c)
    d, e = fast_two_sum(d, e)
    b, d = two_sum(b, d)
    c, g = fast_two_sum(c, g)
    e += f
    b, c = two_sum(b, c)
    d, e = two_sum(d, e)
    a, b = fast_two_sum(a, b)
    c, d = two_sum(c, d)
    e += g
    b, c = fast_two_sum(b, c)
    d, e = two_sum(d, e)
    a, b = fast_two_sum(a, b)
    c, d = fast_two_sum(c, d)
    b, c = fast_two_sum(b, c)
    d += e
    a, b = fast_two_sum(a, b)
    c, d = fast_two_sum(c, d)
    b, c = fast_two_sum(b, c)
    c, d = fast_two_sum(c, d)
    return a, b, c, d


@numba.njit(cache=True, inline="always", error_model="numpy")
def mul3(x0, x1, x2, y0, y1, y2):
    """(x0 + x1 + x2)(y0 + y1 + y2) as a normalised three-limb expansion."""
    p00, e00 = two_prod(x0, y0)
    p01, e01 = two_prod(x0, y1)
    p10, e10 = two_prod(x1, y0)
    p02 = x0 * y2
    p11 = x1 * y1
    p20 = x2 * y0
    p01, p10 = two_sum(p01, p10)
    e01 += e10
    p02 += p20
    e00, p01 = two_sum(e00, p01)
    p02 += p11
    p00, e00 = fast_two_sum(p00, e00)
    p01 += p10
    e01 += p02
    p01 += e01
    e00, p01 = two_sum(e00, p01)
    p00, e00 = fast_two_sum(p00, e00)
    e00, p01 = fast_two_sum(e00, p01)
    p00, e00 = fast_two_sum(p00, e00)
    return p00, e00, p01


@numba.njit(cache=True, inline="always", error_model="numpy")
def mul4(x0, x1, x2, x3, y0, y1, y2, y3):
    """(x0 + ... + x3)(y0 + ... + y3) as a normalised four-limb expansion."""
    p00, e00 = two_prod(x0, y0)
    p01, e01 = two_prod(x0, y1)
    p10, e10 = two_prod(x1, y0)
    p02, e02 = two_prod(x0, y2)
    p11, e11 = two_prod(x1, y1)
    p20, e20 = two_prod(x2, y0)
    p03 = x0 * y3
    p12 = x1 * y2
    p21 = x2 * y1
    p30 = x3 * y0
    p01, p10 = two_sum(p01, p10)
    e01, e10 = two_sum(e01, e10)
    p02, p20 = two_sum(p02, p20)
    e02 += e20
    p03 += p30
    p12 += p21
    e00, p01 = two_sum(e00, p01)
    e01, p11 = two_sum(e01, p11)
    e10 += e02
    p20 += e11
    p03 += p12
    p00, e00 = fast_two_sum(p00, e00)
    p01, p10 = fast_two_sum(p01, p10)
    e01, p02 = two_sum(e01, p02)
    e10 += p03
    p11 += p20
    p01, e01 = two_sum(p01, e01)
    p10 += p11
    e10 += p02
    p10 += e01
    p01, p10 = two_sum(p01, p10)
    e00, p01 = two_sum(e00, p01)
    p10 += e10
    p00, e00 = fast_two_sum(p00, e00)
    p01, p10 = two_sum(p01, p10)
    e00, p01 = two_sum(e00, p01)
    p00, e00 = fast_two_sum(p00, e00)
    p01, p10 = fast_two_sum(p01, p10)
    e00, p01 = fast_two_sum(e00, p01)
    p00, e00 = fast_two_sum(p00, e00)
    p01, p10 = fast_two_sum(p01, p10)
    e00, p01 = fast_two_sum(e00, p01)
    p01, p10 = fast_two_sum(p01, p10)
    return p00, e00, p01, p10
