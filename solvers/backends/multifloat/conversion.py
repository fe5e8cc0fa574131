"""Multi-float numbers to and from exact values: Fractions, mpmath numbers and decimal
strings in, Fractions, exact decimal expansions and exact mpmath numbers out.

Reading takes each limb as the float64 nearest what the limbs before it leave of the
exact value (`read`), so a number that n limbs can hold (every float64 and long double,
mpmath's and arb's numbers of up to 53 n bits) is read exactly, and any other is rounded
to within 2^(-53 n) relatively. Writing is exact: a sum of float64 limbs is a binary
fraction, whose decimal expansion is finite.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import mpmath
import numpy as np
from mpmath.libmp import from_man_exp, to_rational

from solvers.backends.base import ball_midpoints
from solvers.errors import InvalidInputError


def read(value: object, n: int, name: str = "value") -> np.ndarray:
    """The limbs (n, *shape) of numbers, float arrays, decimal strings (a ball "[m +/- r]"
    as its midpoint m), Fractions or mpmath numbers. A finite value beyond float64's range
    is an error naming `name`."""
    source = np.asarray(value)
    if source.dtype.kind in "fiub" and source.dtype.itemsize <= 8:
        if source.dtype.kind not in "iu" or not np.any(np.abs(source) > 2**53):
            limbs = np.zeros((n, *source.shape))
            limbs[0] = source
            return limbs
        source = source.astype(object)
    if source.dtype.kind in "US":
        source = ball_midpoints(source)
    limbs = np.zeros((n, *source.shape))
    for index in np.ndindex(source.shape):
        limbs[(slice(None), *index)] = _nearest_limbs(_fraction(source[index]), n, name)
    return limbs


def _nearest_limbs(number: Fraction | float, n: int, name: str) -> list[float]:
    if isinstance(number, float):  # inf or nan
        return [number] + [0.0] * (n - 1)
    limbs = []
    for _ in range(n):
        try:
            limb = float(number)
        except OverflowError:
            decades = len(str(abs(number.numerator))) - len(str(number.denominator))
            raise InvalidInputError(
                f"{name}: a value near 10^{decades} lies beyond float64x{n}'s range"
            ) from None
        limbs.append(limb)
        number -= Fraction(limb)
    return limbs


def _fraction(x: object) -> Fraction | float:
    """A number as the Fraction it is exactly (inf and nan as floats)."""
    if isinstance(x, Fraction | int):
        return Fraction(x)
    if isinstance(x, float | np.floating):
        if not np.isfinite(x):
            return float(x)
        return Fraction(*x.as_integer_ratio()) if isinstance(x, np.longdouble) else Fraction(x)
    if hasattr(x, "_mpf_"):  # an mpmath number
        try:
            return Fraction(*map(int, to_rational(x._mpf_)))
        except (ValueError, OverflowError):
            return float(x)
    text = str(x).strip()
    if text.startswith("["):
        text = str(ball_midpoints(np.asarray(text)))
    try:
        return Fraction(text)
    except ValueError:
        try:
            return float(text)
        except ValueError as exc:
            raise InvalidInputError(f"cannot read {x!r:.60} as a number") from exc


def fractions(limbs: np.ndarray) -> np.ndarray:
    """Each number (a column of `limbs`) as the Fraction it is; inf and nan as floats."""
    out = np.empty(limbs.shape[1:], dtype=object)
    for index in np.ndindex(out.shape):
        column = limbs[(slice(None), *index)].tolist()
        out[index] = sum(map(Fraction, column)) if math.isfinite(column[0]) else column[0]
    return out


def decimals(limbs: np.ndarray) -> np.ndarray:
    """The exact decimal expansions of the numbers ("inf", "nan" for those)."""
    return np.vectorize(_decimal, otypes=[str])(fractions(limbs))


def _decimal(x: Fraction | float) -> str:
    if isinstance(x, float):
        return str(x)
    digits = len(str(abs(x.numerator))) + x.denominator.bit_length() + 1
    with decimal.localcontext(decimal.Context(prec=digits)):
        return str(decimal.Decimal(x.numerator) / decimal.Decimal(x.denominator))


def mpmath_numbers(limbs: np.ndarray) -> np.ndarray:
    """The numbers as mpmath.mpf, each exactly its limbs' sum (an object array): each limb
    is m 2^e with an integer m of at most 53 bits (frexp, scaled exactly), and the sum
    the integer sum of m 2^(e - e_min) times 2^e_min, e_min over the nonzero limbs (the
    exponents and shifts in numpy, only the integer sums in Python)."""
    n, shape = limbs.shape[0], limbs.shape[1:]
    flat = limbs.reshape(n, -1)
    finite = np.isfinite(flat[0])
    fractions, exponents = np.frexp(np.where(finite, flat, 0.0))
    mantissas = np.ldexp(fractions, 53).astype(np.int64)
    exponents = exponents - 53
    nonzero = mantissas != 0
    low = np.where(nonzero, exponents, np.iinfo(np.int64).max).min(axis=0)
    low = np.where(nonzero.any(axis=0), low, 0)
    shifts = np.where(nonzero, exponents - low, 0)
    make = mpmath.mp.make_mpf
    out = np.empty(flat.shape[1], dtype=object)
    rows = zip(mantissas.T.tolist(), shifts.T.tolist(), low.tolist(), strict=True)
    for index, (ms, ss, e) in enumerate(rows):
        total = 0
        for m, shift in zip(ms, ss, strict=True):
            total += m << shift
        out[index] = make(from_man_exp(total, e))
    for index in np.flatnonzero(~finite):
        out[index] = mpmath.mpf(float(flat[0, index]))
    return out.reshape(shape)
