"""Double-word arithmetic: a number as the unevaluated sum x = x_h + x_l of two float64
limbs with |x_l| <= ulp(x_h) / 2, about 32 decimal digits, in compiled kernels (numba)
built from error-free transformations (docs/rounding.md section 6). The two-limb case
of the multi-float number systems (float64x2); `networks` carries three and four.

The algorithms and their proven relative error bounds, u = 2^-53 (Joldes, Muller and
Popescu, "Tight and rigorous error bounds for basic building blocks of double-word
arithmetic", ACM TOMS 44(2), 2017; Hida, Li and Bailey's QD library for the division and
the square root):

- `two_sum` (Knuth's TwoSum) and `fast_two_sum` (Dekker's, |a| >= |b|): s + t = a + b
  exactly; `two_prod`: p + e = a b exactly with one fused multiply-add.
- `_add` (AccurateDWPlusDW, their Algorithm 6): relative error at most 3 u^2 / (1 - 4 u),
  with or without cancellation.
- `_mul` (DWTimesDW3, Algorithm 12, with FMA): at most 4 u^2.
- `_div`: three quotient digits, each from the float64 quotient of the remainder, the
  remainder computed in double-word (QD's accurate division), then renormalised: a few
  u^2 (tests/solvers/backends/multifloat/test_expansions.py measures it against exact
  rationals).
- `_sqrt`: Karp and Markstein's step from the float64 square root, s + (x - s^2) / (2 s)
  with the residual in double-word: a few u^2 (measured as above).

Every result is renormalised (|z_l| <= ulp(z_h) / 2). These are the scalar kernels; the
column operations of `expansions` run them on limb arrays. Valid for finite
operands whose results neither overflow nor fall into float64's subnormal range (where
the low limb loses its digits); a zero divisor gives inf or nan as float64 does.
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


@numba.njit(cache=True, inline="always", error_model="numpy")
def two_sum(a, b):
    """(s, t) with s = fl(a + b) and s + t = a + b exactly (6 operations, any order)."""
    s = a + b
    a_rounded = s - b
    b_rounded = s - a_rounded
    return s, (a - a_rounded) + (b - b_rounded)


@numba.njit(cache=True, inline="always", error_model="numpy")
def fast_two_sum(a, b):
    """(s, t) with s = fl(a + b) and s + t = a + b exactly, for |a| >= |b| (or a = 0)."""
    s = a + b
    return s, b - (s - a)


@numba.njit(cache=True, inline="always", error_model="numpy")
def two_prod(a, b):
    """(p, e) with p = fl(a b) and p + e = a b exactly (barring underflow)."""
    p = a * b
    return p, fma(a, b, -p)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _add(xh, xl, yh, yl):
    sh, sl = two_sum(xh, yh)
    th, tl = two_sum(xl, yl)
    vh, vl = fast_two_sum(sh, sl + th)
    return fast_two_sum(vh, tl + vl)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _mul(xh, xl, yh, yl):
    ch, cl1 = two_prod(xh, yh)
    cl2 = fma(xl, yh, fma(xh, yl, xl * yl))
    return fast_two_sum(ch, cl1 + cl2)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _mul_float(xh, xl, y):
    """(xh + xl) y for a float64 y (DWTimesFP3): at most 2 u^2."""
    ch, cl1 = two_prod(xh, y)
    return fast_two_sum(ch, fma(xl, y, cl1))


@numba.njit(cache=True, inline="always", error_model="numpy")
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


@numba.njit(cache=True, inline="always", error_model="numpy")
def _sqrt(xh, xl):
    if xh <= 0.0:
        return np.sqrt(xh), 0.0  # 0, or nan below it, as float64
    s = np.sqrt(xh)
    sh, sl = two_prod(s, s)
    residual = _add(xh, xl, -sh, -sl)[0]  # x - s^2, its high limb enough for the step
    return fast_two_sum(s, residual / (2.0 * s))
