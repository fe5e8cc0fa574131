"""Double-word arithmetic: a number as the unevaluated sum x = x_h + x_l of two float64
limbs with |x_l| <= ulp(x_h) / 2, about 32 decimal digits, in compiled kernels (numba)
built from error-free transformations (docs/rounding.md section 6). The first limb count
of the multi-float number systems (float64x2); three and four limbs follow the same
construction.

The algorithms and their proven relative error bounds, u = 2^-53 (Joldes, Muller and
Popescu, "Tight and rigorous error bounds for basic building blocks of double-word
arithmetic", ACM TOMS 44(2), 2017; Hida, Li and Bailey's QD library for the division and
the square root):

- `two_sum` (Knuth's TwoSum) and `fast_two_sum` (Dekker's, |a| >= |b|): s + t = a + b
  exactly; `two_prod`: p + e = a b exactly with one fused multiply-add.
- `add` (AccurateDWPlusDW, their Algorithm 6): relative error at most 3 u^2 / (1 - 4 u),
  with or without cancellation.
- `mul` (DWTimesDW3, Algorithm 12, with FMA): at most 4 u^2.
- `div`: three quotient digits, each from the float64 quotient of the remainder, the
  remainder computed in double-word (QD's accurate division), then renormalised: a few
  u^2 (tests/solvers/backends/test_double_word.py measures it against exact rationals).
- `sqrt`: Karp and Markstein's step from the float64 square root, s + (x - s^2) / (2 s)
  with the residual in double-word: a few u^2 (measured as above).

Every result is renormalised (|z_l| <= ulp(z_h) / 2). Limbs are float64 arrays of one
shape; the kernels run elementwise over them (`binary`), broadcasting the operands
first. Valid for finite operands whose results neither overflow nor fall into
float64's subnormal range (where the low limb loses its digits); a zero divisor gives
inf or nan as float64 does.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic


@intrinsic
def fma(typingctx, a, b, c):
    """a b + c rounded once: LLVM's llvm.fma.f64, the processor's fused multiply-add where
    it has one (a correctly rounded software fma otherwise)."""
    signature = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, sig, args):
        double = ir.DoubleType()
        kind = ir.FunctionType(double, [double, double, double])
        return builder.call(builder.module.declare_intrinsic("llvm.fma", [double], kind), args)

    return signature, codegen


@numba.njit(cache=True, inline="always")
def two_sum(a, b):
    """(s, t) with s = fl(a + b) and s + t = a + b exactly (6 operations, any order)."""
    s = a + b
    a_rounded = s - b
    b_rounded = s - a_rounded
    return s, (a - a_rounded) + (b - b_rounded)


@numba.njit(cache=True, inline="always")
def fast_two_sum(a, b):
    """(s, t) with s = fl(a + b) and s + t = a + b exactly, for |a| >= |b| (or a = 0)."""
    s = a + b
    return s, b - (s - a)


@numba.njit(cache=True, inline="always")
def two_prod(a, b):
    """(p, e) with p = fl(a b) and p + e = a b exactly (barring underflow)."""
    p = a * b
    return p, fma(a, b, -p)


@numba.njit(cache=True, inline="always")
def _add(xh, xl, yh, yl):
    sh, sl = two_sum(xh, yh)
    th, tl = two_sum(xl, yl)
    vh, vl = fast_two_sum(sh, sl + th)
    return fast_two_sum(vh, tl + vl)


@numba.njit(cache=True, inline="always")
def _mul(xh, xl, yh, yl):
    ch, cl1 = two_prod(xh, yh)
    cl2 = fma(xl, yh, fma(xh, yl, xl * yl))
    return fast_two_sum(ch, cl1 + cl2)


@numba.njit(cache=True, inline="always")
def _mul_float(xh, xl, y):
    """(xh + xl) y for a float64 y (DWTimesFP3): at most 2 u^2."""
    ch, cl1 = two_prod(xh, y)
    return fast_two_sum(ch, fma(xl, y, cl1))


@numba.njit(cache=True, inline="always")
def _div(xh, xl, yh, yl):
    q1 = xh / yh
    ph, pl = _mul_float(yh, yl, q1)
    rh, rl = _add(xh, xl, -ph, -pl)
    q2 = rh / yh
    ph, pl = _mul_float(yh, yl, q2)
    rh, rl = _add(rh, rl, -ph, -pl)
    q3 = rh / yh
    zh, zl = fast_two_sum(q1, q2)
    return _add(zh, zl, q3, 0.0)


@numba.njit(cache=True, inline="always")
def _sqrt(xh, xl):
    if xh <= 0.0:
        return np.sqrt(xh), 0.0  # 0, or nan below it, as float64
    s = np.sqrt(xh)
    sh, sl = two_prod(s, s)
    residual = _add(xh, xl, -sh, -sl)[0]  # x - s^2, its high limb enough for the step
    return fast_two_sum(s, residual / (2.0 * s))


ADD, MUL, DIV = 0, 1, 2
"""The operations of `_binary`: one kernel with the operation an argument, since kernels
made by a factory close over their operation and miss numba's disk cache in every new
process (measured: each start recompiled them, 3 s, and the cache index grew)."""


@numba.njit(cache=True)
def _binary(operation, xh, xl, yh, yl, zh, zl):
    for i in range(zh.size):
        if operation == ADD:
            zh[i], zl[i] = _add(xh[i], xl[i], yh[i], yl[i])
        elif operation == MUL:
            zh[i], zl[i] = _mul(xh[i], xl[i], yh[i], yl[i])
        else:
            zh[i], zl[i] = _div(xh[i], xl[i], yh[i], yl[i])


@numba.njit(cache=True)
def _square_root(xh, xl, zh, zl):
    for i in range(zh.size):
        zh[i], zl[i] = _sqrt(xh[i], xl[i])


Limbs = tuple[np.ndarray, np.ndarray]
"""(high, low): float64 arrays of one shape."""


def _flat(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return np.ascontiguousarray(np.broadcast_to(array, shape), dtype=np.float64).ravel()


def binary(operation: int, x: Limbs, y: Limbs) -> Limbs:
    """ADD, MUL or DIV elementwise over x and y broadcast against each other."""
    shape = np.broadcast_shapes(*(np.shape(limb) for limb in (*x, *y)))
    zh, zl = np.empty(shape), np.empty(shape)
    flat = (_flat(limb, shape) for limb in (*x, *y))
    _binary(operation, *flat, zh.reshape(-1), zl.reshape(-1))
    return zh, zl


def add(x: Limbs, y: Limbs) -> Limbs:
    """x + y (AccurateDWPlusDW): relative error at most 3 u^2 / (1 - 4 u)."""
    return binary(ADD, x, y)


def sub(x: Limbs, y: Limbs) -> Limbs:
    """x - y: `add` of -y (negation is exact)."""
    return binary(ADD, x, (-y[0], -y[1]))


def mul(x: Limbs, y: Limbs) -> Limbs:
    """x y (DWTimesDW3): relative error at most 4 u^2."""
    return binary(MUL, x, y)


def div(x: Limbs, y: Limbs) -> Limbs:
    """x / y from three quotient digits (QD's accurate division)."""
    return binary(DIV, x, y)


def sqrt(x: Limbs) -> Limbs:
    """sqrt(x) for x >= 0 by one Karp-Markstein step; nan below 0 as float64."""
    shape = np.broadcast_shapes(*(np.shape(limb) for limb in x))
    zh, zl = np.empty(shape), np.empty(shape)
    _square_root(*(_flat(limb, shape) for limb in x), zh.reshape(-1), zl.reshape(-1))
    return zh, zl
