"""Floating-point expansions of n float64 limbs, x = x_0 + x_1 + ... + x_{n-1}, normalised
so that each limb is at most an ulp of the one before: about 53 n bits, 32, 48 and 64
decimal digits at n = 2, 3 and 4 (docs/rounding.md section 6). The column operations
here (`add_at`, `add_float_at`, `mul_at`, `mul_float_at`, `div_at`: one number, a column
of a limb array (n, size), from others) are what the array kernels (`kernels`) and the
elementary functions (`elementary`) are written in; the limb count reaches them as the
length of a tuple (`WIDTHS`).

Two limbs use the double-word algorithms with proven bounds (`double_word`); three and
four the branch-free accumulation networks of `networks`. A float64 operand c enters as
the expansion (c, 0, ...). Division is Hida, Li and Bailey's long division: n + 1
quotient digits, each the float64 quotient of the remainder by y_0, the remainder
updated in n-limb arithmetic.

`renormalised_sum` turns a list of terms of any count into n limbs (Joldes, Marty, Muller
and Popescu's VecSum followed by VecSumErrBranch, "Arithmetic algorithms for extended
precision using floating-point expansions", IEEE Trans. Computers 65(4), 2016): a TwoSum
sweep from the smallest term up leaves the terms' exact sum as a float64 sum and its
rounding errors; a second sweep down keeps a limb each time the running carry is
non-zero, and stops after n limbs, losing only the tail below the last limb kept.

The errors measured against exact rationals are in docs/rounding.md section 6
(tests/solvers/backends/multifloat/test_expansions.py). Valid for finite operands whose
results stay in float64's normal range (a limb below 2^-1022 loses digits).
"""

from __future__ import annotations

import numba
import numpy as np

from solvers.backends.multifloat import double_word as dw
from solvers.backends.multifloat import networks as nw
from solvers.backends.multifloat.double_word import two_sum

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
def set_float_at(z, k, value):
    """z[:, k] = the float64 value (inf and nan too): its leading limb, zeros after it."""
    z[:, k] = 0.0
    z[0, k] = value


@numba.njit(cache=True, error_model="numpy")
def add_at(x, i, y, j, sign, z, k, width):
    """z[:, k] = x[:, i] + sign y[:, j] (sign +1 or -1). z may be x or y."""
    n = len(width)
    if n == 2:
        z[0, k], z[1, k] = dw._add(x[0, i], x[1, i], sign * y[0, j], sign * y[1, j])
    elif n == 3:
        z[0, k], z[1, k], z[2, k] = nw.add3(
            x[0, i], x[1, i], x[2, i], sign * y[0, j], sign * y[1, j], sign * y[2, j]
        )
    else:
        z[0, k], z[1, k], z[2, k], z[3, k] = nw.add4(
            x[0, i], x[1, i], x[2, i], x[3, i],
            sign * y[0, j], sign * y[1, j], sign * y[2, j], sign * y[3, j],
        )  # fmt: skip


@numba.njit(cache=True, error_model="numpy")
def add_float_at(x, i, c, z, k, width):
    """z[:, k] = x[:, i] + c for a float64 c (the expansion c, 0, ...)."""
    n = len(width)
    if n == 2:
        z[0, k], z[1, k] = dw._add(x[0, i], x[1, i], c, 0.0)
    elif n == 3:
        z[0, k], z[1, k], z[2, k] = nw.add3(x[0, i], x[1, i], x[2, i], c, 0.0, 0.0)
    else:
        z[0, k], z[1, k], z[2, k], z[3, k] = nw.add4(
            x[0, i], x[1, i], x[2, i], x[3, i], c, 0.0, 0.0, 0.0
        )


@numba.njit(cache=True, error_model="numpy")
def mul_at(x, i, y, j, z, k, width):
    """z[:, k] = x[:, i] y[:, j]. z may be x or y."""
    n = len(width)
    if n == 2:
        z[0, k], z[1, k] = dw._mul(x[0, i], x[1, i], y[0, j], y[1, j])
    elif n == 3:
        z[0, k], z[1, k], z[2, k] = nw.mul3(x[0, i], x[1, i], x[2, i], y[0, j], y[1, j], y[2, j])
    else:
        z[0, k], z[1, k], z[2, k], z[3, k] = nw.mul4(
            x[0, i], x[1, i], x[2, i], x[3, i], y[0, j], y[1, j], y[2, j], y[3, j]
        )


@numba.njit(cache=True, error_model="numpy")
def mul_float_at(x, i, c, z, k, width):
    """z[:, k] = x[:, i] c for a float64 c (DWTimesFP3 at two limbs, the expansion c, 0, ...
    at three and four)."""
    n = len(width)
    if n == 2:
        z[0, k], z[1, k] = dw._mul_float(x[0, i], x[1, i], c)
    elif n == 3:
        z[0, k], z[1, k], z[2, k] = nw.mul3(x[0, i], x[1, i], x[2, i], c, 0.0, 0.0)
    else:
        z[0, k], z[1, k], z[2, k], z[3, k] = nw.mul4(
            x[0, i], x[1, i], x[2, i], x[3, i], c, 0.0, 0.0, 0.0
        )


@numba.njit(cache=True, error_model="numpy")
def div_at(x, i, y, j, z, k, w, width):
    """z[:, k] = x[:, i] / y[:, j] by long division (Hida, Li and Bailey's): n + 1
    quotient digits q = r_0 / y_0 of the remainder r <- r - q y, kept in n limbs, and
    their sum; w (n, 3) is scratch (`scratch`). z may be x or y."""
    n = len(width)
    if n == 2:
        z[0, k], z[1, k] = dw._div(x[0, i], x[1, i], y[0, j], y[1, j])
        return
    w[:, 0] = x[:, i]  # the remainder; w[:, 1] the product, w[:, 2] the quotient
    for digit in range(n + 1):
        q = w[0, 0] / y[0, j]
        if digit == 0:
            set_float_at(w, 2, q)
        else:
            add_float_at(w, 2, q, w, 2, width)
        if digit < n:
            mul_float_at(y, j, q, w, 1, width)
            add_at(w, 0, w, 1, -1.0, w, 0, width)
    z[:, k] = w[:, 2]


@numba.njit(cache=True, error_model="numpy")
def sqrt_at(x, i, z, k, w, d, width):
    """z[:, k] = sqrt(x[:, i]) (nan below 0, 0 at 0 and inf at inf, as float64): at two
    limbs Karp and Markstein's step (`double_word._sqrt`), at three and four two Newton
    steps s + (x - s^2) / (2 s) from the float64 square root in n-limb arithmetic; w
    (n, 3) and d (`scratch`) are scratch. z may be x."""
    n = len(width)
    if n == 2:
        if np.isfinite(x[0, i]):
            z[0, k], z[1, k] = dw._sqrt(x[0, i], x[1, i])
        else:
            z[0, k], z[1, k] = np.sqrt(x[0, i]), 0.0
        return
    if not (x[0, i] > 0.0 and np.isfinite(x[0, i])):
        set_float_at(z, k, np.sqrt(x[0, i]))
        return
    w[:, 0] = 0.0  # s, s^2 and then the correction, 2 s
    w[0, 0] = np.sqrt(x[0, i])
    for _ in range(2):
        mul_at(w, 0, w, 0, w, 1, width)
        add_at(x, i, w, 1, -1.0, w, 1, width)  # x - s^2
        mul_float_at(w, 0, 2.0, w, 2, width)
        div_at(w, 1, w, 2, w, 1, d, width)  # (x - s^2) / (2 s)
        add_at(w, 0, w, 1, 1.0, w, 0, width)
    z[:, k] = w[:, 0]


@numba.njit(cache=True, error_model="numpy")
def scratch(n):
    """The scratch column of the division (`div_at`)."""
    return np.empty((n, 3))


@numba.njit(cache=True, inline="always", error_model="numpy")
def renormalised_sum(t, m, z, k, n):
    """z[:, k] = the n-limb sum of t[0:m] (ordered by decreasing magnitude up to a factor
    2^53 between neighbours, as levels are): one VecSum sweep more, then renormalised; t
    is overwritten."""
    _vec_sum(t, m)
    _renormalise(t, m, z, k, n)
