"""Compiled elementary functions of limb arrays (n, size), one element at a time in n-limb
column arithmetic (`expansions.add_at` and its siblings), from tables that `functions`
builds once per limb count (docs/rounding.md section 6):

- `exp` and `expm1`: x = N ln 2 / 2^m + r with N = rint(x_0 2^m / ln 2), m = TABLE_BITS;
  r = (x - N c_0) - N c_rest, where c_0 holds ln 2 / 2^m's leading CHUNK_BITS bits (so
  N c_0 is exact for |N| < 2^(53 - CHUNK_BITS)) and c_rest the rest in n limbs;
  p = e^r - 1 by Taylor's series (Horner), |r| <= ln 2 / 2^(m+1); N = 2^m q + j with
  |j| <= 2^(m-1), and e^x = 2^q (1 + s), s = d_j + p + d_j p with d_j = 2^(j / 2^m) - 1
  from the table. expm1 is s itself where q = 0 (|x| below about ln(2) / 2): both terms
  of s are relatively accurate, so e^x - 1 is, near 0 too.
- `erfc`: for 0 <= z < ERFC_EDGE the Taylor series of erfc about the nearest grid point
  z_0 = j / ERFC_GRID (coefficients and each point's degree from the table), for
  z >= ERFC_EDGE e^(-z^2) erfcx(z) with erfcx from Laplace's continued fraction; below 0,
  2 - erfc(-z). Neither side cancels (the GELU's Phi(x) = erfc(-x / sqrt 2) / 2).
- `logistic`: 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below; `tanh`: -e / (2 + e) with
  e = expm1(-2 |x|) and x's sign.

Edges as float64 gives them: exp is 0 for x_0 <= -745.2, inf for x_0 >= 709.78; expm1 -1
and inf; erfc 2 and 0 at -inf and inf; nan for nan. Results in float64's subnormal range
lose their low limbs' digits.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from solvers.backends.multifloat.expansions import (
    add_at,
    add_float_at,
    div_at,
    mul_at,
    mul_float_at,
    scratch,
    set_float_at,
)

TABLE_BITS = 10
"""m: e^x's table holds 2^(j / 2^m) - 1 for |j| <= 2^(m - 1), so |r| <= ln 2 / 2^(m + 1)."""
CHUNK_BITS = 32
"""c_0's bits: |N| <= 745.2 2^m / ln 2 < 2^21 keeps N c_0 exact."""
EXP_LOW, EXP_HIGH = -745.2, 709.78
"""exp is 0 at or below EXP_LOW and inf at or above EXP_HIGH (float64's range)."""
ERFC_EDGE = 8.0
"""erfc's Taylor tables cover [0, ERFC_EDGE); the continued fraction is used above."""
ERFC_GRID = 32
"""Grid points per unit of z: |z - z_0| <= 1 / 64."""
ERFC_ZERO = 27.3
"""erfc(z) underflows float64 above this (erfc(27.3) < 2^-1075)."""


@numba.njit(cache=True, inline="always", error_model="numpy")
def _exp_at(x, i, w, k, minus_one, c0, rest, inverse, table, width):
    """w[:, k] = e^(x[:, i]) (or e^x - 1 if minus_one) for x_0 inside (EXP_LOW, EXP_HIGH);
    w[:, k + 1] and w[:, k + 2] are scratch. The reduction and series of the module's
    docstring."""
    n = len(width)
    steps = table.shape[1] - 1  # 2^m
    count = np.rint(x[0, i] / c0)
    quotient = np.rint(count / steps)
    j = int(count - quotient * steps) + steps // 2
    r, p, s = k + 1, k + 2, k
    add_float_at(x, i, -count * c0, w, r, width)
    mul_float_at(rest, 0, count, w, p, width)
    add_at(w, r, w, p, -1.0, w, r, width)
    terms = inverse.shape[1] - 1
    w[:, p] = inverse[:, terms]
    for term in range(terms - 1, 1, -1):
        mul_at(w, p, w, r, w, p, width)
        add_at(w, p, inverse, term, 1.0, w, p, width)
    mul_at(w, p, w, r, w, p, width)
    mul_at(w, p, w, r, w, p, width)
    add_at(w, p, w, r, 1.0, w, p, width)  # p = e^r - 1 = r + r^2 (1/2 + r (1/6 + ...))
    mul_at(table, j, w, p, w, s, width)
    add_at(w, s, w, p, 1.0, w, s, width)
    add_at(w, s, table, j, 1.0, w, s, width)  # s = d_j + p + d_j p
    if minus_one and quotient == 0.0:
        return
    add_float_at(w, s, 1.0, w, s, width)
    for limb in range(n):
        w[limb, s] = math.ldexp(w[limb, s], int(quotient))
    if minus_one:
        add_float_at(w, s, -1.0, w, s, width)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _exp_edge(head, minus_one):
    """exp's (or expm1's) float64 value outside (EXP_LOW, EXP_HIGH), or nan."""
    if head >= EXP_HIGH:
        return np.inf
    if head <= EXP_LOW:
        return -1.0 if minus_one else 0.0
    return np.nan


@numba.njit(cache=True, error_model="numpy")
def exp(x, z, width, minus_one, c0, rest, inverse, table):
    """z = e^x (or e^x - 1) elementwise over limb arrays (n, size)."""
    n, size = len(width), z.shape[1]
    w = np.empty((n, 3))
    for i in range(size):
        head = x[0, i]
        if head > EXP_LOW and head < EXP_HIGH:
            _exp_at(x, i, w, 0, minus_one, c0, rest, inverse, table, width)
            z[:, i] = w[:, 0]
        else:
            set_float_at(z, i, _exp_edge(head, minus_one))


@numba.njit(cache=True, error_model="numpy")
def erfc(x, z, width, coefficients, degrees, depth, root_pi, c0, rest, inverse, table):
    """z = erfc(x) elementwise over limb arrays (n, size); coefficients (n, points, K + 1)
    of the Taylor series about each grid point, with its degree; depth the continued
    fraction's; root_pi sqrt(pi) as limbs (n, 1)."""
    n, size = len(width), z.shape[1]
    d = scratch(n)
    w = np.empty((n, 6))
    for i in range(size):
        head = x[0, i]
        if np.isnan(head):
            set_float_at(z, i, np.nan)
            continue
        sign = -1.0 if head < 0 else 1.0
        w[:, 0] = sign * x[:, i]  # |x|
        magnitude = w[0, 0]
        if magnitude >= ERFC_ZERO:
            w[:, 1] = 0.0
        elif magnitude < ERFC_EDGE:
            point = int(np.rint(magnitude * ERFC_GRID))
            add_float_at(w, 0, -point / ERFC_GRID, w, 0, width)  # h = z - z_0, exact
            degree = degrees[point]
            w[:, 1] = coefficients[:, point, degree]
            for k in range(degree - 1, -1, -1):
                mul_at(w, 1, w, 0, w, 1, width)
                add_at(w, 1, coefficients[:, point, :], k, 1.0, w, 1, width)
        else:
            w[:, 1] = w[:, 0]  # the fraction z + (1/2) / (z + (2/2) / (z + ...))
            for k in range(depth, 0, -1):
                set_float_at(w, 2, k / 2.0)
                div_at(w, 2, w, 1, w, 1, d, width)
                add_at(w, 1, w, 0, 1.0, w, 1, width)
            mul_at(w, 1, root_pi, 0, w, 1, width)
            mul_at(w, 0, w, 0, w, 2, width)
            w[:, 2] = -w[:, 2]  # -z^2
            if w[0, 2] > EXP_LOW:
                _exp_at(w, 2, w, 3, False, c0, rest, inverse, table, width)
            else:
                w[:, 3] = 0.0
            div_at(w, 3, w, 1, w, 1, d, width)
        if sign < 0:
            w[:, 1] = -w[:, 1]
            add_float_at(w, 1, 2.0, w, 1, width)
        z[:, i] = w[:, 1]


@numba.njit(cache=True, error_model="numpy")
def logistic(x, z, width, c0, rest, inverse, table):
    """z = 1 / (1 + e^-x) elementwise, as e^x / (1 + e^x) for x < 0 (no overflow)."""
    n, size = len(width), z.shape[1]
    d = scratch(n)
    w = np.empty((n, 5))
    for i in range(size):
        head = x[0, i]
        if np.isnan(head):
            set_float_at(z, i, np.nan)
            continue
        sign = -1.0 if head < 0 else 1.0
        w[:, 0] = -sign * x[:, i]  # -|x|
        if w[0, 0] > EXP_LOW:
            _exp_at(w, 0, w, 1, False, c0, rest, inverse, table, width)
        else:
            w[:, 1] = 0.0
        add_float_at(w, 1, 1.0, w, 4, width)  # 1 + e^-|x|
        if sign > 0:
            set_float_at(w, 1, 1.0)
        div_at(w, 1, w, 4, w, 1, d, width)
        z[:, i] = w[:, 1]


@numba.njit(cache=True, error_model="numpy")
def tanh(x, z, width, c0, rest, inverse, table):
    """z = tanh(x) = -e / (2 + e) with e = expm1(-2 |x|), with x's sign."""
    n, size = len(width), z.shape[1]
    d = scratch(n)
    w = np.empty((n, 5))
    for i in range(size):
        head = x[0, i]
        if np.isnan(head):
            set_float_at(z, i, np.nan)
            continue
        sign = -1.0 if head < 0 else 1.0
        w[:, 0] = (-2.0 * sign) * x[:, i]  # -2 |x|, exact
        if w[0, 0] > EXP_LOW:
            _exp_at(w, 0, w, 1, True, c0, rest, inverse, table, width)
        else:
            set_float_at(w, 1, -1.0)
        add_float_at(w, 1, 2.0, w, 4, width)
        div_at(w, 1, w, 4, w, 1, d, width)
        z[:, i] = (-sign) * w[:, 1]
