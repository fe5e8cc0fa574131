"""Elementary functions of multi-float arrays (docs/rounding.md section 6), evaluated in
their own n-limb arithmetic over whole arrays, each from an argument reduction that is
exact and a series whose truncation is below u^n = 2^(-53 n):

- `exp`: x = k ln 2 + r, k = rint(x_0 / ln 2), r = x - k ln 2 with ln 2 in chunks of 40
  bits (each k c_j exact); r / 2^S, S = 8; p = e^(r / 2^S) - 1 by Taylor; p <- p (p + 2)
  S times (squaring e^r - 1 keeps its relative accuracy); exp = (1 + p) 2^k. `expm1` is p
  itself where k = 0, so it is relatively accurate near 0.
- `log`: x = m 2^e, m in [1/sqrt 2, sqrt 2), ln m = 2 atanh((m - 1) / (m + 1)) by its
  series (m - 1 exact, so relatively accurate at 1 too), plus e ln 2.
- `erfc` for z >= 0: exp(-z^2) erfcx(z), where erfcx = exp(z^2) erfc solves
  y' = 2 z y - 2 / sqrt(pi): below z = 8 its Taylor series about the nearest multiple z_0
  of 1/4, from erfcx(z_0) (mpmath, at import) by the recurrence
  (k + 1) a_(k+1) = 2 z_0 a_k + 2 a_(k-1) - (2 / sqrt(pi)) [k = 0]; above, Laplace's
  continued fraction. No cancellation on either side: GELU's Phi(x) is 1 - erfc / 2
  for x >= 0 and erfc / 2 below. exp(-z^2) inherits z^2's rounding, a relative error of
  about z^2 u^n (as every erfc in a fixed precision does).
- `tanh` as -e / (2 + e), e = expm1(-2 |x|), with x's sign; the logistic function as
  1 / (1 + e^-x) for x >= 0 and e^x / (1 + e^x) below, so neither overflows.
- `sin` and `cos`: x = k pi / 2 + r with pi / 2 in chunks of 32 bits (k exact below
  2^21: |x| up to about 3e6), Taylor series of both on |r| <= pi / 4, the quadrant from
  k mod 4.

Measured accuracies: tests/solvers/backends/multifloat/test_functions.py against mpmath
at twice the digits.
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np

from solvers.backends.multifloat.array import MultiFloatArray

EXP_HALVINGS = 8
"""S: the reduced argument r is divided by 2^S before its series (|r| 2^-S <= 1.4e-3)."""
EXP_EDGES = (-745.2, 709.78)
"""exp is 0 below the first leading limb and inf above the second (float64's range)."""
ERFC_FRACTION_EDGE = 8.0
"""erfc comes from erfcx's Taylor series on the grid below this z, from the continued
fraction above."""
ERFC_GRID = 4
"""Grid points per unit of z: |z - z_0| <= 1 / 8."""
TRIG_CHUNK_BITS = 32
TRIG_LIMIT = 2.0**21
"""|k| below this keeps k c_j exact for 32-bit chunks c_j of pi / 2."""


def unit(n: int) -> float:
    """u^n = 2^(-53 n)."""
    return 2.0 ** (-53 * n)


NUMBERS = {
    "ln2": lambda: +mpmath.ln2,
    "pi": lambda: +mpmath.pi,
    "pi/2": lambda: mpmath.pi / 2,
    "sqrt(pi)": lambda: mpmath.sqrt(mpmath.pi),
    "2/sqrt(pi)": lambda: 2 / mpmath.sqrt(mpmath.pi),
    "1/sqrt(2)": lambda: 1 / mpmath.sqrt(2),
    "sqrt(2/pi)": lambda: mpmath.sqrt(2 / mpmath.pi),
}
"""The constants the functions use, by name, evaluated by mpmath at the working precision."""


def limbs_of_value(value: mpmath.mpf, n: int) -> np.ndarray:
    """The n limbs nearest an mpmath number (the working precision must hold it), (n,)
    float64: each limb the float64 nearest what the ones before leave."""
    limbs = []
    for _ in range(n):
        limb = float(value)
        limbs.append(limb)
        value -= limb
    return np.array(limbs)


@functools.cache
def _named(name: str, n: int) -> np.ndarray:
    with mpmath.workprec(53 * n + 200):
        return limbs_of_value(NUMBERS[name](), n)


@functools.cache
def _chunks(name: str, bits: int, count: int) -> tuple[float, ...]:
    """The constant `name` as `count` float64 numbers of `bits` significant bits each,
    summing to it within 2^(-bits count) relatively: k c_j is exact for |k| < 2^(53 -
    bits)."""
    with mpmath.workprec(bits * count + 100):
        rest = NUMBERS[name]()
        chunks = []
        for _ in range(count):
            exponent = int(mpmath.floor(mpmath.log(abs(rest), 2))) + 1 - bits
            chunk = mpmath.nint(rest / mpmath.ldexp(1, exponent)) * mpmath.ldexp(1, exponent)
            chunks.append(float(chunk))
            rest -= chunk
    return tuple(chunks)


def constant(name: str, n: int) -> MultiFloatArray:
    """A 0-d multi-float of the constant `name` (NUMBERS)."""
    return MultiFloatArray(_named(name, n).copy())


def _scaled(x: MultiFloatArray, exponents: np.ndarray | int) -> MultiFloatArray:
    """x 2^e elementwise, exact while no limb leaves float64's normal range."""
    return MultiFloatArray(np.ldexp(x.limbs, exponents))


@functools.cache
def taylor_terms(radius: float, n: int) -> int:
    """The least k with radius^(k+1) / (k+1)! below u^n / 4: the terms a Taylor series of
    exp, sin or cos needs for |r| <= radius (the first term dropped bounds the rest)."""
    k = 1
    while radius ** (k + 1) / math.factorial(k + 1) >= unit(n) / 4:
        k += 1
    return k


@functools.cache
def _reciprocal_factorials(n: int, count: int) -> tuple[MultiFloatArray, ...]:
    """1 / j! for j = 0 .. count as 0-d multi-floats."""
    with mpmath.workprec(53 * n + 100):
        values = [limbs_of_value(1 / mpmath.factorial(j), n) for j in range(count + 1)]
    return tuple(MultiFloatArray(v) for v in values)


def _exp_parts(x: MultiFloatArray) -> tuple[MultiFloatArray, np.ndarray]:
    """(p, k) with e^x = (1 + p) 2^k, |p| <= 0.42: the reduction and the series of `exp`.
    Arguments outside EXP_EDGES (and nan) are replaced by 0 here; `exp` restores them."""
    n = x.limb_count
    head = x.limbs[0]
    inside = (head > EXP_EDGES[0]) & (head < EXP_EDGES[1])
    x = MultiFloatArray(np.where(inside, x.limbs, 0.0))
    k = np.rint(x.limbs[0] / math.log(2))
    r = x
    for chunk in _chunks("ln2", 40, n + 2):
        r = r - k * chunk
    r = _scaled(r, -EXP_HALVINGS)
    terms = taylor_terms(math.log(2) / 2 ** (EXP_HALVINGS + 1), n)
    inverse = _reciprocal_factorials(n, terms)
    p = inverse[terms] * r
    for j in range(terms - 1, 0, -1):
        p = (p + inverse[j]) * r
    for _ in range(EXP_HALVINGS):
        p = p * (p + 2.0)
    return p, k


def exp(x: MultiFloatArray) -> MultiFloatArray:
    """e^x elementwise: 0 below -745.2, inf above 709.78, nan for nan."""
    return _exp_from_parts(x, *_exp_parts(x))


def _exp_from_parts(x: MultiFloatArray, p: MultiFloatArray, k: np.ndarray) -> MultiFloatArray:
    """(1 + p) 2^k, with the edges of `exp` restored from x."""
    result = _scaled(p + 1.0, k.astype(np.int64)).limbs
    head = x.limbs[0]
    result[0] = np.where(head >= EXP_EDGES[1], np.inf, result[0])
    result[:, (head <= EXP_EDGES[0]) | ~np.isfinite(head)] = 0.0
    result[0] = np.where(np.isnan(head) | (head == np.inf), head, result[0])
    return MultiFloatArray(result)


def expm1(x: MultiFloatArray) -> MultiFloatArray:
    """e^x - 1 elementwise, relatively accurate near 0 (|x| <= ln(2) / 2: the series' p)."""
    p, k = _exp_parts(x)
    far = _exp_from_parts(x, p, k) - 1.0
    near = (k == 0) & (np.abs(x.limbs[0]) < 1.0)  # k = 0 also where _exp_parts replaced x
    return MultiFloatArray(np.where(near, p.limbs, far.limbs))


@functools.cache
def _log_series(n: int) -> tuple[MultiFloatArray, ...]:
    """1 / (2 j + 1) for the terms of atanh's series on |s| <= LOG_REACH within u^n / 4."""
    count = 0
    while LOG_REACH ** (2 * count + 2) / (2 * count + 3) >= unit(n) / 4:
        count += 1
    with mpmath.workprec(53 * n + 100):
        return tuple(
            MultiFloatArray(limbs_of_value(1 / mpmath.mpf(2 * j + 1), n)) for j in range(count + 1)
        )


LOG_REACH = (math.sqrt(2) - 1) / (math.sqrt(2) + 1)
"""|s| = |m - 1| / (m + 1) for m in [1 / sqrt 2, sqrt 2]: 0.172."""


def log(x: MultiFloatArray) -> MultiFloatArray:
    """ln x elementwise for x > 0: x = m 2^e with m in [1/sqrt 2, sqrt 2) (exact), ln m =
    2 atanh(s) = 2 sum_j s^(2j+1) / (2 j + 1), s = (m - 1) / (m + 1) (m - 1 is exact, so
    ln x is relatively accurate near 1 too), and e ln 2 added; -inf at 0, nan below 0 or
    for nan."""
    n = x.limb_count
    head = x.limbs[0]
    positive = np.isfinite(head) & (head > 0)
    mantissa, exponent = np.frexp(np.where(positive, head, 1.0))
    exponent = np.where(mantissa < math.sqrt(0.5), exponent - 1, exponent)
    m = _scaled(MultiFloatArray(np.where(positive, x.limbs, 1.0)), -exponent)
    s = (m - 1.0) / (m + 1.0)
    square = s * s
    coefficients = _log_series(n)
    total = coefficients[-1]
    for coefficient in coefficients[-2::-1]:
        total = total * square + coefficient
    y = total * s * 2.0 + constant("ln2", n) * exponent.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        y.limbs[:, ~positive] = 0.0
        y.limbs[0] = np.where(positive, y.limbs[0], np.log(head))
    return y


@functools.cache
def _erfcx_table(n: int) -> np.ndarray:
    """erfcx(z_0) = exp(z_0^2) erfc(z_0) at z_0 = j / ERFC_GRID up to the fraction's edge,
    as limbs (n, points)."""
    points = int(ERFC_FRACTION_EDGE * ERFC_GRID) + 1
    with mpmath.workprec(53 * n + 100):
        values = [
            mpmath.exp(mpmath.mpf(j) ** 2 / ERFC_GRID**2) * mpmath.erfc(mpmath.mpf(j) / ERFC_GRID)
            for j in range(points)
        ]
        return np.stack([limbs_of_value(value, n) for value in values], axis=1)


@functools.cache
def _erfc_series_terms(n: int) -> int:
    """Taylor terms of erfcx about z_0 <= 8 for |h| <= 1 / 8: the terms fall as about
    (2 z_0 |h|)^k / k! <= 2^k / k!; enough that this is below u^n / 100."""
    k = 1
    while 2.0**k / math.factorial(k) >= unit(n) / 100:
        k += 1
    return k


@functools.cache
def _fraction_depth(n: int) -> int:
    """The continued fraction's depth K at which it is within u^n / 16 of erfcx at the edge
    z = 8 (its error falls as z grows), found by mpmath at first use: 14 terms give 6e-21,
    30 give 7e-35, 60 give 9e-55."""
    with mpmath.workprec(53 * n + 100):
        z = mpmath.mpf(ERFC_FRACTION_EDGE)
        exact = mpmath.exp(z * z) * mpmath.erfc(z) * mpmath.sqrt(mpmath.pi)
        depth = 4
        while True:
            value = z
            for k in range(depth, 0, -1):
                value = z + mpmath.mpf(k) / 2 / value
            if abs(1 / value - exact) / exact < unit(n) / 16:
                return depth
            depth += 4


def erfc(x: MultiFloatArray) -> MultiFloatArray:
    """erfc(x) = 1 - erf(x) elementwise, relatively accurate for x >= 0 (within about
    (1 + z^2) u^n), and 2 - erfc(-x) below; nan for nan."""
    head = x.limbs[0]
    negative = head < 0
    z = MultiFloatArray(np.where(negative, -x.limbs, x.limbs))
    z = MultiFloatArray(np.where(np.isfinite(z.limbs[0]), z.limbs, 0.0))
    near = z.limbs[0] < ERFC_FRACTION_EDGE
    scaled = MultiFloatArray(np.zeros_like(z.limbs))
    if near.any():
        scaled.limbs[:, near] = _erfcx_series(z[near]).limbs
    if (~near).any():
        scaled.limbs[:, ~near] = _erfcx_fraction(z[~near]).limbs
    result = exp(-(z * z)) * scaled
    result = MultiFloatArray(np.where(negative, (2.0 - result).limbs, result.limbs))
    limit = np.where(negative, 2.0, 0.0)
    result.limbs[:, np.isinf(head)] = 0.0
    result.limbs[0] = np.where(np.isinf(head), limit, result.limbs[0])
    result.limbs[0] = np.where(np.isnan(head), np.nan, result.limbs[0])
    return result


def _erfcx_series(z: MultiFloatArray) -> MultiFloatArray:
    """erfcx(z) for 0 <= z < 8 by its Taylor series about the nearest grid point."""
    n = z.limb_count
    index = np.rint(z.limbs[0] * ERFC_GRID).astype(np.int64)
    z0 = index / ERFC_GRID  # exact
    h = z - z0
    table = _erfcx_table(n)
    previous = MultiFloatArray(np.zeros_like(z.limbs))
    current = MultiFloatArray(table[:, index])
    two_over_root_pi = constant("2/sqrt(pi)", n)
    total = current.copy()
    power = h
    for k in range(_erfc_series_terms(n)):
        following = current * (2 * z0) + previous * 2.0
        if k == 0:
            following = following - two_over_root_pi
        following = following / float(k + 1)
        previous, current = current, following
        total = total + current * power
        power = power * h
    return total


def _erfcx_fraction(z: MultiFloatArray) -> MultiFloatArray:
    """erfcx(z) = 1 / (sqrt(pi) (z + (1/2) / (z + (2/2) / (z + ...)))) for z >= 8."""
    n = z.limb_count
    value = z.copy()
    for k in range(_fraction_depth(n), 0, -1):
        value = z + (k / 2) / value
    return 1.0 / (value * constant("sqrt(pi)", n))


def tanh(x: MultiFloatArray) -> MultiFloatArray:
    """tanh(x) = -e / (2 + e), e = expm1(-2 |x|), with x's sign (relatively accurate)."""
    negative = x.limbs[0] < 0
    magnitude = MultiFloatArray(np.where(negative, -x.limbs, x.limbs))
    e = expm1(magnitude * -2.0)
    value = -e / (e + 2.0)
    return MultiFloatArray(np.where(negative, -value.limbs, value.limbs))


def logistic(x: MultiFloatArray) -> MultiFloatArray:
    """1 / (1 + e^-x) elementwise, as e^x / (1 + e^x) for x < 0 (no overflow)."""
    negative = x.limbs[0] < 0
    e = exp(MultiFloatArray(np.where(negative, x.limbs, -x.limbs)))
    one = np.zeros_like(e.limbs)
    one[0] = 1.0
    return MultiFloatArray(np.where(negative, e.limbs, one)) / (e + 1.0)


def _quarter_turns(x: MultiFloatArray) -> tuple[MultiFloatArray, np.ndarray]:
    """(r, k) with x = k pi / 2 + r, |r| <= pi / 4 (up to rounding), k exact."""
    n = x.limb_count
    head = x.limbs[0]
    if np.any(np.abs(head[np.isfinite(head)]) >= TRIG_LIMIT * math.pi / 2):
        raise ValueError(f"sin and cos of multi-floats take |x| < {TRIG_LIMIT * math.pi / 2:.3g}")
    k = np.rint(np.nan_to_num(head) / (math.pi / 2))
    r = x
    count = math.ceil((53 * n + 60) / TRIG_CHUNK_BITS)
    for chunk in _chunks("pi/2", TRIG_CHUNK_BITS, count):
        r = r - k * chunk
    return r, k.astype(np.int64) % 4


def _sin_cos_reduced(r: MultiFloatArray) -> tuple[MultiFloatArray, MultiFloatArray]:
    n = r.limb_count
    terms = taylor_terms(math.pi / 4, n) + 1
    inverse = _reciprocal_factorials(n, terms + 1)
    square = r * r
    odd = [j for j in range(1, terms + 1, 2)]
    even = [j for j in range(0, terms + 1, 2)]
    sine = inverse[odd[-1]] * (-1.0 if len(odd) % 2 == 0 else 1.0)
    for position in range(len(odd) - 2, -1, -1):
        sign = -1.0 if position % 2 else 1.0
        sine = sine * square + inverse[odd[position]] * sign
    cosine = inverse[even[-1]] * (-1.0 if (len(even) - 1) % 2 else 1.0)
    for position in range(len(even) - 2, -1, -1):
        sign = -1.0 if position % 2 else 1.0
        cosine = cosine * square + inverse[even[position]] * sign
    return sine * r, cosine


def sin(x: MultiFloatArray) -> MultiFloatArray:
    r, quadrant = _quarter_turns(x)
    s, c = _sin_cos_reduced(r)
    return _pick(quadrant, (s, c, -s, -c))


def cos(x: MultiFloatArray) -> MultiFloatArray:
    r, quadrant = _quarter_turns(x)
    s, c = _sin_cos_reduced(r)
    return _pick(quadrant, (c, -s, -c, s))


def _pick(quadrant: np.ndarray, values: tuple[MultiFloatArray, ...]) -> MultiFloatArray:
    limbs = np.select([quadrant == q for q in range(4)], [v.limbs for v in values])
    return MultiFloatArray(limbs)
