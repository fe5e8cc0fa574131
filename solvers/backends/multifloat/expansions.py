"""Floating-point expansions of n float64 limbs, x = x_0 + x_1 + ... + x_{n-1}, normalised
so that each limb is at most half an ulp of the one before (|x_{k+1}| <= ulp(x_k) / 2):
about 53 n bits, 32, 48 and 64 decimal digits at n = 2, 3 and 4 (docs/rounding.md
section 6). The column operations here (`add_at`, `add_float_at`, `mul_at`,
`mul_float_at`, `div_at`: one number, a column of a limb array (n, size), from others)
are what the array kernels (`kernels`) and the elementary functions (`elementary`) are
written in; the limb count reaches them as the length of a tuple (`WIDTHS`).

Two limbs use the double-word algorithms with proven bounds (`double_word`). Three and
four use the expansion algorithms of Joldes, Marty, Muller and Popescu ("Arithmetic
algorithms for extended precision using floating-point expansions", IEEE Trans. Computers
65(4), 2016; their CAMPARY library), every one ending in the same renormalisation:

- `_renormalise` (their VecSum followed by VecSumErrBranch): a TwoSum sweep from the
  smallest term up leaves the terms' exact sum as a float64 sum and its rounding errors;
  a second sweep down the list keeps a limb each time the running carry is non-zero, and
  stops after n limbs. The sweeps are exact; only the discarded tail (below half an ulp
  of the last limb kept) is lost.
- addition merges the 2 n limbs of the operands by magnitude and renormalises them: the
  exact sum is kept until the renormalisation, so cancellation costs nothing.
- multiplication forms the products x_i y_j with i + j < n exactly (TwoProd) and those
  with i + j = n rounded, orders them by their diagonal i + j (their magnitudes' order),
  and renormalises; the products with i + j > n and the errors of the rounded ones are
  below 2^(-53 n) relative and are dropped.
- division takes n + 1 quotient digits, each the float64 quotient of the remainder by
  y_0, the remainder updated in n-limb arithmetic (Hida, Li and Bailey's long division).
- the square root takes Newton steps s <- s + (x - s^2) / (2 s) from the float64 root,
  each doubling the correct bits: one step for n = 2 (done by `double_word`), two for 3
  and 4.

The errors measured against exact rationals are in docs/rounding.md section 6
(tests/solvers/backends/multifloat/test_expansions.py). Valid for finite operands whose
results stay in float64's normal range (a limb below 2^-1022 loses digits).
"""

from __future__ import annotations

import numba
import numpy as np

from solvers.backends.multifloat import double_word as dw
from solvers.backends.multifloat.double_word import two_prod, two_sum

LIMBS = (2, 3, 4)
"""The limb counts the kernels support."""

WIDTHS = {n: (0.0,) * n for n in LIMBS}
"""The limb count as the kernels take it, the length of a tuple (`width`): numba compiles
each count apart, with its loops of known length and the other counts' branches gone
(a count read from an array's shape keeps them, at eight times the cost at n = 2)."""


@numba.njit(cache=True, inline="always", error_model="numpy")
def _vec_sum(t, m):
    """VecSum: t[0:m] replaced by a float64 sum of its terms, t[0], and the rounding errors
    of the sweep from the bottom, with the same exact sum."""
    s = t[m - 1]
    for k in range(m - 2, -1, -1):
        s, t[k + 1] = two_sum(t[k], s)
    t[0] = s


@numba.njit(cache=True, inline="always", error_model="numpy")
def _renormalise(t, m, z, i, n):
    """z[:, i] = the n-limb expansion nearest the exact sum of t[0:m] (t ordered by
    decreasing magnitude); t is overwritten."""
    _vec_sum(t, m)
    j = 0
    carry = t[0]
    for k in range(1, m):
        limb, error = two_sum(carry, t[k])
        if error != 0.0:
            z[j, i] = limb
            j += 1
            if j == n:
                return
            carry = error
        else:
            carry = limb
    z[j, i] = carry
    for k in range(j + 1, n):
        z[k, i] = 0.0


@numba.njit(cache=True, inline="always", error_model="numpy")
def _merge(x, i, y, iy, sign, t, n):
    """t[0:2n] = the limbs of x[:, i] and sign y[:, iy], merged by decreasing magnitude."""
    a = b = 0
    for k in range(2 * n):
        if b >= n or (a < n and abs(x[a, i]) >= abs(y[b, iy])):
            t[k] = x[a, i]
            a += 1
        else:
            t[k] = sign * y[b, iy]
            b += 1


@numba.njit(cache=True, inline="always", error_model="numpy")
def _products(x, i, y, iy, t, n):
    """The products x_a y_b with a + b <= n in t, diagonal by diagonal: diagonal k holds
    the high parts of its exact products (a + b = k < n) and the low parts of diagonal
    k - 1; diagonal n the rounded products and the low parts of diagonal n - 1. Returns
    the count of terms."""
    m = 0
    for k in range(n + 1):
        for a in range(k + 1):
            b = k - a
            if b >= n or a >= n:
                continue
            t[m] = x[a, i] * y[b, iy]  # TwoProd's high part below diagonal n
            m += 1
        if k > 0:
            for a in range(k):
                b = k - 1 - a
                t[m] = two_prod(x[a, i], y[b, iy])[1]
                m += 1
    return m


@numba.njit(cache=True, inline="always", error_model="numpy")
def _divide(x, i, y, iy, z, iz, n, t, r, q):
    """z[:, iz] = x[:, i] / y[:, iy] by long division: n + 1 quotient digits q_k =
    r_0 / y_0 of the remainder r <- r - q_k y, kept in n limbs."""
    for k in range(n):
        r[k, 0] = x[k, i]
    for digit in range(n + 1):
        qk = r[0, 0] / y[0, iy]
        q[digit] = qk
        if digit == n:
            break
        m = 0
        for k in range(n):
            t[m] = r[k, 0]
            p, e = two_prod(y[k, iy], qk)
            t[m + 1] = -p
            t[m + 2] = -e
            m += 3
        _sort(t, m)
        _renormalise(t, m, r, 0, n)
    for k in range(n + 1):
        t[k] = q[k]
    _renormalise(t, n + 1, z, iz, n)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _sort(t, m):
    """t[0:m] by decreasing magnitude (insertion sort: m is at most 3 n)."""
    for k in range(1, m):
        value = t[k]
        j = k - 1
        while j >= 0 and abs(t[j]) < abs(value):
            t[j + 1] = t[j]
            j -= 1
        t[j + 1] = value


@numba.njit(cache=True, error_model="numpy")
def add_at(x, i, y, j, sign, z, k, t, width):
    """z[:, k] = x[:, i] + sign y[:, j] (sign +1 or -1), the limbs merged and
    renormalised; t is scratch of at least n n + 3 n. z may be x or y."""
    n = len(width)
    if n == 2:
        z[0, k], z[1, k] = dw._add(x[0, i], x[1, i], sign * y[0, j], sign * y[1, j])
        return
    _merge(x, i, y, j, sign, t, n)
    _renormalise(t, 2 * n, z, k, n)


@numba.njit(cache=True, error_model="numpy")
def add_float_at(x, i, c, z, k, t, width):
    """z[:, k] = x[:, i] + c for a float64 c: c merged into the limbs, renormalised."""
    n = len(width)
    if n == 2:
        z[0, k], z[1, k] = dw._add(x[0, i], x[1, i], c, 0.0)
        return
    m = 0
    placed = False
    for a in range(n):
        if not placed and abs(c) >= abs(x[a, i]):
            t[m] = c
            m += 1
            placed = True
        t[m] = x[a, i]
        m += 1
    if not placed:
        t[m] = c
    _renormalise(t, n + 1, z, k, n)


@numba.njit(cache=True, error_model="numpy")
def mul_at(x, i, y, j, z, k, t, width):
    """z[:, k] = x[:, i] y[:, j]: the products by diagonals, renormalised."""
    n = len(width)
    if n == 2:
        z[0, k], z[1, k] = dw._mul(x[0, i], x[1, i], y[0, j], y[1, j])
        return
    m = _products(x, i, y, j, t, n)
    _vec_sum(t, m)  # the diagonals are ordered only roughly: one sweep more
    _renormalise(t, m, z, k, n)


@numba.njit(cache=True, error_model="numpy")
def mul_float_at(x, i, c, z, k, t, width):
    """z[:, k] = x[:, i] c for a float64 c: the n exact products x_a c (TwoProd) in the
    order of their levels, renormalised (no product is dropped)."""
    n = len(width)
    if n == 2:
        z[0, k], z[1, k] = dw._mul_float(x[0, i], x[1, i], c)
        return
    t[0], low = two_prod(x[0, i], c)
    for a in range(1, n):
        t[2 * a - 1], error = two_prod(x[a, i], c)
        t[2 * a] = low
        low = error
    t[2 * n - 1] = low
    _vec_sum(t, 2 * n)  # levels, not magnitudes: one sweep more
    _renormalise(t, 2 * n, z, k, n)


@numba.njit(cache=True, error_model="numpy")
def div_at(x, i, y, j, z, k, t, r, q, width):
    """z[:, k] = x[:, i] / y[:, j] by long division; r (n, 1) and q (n + 1) are scratch."""
    n = len(width)
    if n == 2:
        z[0, k], z[1, k] = dw._div(x[0, i], x[1, i], y[0, j], y[1, j])
        return
    _divide(x, i, y, j, z, k, n, t, r, q)


@numba.njit(cache=True, inline="always", error_model="numpy")
def set_float_at(z, k, value):
    """z[:, k] = the float64 value (inf and nan too): its leading limb, zeros after it."""
    z[:, k] = 0.0
    z[0, k] = value


@numba.njit(cache=True, error_model="numpy")
def scratch(n):
    """The scratch arrays of the column operations: t, r and q."""
    return np.empty(n * n + 3 * n + 1), np.empty((n, 1)), np.empty(n + 1)


@numba.njit(cache=True, inline="always", error_model="numpy")
def renormalised_sum(t, m, z, k, n):
    """z[:, k] = the n-limb sum of t[0:m] (ordered by decreasing magnitude up to a factor
    2^53 between neighbours, as levels are): one VecSum sweep more, then renormalised; t
    is overwritten."""
    _vec_sum(t, m)
    _renormalise(t, m, z, k, n)
