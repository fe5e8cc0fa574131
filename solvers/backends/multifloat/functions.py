"""Elementary functions of multi-float arrays (docs/rounding.md section 6), each from an
argument reduction that is exact and a series whose truncation is below u^n = 2^(-53 n):

- exp, expm1, erfc, tanh and the logistic function run in the compiled kernels of
  `elementary` (their algorithms are in its docstring), from the tables built here once
  per limb count: 2^(j / 2^m) - 1 and ln 2 / 2^m's parts, 1 / k!, and erfc's Taylor
  coefficients about the grid points z_0 = j / ERFC_GRID from
  erfc^(k)(z) = (-1)^k (2 / sqrt pi) H_(k-1)(z) e^(-z^2) (Hermite's polynomials), each
  point's degree the least whose remaining terms are below u^n / 64 of erfc on its
  interval.
- `log`: x = m 2^e, m in [1/sqrt 2, sqrt 2), ln m = 2 atanh((m - 1) / (m + 1)) by its
  series (m - 1 exact, so relatively accurate at 1 too), plus e ln 2.
- `sin` and `cos`: x = k pi / 2 + r with pi / 2 in chunks of 32 bits (k exact below
  2^21: |x| up to about 3e6), Taylor series of both on |r| <= pi / 4, the quadrant from
  k mod 4.

log, sin and cos are numpy-level compositions of the array arithmetic (hundreds of
kernel calls each): the operators use them only to set a problem up (rotary tables,
token weights), not in its field.

Measured accuracies: tests/solvers/backends/multifloat/test_functions.py against mpmath
at twice the digits.
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np

from solvers.backends.multifloat import elementary
from solvers.backends.multifloat.array import MultiFloatArray
from solvers.backends.multifloat.expansions import WIDTHS

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


def _chunks_of(value: mpmath.mpf, bits: int, count: int) -> tuple[float, ...]:
    """value as `count` float64 numbers of `bits` significant bits each, summing to it
    within 2^(-bits count) relatively: k c_j is exact for |k| < 2^(53 - bits)."""
    chunks = []
    for _ in range(count):
        exponent = int(mpmath.floor(mpmath.log(abs(value), 2))) + 1 - bits
        chunk = mpmath.nint(value / mpmath.ldexp(1, exponent)) * mpmath.ldexp(1, exponent)
        chunks.append(float(chunk))
        value -= chunk
    return tuple(chunks)


@functools.cache
def _chunks(name: str, bits: int, count: int) -> tuple[float, ...]:
    """The constant `name` in chunks (`_chunks_of`)."""
    with mpmath.workprec(bits * count + 100):
        return _chunks_of(NUMBERS[name](), bits, count)


def constant(name: str, n: int) -> MultiFloatArray:
    """A 0-d multi-float of the constant `name` (NUMBERS)."""
    return MultiFloatArray(_named(name, n).copy())


def _scaled(x: MultiFloatArray, exponents: np.ndarray | int) -> MultiFloatArray:
    """x 2^e elementwise, exact while no limb leaves float64's normal range."""
    return MultiFloatArray(np.ldexp(x.limbs, exponents))


@functools.cache
def taylor_terms(radius: float, n: int, scale: float = 1.0) -> int:
    """The least k with radius^(k+1) / (k+1)! below scale u^n / 4: the terms a Taylor series
    of exp, sin or cos needs for |r| <= radius (the first term dropped bounds the rest)
    within u^n / 4 of a result of size `scale`."""
    k = 1
    while radius ** (k + 1) / math.factorial(k + 1) >= scale * unit(n) / 4:
        k += 1
    return k


@functools.cache
def _reciprocal_factorials(n: int, count: int) -> np.ndarray:
    """1 / j! for j = 0 .. count as limbs (n, count + 1)."""
    with mpmath.workprec(53 * n + 100):
        return np.stack(
            [limbs_of_value(1 / mpmath.factorial(j), n) for j in range(count + 1)], axis=1
        )


@functools.cache
def exp_tables(n: int) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """(c_0, c_rest, 1 / k! for k <= K, 2^(j / 2^m) - 1 for |j| <= 2^(m - 1)) of the
    kernels' exp (`elementary`): c_0 + c_rest = ln 2 / 2^m within 2^(-53 n - 40)."""
    steps = 2**elementary.TABLE_BITS
    with mpmath.workprec(53 * n + 100):
        step = mpmath.ln2 / steps
        c0 = float(_chunks_of(step, elementary.CHUNK_BITS, 1)[0])
        rest = limbs_of_value(step - c0, n)[:, None]
        table = np.stack(
            [limbs_of_value(mpmath.expm1(j * step), n) for j in range(-steps // 2, steps // 2 + 1)],
            axis=1,
        )
    radius = 1.01 * math.log(2) / (2 * steps)
    terms = taylor_terms(radius, n, scale=radius)  # relative to e^r - 1, which is about r
    return c0, rest, _reciprocal_factorials(n, terms), table


def _exp_call(kernel, x: MultiFloatArray, *arguments) -> MultiFloatArray:
    """A kernel of `elementary` over x's elements, with the exp tables of its limb count."""
    limbs = np.ascontiguousarray(x.limbs)
    n = limbs.shape[0]
    z = np.empty(limbs.shape)
    kernel(limbs.reshape(n, -1), z.reshape(n, -1), WIDTHS[n], *arguments, *exp_tables(n))
    return MultiFloatArray(z)


def exp(x: MultiFloatArray) -> MultiFloatArray:
    """e^x elementwise: 0 at or below -745.2, inf at or above 709.78, nan for nan."""
    return _exp_call(elementary.exp, x, False)


def expm1(x: MultiFloatArray) -> MultiFloatArray:
    """e^x - 1 elementwise, relatively accurate near 0 too; -1 at or below -745.2."""
    return _exp_call(elementary.exp, x, True)


def tanh(x: MultiFloatArray) -> MultiFloatArray:
    """tanh(x) elementwise, relatively accurate (through expm1)."""
    return _exp_call(elementary.tanh, x)


def logistic(x: MultiFloatArray) -> MultiFloatArray:
    """1 / (1 + e^-x) elementwise, without overflow on either side."""
    return _exp_call(elementary.logistic, x)


@functools.cache
def _erfc_tables(n: int) -> tuple[np.ndarray, np.ndarray]:
    """erfc's Taylor coefficients about z_0 = j / ERFC_GRID below ERFC_EDGE, as limbs
    (n, points, K + 1), and each point's degree: the least d whose next terms
    |c_k| (1 / (2 ERFC_GRID))^k, k > d, sum below u^n / 64 of erfc(z_0 + 1 / (2 ERFC_GRID))."""
    grid, points = elementary.ERFC_GRID, int(elementary.ERFC_EDGE * elementary.ERFC_GRID) + 1
    reach = mpmath.mpf(1) / (2 * grid)
    with mpmath.workprec(53 * n + 100):
        series = []
        for j in range(points):
            z = mpmath.mpf(j) / grid
            scale = 2 / mpmath.sqrt(mpmath.pi) * mpmath.exp(-z * z)
            floor = mpmath.erfc(z + reach) * unit(n) / 64
            terms, previous, hermite = [mpmath.erfc(z)], mpmath.mpf(0), mpmath.mpf(1)
            k, tail = 1, []
            while True:  # c_k = (-1)^k scale H_(k-1)(z) / k!
                terms.append((-1) ** k * scale * hermite / mpmath.factorial(k))
                previous, hermite = hermite, 2 * z * hermite - 2 * (k - 1) * previous
                size = abs(terms[-1]) * reach**k
                tail = [*tail[-3:], size]
                if len(tail) == 4 and sum(tail) < floor:
                    break
                k += 1
            series.append(terms[: len(terms) - 4])
        degree = max(len(terms) for terms in series)
        coefficients = np.zeros((n, points, degree))
        for j, terms in enumerate(series):
            for k, value in enumerate(terms):
                coefficients[:, j, k] = limbs_of_value(value, n)
    return coefficients, np.array([len(terms) - 1 for terms in series], dtype=np.int64)


@functools.cache
def _fraction_depth(n: int) -> int:
    """The continued fraction's depth K at which it is within u^n / 16 of erfcx at
    ERFC_EDGE (its error falls as z grows), found by mpmath at first use."""
    with mpmath.workprec(53 * n + 100):
        z = mpmath.mpf(elementary.ERFC_EDGE)
        exact = mpmath.exp(z * z) * mpmath.erfc(z) * mpmath.sqrt(mpmath.pi)
        depth = 4
        while True:
            value = z
            for k in range(depth, 0, -1):
                value = z + mpmath.mpf(k) / 2 / value
            if abs(1 / value - exact) / exact < unit(n) / 16:
                return depth
            depth += 4


def _erfc_arguments(n: int) -> tuple:
    """erfc's tables after the exp tables' place in a kernel's arguments."""
    coefficients, degrees = _erfc_tables(n)
    return coefficients, degrees, _fraction_depth(n), _named("sqrt(pi)", n)[:, None]


def erfc(x: MultiFloatArray) -> MultiFloatArray:
    """erfc(x) = 1 - erf(x) elementwise, relatively accurate for x >= 0 (within a few u^n
    below ERFC_EDGE, about (1 + z^2) u^n above, from e^(-z^2)), and 2 - erfc(-x) below;
    0 above 27.3; nan for nan."""
    return _exp_call(elementary.erfc, x, *_erfc_arguments(x.limb_count))


def gelu(x: MultiFloatArray) -> MultiFloatArray:
    """x Phi(x) = x (erfc(-x / sqrt 2) / 2) elementwise in one kernel (`elementary.gelu`):
    the erfc of a negative argument is 2 - erfc(|.|), so neither side cancels."""
    n = x.limb_count
    factor = -_named("1/sqrt(2)", n)[:, None]
    return _exp_call(elementary.gelu, x, factor, *_erfc_arguments(n))


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
    inverse = [MultiFloatArray(c) for c in _reciprocal_factorials(n, terms + 1).T]
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
