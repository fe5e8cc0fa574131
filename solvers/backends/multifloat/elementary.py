"""Compiled elementary functions of limb arrays (n, size) in n-limb column arithmetic
(`expansions.add_at` and its siblings), each phase over all elements in turn so that the
series vectorise, from tables that `functions` builds once per limb count
(docs/rounding.md section 6):

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
POWER_LOW, POWER_HIGH = -1000, 1023
"""The range of q whose 2^q `POWERS_OF_TWO` holds (normal numbers)."""
POWERS_OF_TWO = np.ldexp(1.0, np.arange(POWER_LOW, POWER_HIGH + 1))
"""2^q for POWER_LOW <= q <= POWER_HIGH, exact."""
ERFC_ZERO = 27.3
"""erfc(z) underflows float64 above this (erfc(27.3) < 2^-1075)."""


@numba.njit(cache=True, inline="always", error_model="numpy")
def _exp_edge(head, minus_one):
    """exp's (or expm1's) float64 value outside (EXP_LOW, EXP_HIGH), or nan."""
    if head >= EXP_HIGH:
        return np.inf
    if head <= EXP_LOW:
        return -1.0 if minus_one else 0.0
    return np.nan


@numba.njit(cache=True, inline="always", error_model="numpy")
def _scaled_magnitude(x, i, factor, w, k):
    """w[:, k] = factor |x[:, i]| (exact for a power-of-two factor)."""
    sign = -factor if x[0, i] < 0 else factor
    for limb in range(x.shape[0]):
        w[limb, k] = sign * x[limb, i]


@numba.njit(cache=True, inline="always", error_model="numpy")
def _scale_by_power_of_two(z, i, q):
    """z[:, i] *= 2^q by exact products with 2^q from a table (a normal number); for q
    outside the table (below POWER_LOW a subnormal result, at 1024 the top of the range,
    2^1024 itself overflowing) each limb is scaled by ldexp itself."""
    if POWER_LOW <= q <= POWER_HIGH:
        factor = POWERS_OF_TWO[q - POWER_LOW]
        for limb in range(z.shape[0]):
            z[limb, i] *= factor
    else:
        for limb in range(z.shape[0]):
            z[limb, i] = math.ldexp(z[limb, i], q)


@numba.njit(cache=True, error_model="numpy")
def exp(x, z, width, minus_one, c0, rest, inverse, table):
    """z = e^x (or e^x - 1) elementwise over limb arrays (n, size), z not x: the reduction
    and series of the module's docstring, each phase over all elements in turn, so that
    the series' loop, the same operations on every element, vectorises."""
    n, size = len(width), z.shape[1]
    steps = table.shape[1] - 1  # 2^m
    r = np.empty((n, size))
    quotients = np.empty(size)
    rows = np.empty(size, dtype=np.int64)
    for i in range(size):
        head = x[0, i]
        count = np.rint(head / c0) if head > EXP_LOW and head < EXP_HIGH else 0.0
        quotient = np.rint(count / steps)
        quotients[i] = quotient
        rows[i] = int(count - quotient * steps) + steps // 2
        add_float_at(x, i, -count * c0, r, i, width)
        mul_float_at(rest, 0, count, z, i, width)
        add_at(r, i, z, i, -1.0, r, i, width)
    terms = inverse.shape[1] - 1
    for i in range(size):
        z[:, i] = inverse[:, terms]
    for term in range(terms - 1, 1, -1):
        for i in range(size):
            mul_at(z, i, r, i, z, i, width)
            add_at(z, i, inverse, term, 1.0, z, i, width)
    for i in range(size):
        mul_at(z, i, r, i, z, i, width)
        mul_at(z, i, r, i, z, i, width)
        add_at(z, i, r, i, 1.0, z, i, width)  # p = e^r - 1 = r + r^2 (1/2 + r (1/6 + ...))
    for i in range(size):
        head, j = x[0, i], rows[i]
        if not (head > EXP_LOW and head < EXP_HIGH):
            set_float_at(z, i, _exp_edge(head, minus_one))
            continue
        mul_at(table, j, z, i, r, i, width)
        add_at(r, i, z, i, 1.0, r, i, width)
        add_at(r, i, table, j, 1.0, z, i, width)  # s = d_j + p + d_j p
        if minus_one and quotients[i] == 0.0:
            continue
        add_float_at(z, i, 1.0, z, i, width)
        _scale_by_power_of_two(z, i, int(quotients[i]))
        if minus_one:
            add_float_at(z, i, -1.0, z, i, width)


@numba.njit(cache=True, error_model="numpy")
def erfc(x, z, width, coefficients, degrees, depth, root_pi, c0, rest, inverse, table):
    """z = erfc(x) elementwise over limb arrays (n, size); coefficients (n, points, K + 1)
    of the Taylor series about each grid point (zero beyond its degree), with its degree;
    depth the continued fraction's; root_pi sqrt(pi) as limbs (n, 1). The Taylor series
    runs phase by phase over all elements below ERFC_EDGE, to the largest degree among
    them (the higher terms of the others are zero), so that it vectorises; the continued
    fraction, for the rare |x| >= ERFC_EDGE, one element at a time."""
    n, size = len(width), z.shape[1]
    columns = coefficients.shape[2]
    series = coefficients.reshape(n, -1)  # point p's term k at p columns + k
    h = np.zeros((n, size))  # z - z_0 below ERFC_EDGE, 0 elsewhere
    points = np.zeros(size, dtype=np.int64)
    top, far = 0, 0
    for i in range(size):
        magnitude = abs(x[0, i])
        if magnitude < ERFC_EDGE:
            point = int(np.rint(magnitude * ERFC_GRID))
            points[i] = point
            top = max(top, degrees[point])
            _scaled_magnitude(x, i, 1.0, h, i)
            add_float_at(h, i, -point / ERFC_GRID, h, i, width)  # exact
        elif magnitude < ERFC_ZERO:
            far += 1
    for i in range(size):
        z[:, i] = series[:, points[i] * columns + top]
    for k in range(top - 1, -1, -1):
        for i in range(size):
            mul_at(z, i, h, i, z, i, width)
            add_at(z, i, series, points[i] * columns + k, 1.0, z, i, width)
    if far > 0:
        _erfc_far(x, z, far, width, depth, root_pi, c0, rest, inverse, table)
    for i in range(size):
        head = x[0, i]
        if np.isnan(head):
            set_float_at(z, i, np.nan)
        elif abs(head) >= ERFC_ZERO:
            set_float_at(z, i, 0.0)
        if head < 0:
            for limb in range(n):
                z[limb, i] = -z[limb, i]
            add_float_at(z, i, 2.0, z, i, width)


@numba.njit(cache=True, error_model="numpy")
def gelu(x, z, width, factor, coefficients, degrees, depth, root_pi, c0, rest, inverse, table):
    """z = x (erfc(x f) / 2) elementwise with f = -1 / sqrt 2 as limbs (n, 1) (`factor`):
    the GELU x Phi(x) in the operations of the elementwise form, one call; erfc's
    arguments as `erfc`'s. Non-finite x: inf at inf, nan at -inf and nan (0 inf), as
    float64 gives them."""
    n, size = len(width), z.shape[1]
    y = np.empty((n, size))
    for i in range(size):
        mul_at(x, i, factor, 0, y, i, width)
    erfc(y, z, width, coefficients, degrees, depth, root_pi, c0, rest, inverse, table)
    for i in range(size):
        head = x[0, i]
        mul_float_at(z, i, 0.5, z, i, width)
        mul_at(x, i, z, i, z, i, width)
        if not np.isfinite(head):
            set_float_at(z, i, np.inf if head > 0 else np.nan)


@numba.njit(cache=True, error_model="numpy")
def _erfc_far(x, z, far, width, depth, root_pi, c0, rest, inverse, table):
    """z[:, i] = erfc(|x_i|) = e^(-x^2) / (sqrt(pi) F) for the `far` elements with
    ERFC_EDGE <= |x_i| < ERFC_ZERO, F Laplace's continued fraction z + (1/2) / (z + (2/2) /
    (z + ...)) of the given depth; e^(-x^2) by `exp` over those elements together."""
    n, size = len(width), z.shape[1]
    d = scratch(n)
    w = np.empty((n, 2))
    index = np.empty(far, dtype=np.int64)
    squares = np.empty((n, far))  # -x^2
    fractions = np.empty((n, far))
    m = 0
    for i in range(size):
        magnitude = abs(x[0, i])
        if not (magnitude >= ERFC_EDGE and magnitude < ERFC_ZERO):
            continue
        index[m] = i
        _scaled_magnitude(x, i, 1.0, w, 0)
        w[:, 1] = w[:, 0]
        for k in range(depth, 0, -1):
            set_float_at(fractions, m, k / 2.0)
            div_at(fractions, m, w, 1, w, 1, d, width)
            add_at(w, 1, w, 0, 1.0, w, 1, width)
        mul_at(w, 1, root_pi, 0, fractions, m, width)
        mul_at(w, 0, w, 0, squares, m, width)
        for limb in range(n):
            squares[limb, m] = -squares[limb, m]
        m += 1
    e = np.empty((n, far))
    exp(squares, e, width, False, c0, rest, inverse, table)
    for m in range(far):
        div_at(e, m, fractions, m, z, index[m], d, width)


@numba.njit(cache=True, error_model="numpy")
def logistic(x, z, width, c0, rest, inverse, table):
    """z = 1 / (1 + e^-x) elementwise, as e^x / (1 + e^x) for x < 0 (no overflow): e^-|x|
    by `exp` over all elements, then the quotients."""
    n, size = len(width), z.shape[1]
    d = scratch(n)
    w = np.empty((n, size))
    for i in range(size):
        _scaled_magnitude(x, i, -1.0, w, i)
    e = np.empty((n, size))
    exp(w, e, width, False, c0, rest, inverse, table)
    for i in range(size):
        head = x[0, i]
        if np.isnan(head):
            set_float_at(z, i, np.nan)
            continue
        add_float_at(e, i, 1.0, w, i, width)  # 1 + e^-|x|
        if head >= 0:
            set_float_at(e, i, 1.0)
        div_at(e, i, w, i, z, i, d, width)


@numba.njit(cache=True, error_model="numpy")
def tanh(x, z, width, c0, rest, inverse, table):
    """z = tanh(x) = -e / (2 + e) with e = expm1(-2 |x|) (by `exp` over all elements),
    with x's sign."""
    n, size = len(width), z.shape[1]
    d = scratch(n)
    w = np.empty((n, size))
    for i in range(size):
        _scaled_magnitude(x, i, -2.0, w, i)
    e = np.empty((n, size))
    exp(w, e, width, True, c0, rest, inverse, table)
    for i in range(size):
        head = x[0, i]
        if np.isnan(head):
            set_float_at(z, i, np.nan)
            continue
        add_float_at(e, i, 2.0, w, i, width)
        div_at(e, i, w, i, z, i, d, width)
        if head > 0:
            for limb in range(n):
                z[limb, i] = -z[limb, i]
