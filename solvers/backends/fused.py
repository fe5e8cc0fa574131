"""Fused row kernels for the float32 and float64 backends (numba).

numpy makes one pass over memory per operation, and its float64 exp is scalar on
machines without AVX-512: the softmax of one (256, 256, 8, 1024) layer cost as much as
all of its matrix products, and in small problems each numpy call costs microseconds.
These kernels (exp, the row softmax, the layer norm's moments and its normalisation, the
tangent projection, relu with its bias, GELU) do a row's work in one pass while the row
sits in cache, with an exp that the compiler vectorises (docs/schemes.md section 6, "Fused
kernels"):

    exp(x) = 2^k p(r),  k = round(x / ln 2),  r = (x - k c_hi) - k c_lo,
    p(r) = sum_{j <= 13} r^j / j!,

c_hi + c_lo = ln 2 split so that k c_hi is exact; |r| <= ln(2) / 2 + tiny, where the
Taylor remainder is below 0.06 u. It is not correctly rounded (numpy's libm exp nearly
is), so the rounding model counts it as two roundings (docs/rounding.md
section 2). Arguments are clamped to [-746, 710], outside of which exp is 0 or inf in
float64; NaN stays NaN. 2^k is built from its bits as two factors, so results in the
subnormal range round twice at most.

For float32 arrays, the sums, exp and everything that meets their results are carried in
float64 and each stored result is rounded to float32: every operation is at least as
accurate as float32's own. Sums run in any order the compiler
likes (fastmath "reassoc" on the sum alone); the rounding bound gamma_n holds for every
order. Kernels take C-contiguous arrays and work along the last axis.

They run on the calling thread. Spread over the cores (prange), numba's thread pool and
OpenBLAS's, each waiting for work by spinning, take the cores from each other inside a
layer; split instead into blocks of token rows, one thread each with the BLAS held at one
thread, two products of half the rows share the memory bandwidth and cost about what one
product on OpenBLAS's own threads does. Neither gains over one thread
(benchmarks/test_backends.py times a layer).
"""

from __future__ import annotations

import math

import mpmath
import numba
import numpy as np

LOG2_E = 1 / math.log(2)
"""1 / ln 2 rounded; an error in it moves k, never the result (r absorbs it)."""
with mpmath.workprec(32):
    LN2_HIGH = float(+mpmath.ln2)
    """ln 2 to 32 bits: k LN2_HIGH is exact for |k| < 2^21."""
with mpmath.workprec(120):
    LN2_LOW = float(mpmath.ln2 - LN2_HIGH)
SHIFTER = 1.5 * 2.0**52
"""x / ln 2 + SHIFTER rounds x / ln 2 to an integer k and holds k in the low mantissa bits."""
SHIFTER_BITS = int(np.float64(SHIFTER).view(np.int64))
TAYLOR = tuple(1 / math.factorial(j) for j in range(14))
"""1 / j!, each correctly rounded (integer true division)."""
SQRT_2 = math.sqrt(2)
EXP_ARGUMENTS = (-746.0, 710.0)
"""exp underflows to 0 below the first and overflows above the second in float64."""
NORMAL_EXP = -708.0
"""exp of an argument at or above this is a normal float64, and so is every product `_exp`
forms on the way (k >= -1021); below it down to -746 the result is subnormal."""

FLAGS = {"contract"}  # fused multiply-adds where the machine has them
SUM_FLAGS = {"contract", "reassoc"}


@numba.njit(fastmath=FLAGS, cache=True, inline="always")
def _exp(x):
    low, high = EXP_ARGUMENTS
    x = x if not x < low else low  # written so that NaN passes through
    x = x if not x > high else high
    shifted = x * LOG2_E + SHIFTER
    k_float = shifted - SHIFTER
    r = (x - k_float * LN2_HIGH) - k_float * LN2_LOW
    p = TAYLOR[13]
    for j in range(12, -1, -1):
        p = p * r + TAYLOR[j]
    # k + 2048 > 0 for every clamped x: halve it with a logical shift (AVX2 has no
    # arithmetic one for 64-bit lanes), 2^k = 2^half 2^(k - half)
    biased = np.uint64(np.float64(shifted).view(np.int64) - (SHIFTER_BITS - 2048))
    half = biased >> np.uint64(1)
    first = np.uint64((half - np.uint64(1024 - 1023)) << np.uint64(52)).view(np.float64)
    second = np.uint64((biased - half - np.uint64(1024 - 1023)) << np.uint64(52)).view(np.float64)
    return p * first * second


@numba.njit(fastmath=SUM_FLAGS, cache=True)
def _sum(row):
    total = 0.0
    for j in range(row.shape[0]):
        total += row[j]
    return total


@numba.njit(fastmath=SUM_FLAGS, cache=True)
def _squared_deviations(row, centre):
    total = 0.0
    for j in range(row.shape[0]):
        total += (row[j] - centre) ** 2
    return total


@numba.njit(fastmath=FLAGS, cache=True)
def exp_(a):
    """exp of every entry of a C-contiguous array, written into it."""
    flat = a.reshape(a.size)
    for j in range(flat.shape[0]):
        flat[j] = _exp(flat[j])
    return a


@numba.njit(fastmath=FLAGS, cache=True)
def softmax_(scores):
    """P_j = exp(s_j - c) / sum_k exp(s_k - c) over the last axis, c the row maximum, written
    into the C-contiguous scores. A row holding NaN or +inf gives NaN; -inf entries give
    exactly 0.

    A row none of whose s_j - c lies in [-746, NORMAL_EXP) (where exp is subnormal) takes
    exp at max(s_j - c, NORMAL_EXP) and 0 below it: the same numbers, but the masked keys
    (-inf, a causal mask's upper triangle) no longer round to 0 through a subnormal product,
    which the CPU finishes in microcode (a causal softmax 3.5 times slower than an
    unmasked one of its size)."""
    low = EXP_ARGUMENTS[0]
    rows = scores.reshape(-1, scores.shape[-1])
    for i in range(rows.shape[0]):
        row = rows[i]
        peak = row[0]
        for j in range(1, row.shape[0]):
            peak = max(peak, row[j])
        subnormal = 0
        for j in range(row.shape[0]):
            x = row[j] - peak
            subnormal += 1 if low <= x < NORMAL_EXP else 0
        if subnormal:
            for j in range(row.shape[0]):
                row[j] = _exp(row[j] - peak)
        else:
            for j in range(row.shape[0]):
                x = row[j] - peak
                value = _exp(x if not x < NORMAL_EXP else NORMAL_EXP)
                row[j] = value if not x < NORMAL_EXP else 0.0
        total = _sum(row)
        for j in range(row.shape[0]):
            row[j] /= total
    return scores


@numba.njit(fastmath=FLAGS, cache=True)
def moments(a, mean, variance):
    """mean_i = sum_j a_ij / d and variance_i = sum_j (a_ij - mean_i)^2 / d over the last
    axis (the two-pass formula), written into mean and variance of a's shape with a last
    axis of 1; all C-contiguous."""
    d = a.shape[-1]
    rows, means, variances = a.reshape(-1, d), mean.reshape(-1), variance.reshape(-1)
    for i in range(rows.shape[0]):
        centre = _sum(rows[i]) / d
        means[i] = centre
        variances[i] = _squared_deviations(rows[i], centre) / d
    return mean, variance


@numba.njit(fastmath=FLAGS, cache=True)
def normalise(u, mean, variance, eps, gain, bias, out):
    """out_ij = gain_j (u_ij - mean_i) / sqrt(variance_i + eps) + bias_j: layer norm given
    u's mean and variance (last axis 1), a float eps and gain and bias of length d; all
    C-contiguous, u and out of one shape. The last multiply-add may be one fma."""
    d = u.shape[-1]
    us, outs = u.reshape(-1, d), out.reshape(-1, d)
    means, variances = mean.reshape(-1), variance.reshape(-1)
    for i in range(us.shape[0]):
        centre = np.float64(means[i])
        scale = math.sqrt(np.float64(variances[i]) + eps)
        for j in range(d):
            outs[i, j] = (us[i, j] - centre) / scale * gain[j] + bias[j]
    return out


@numba.njit(fastmath=SUM_FLAGS, cache=True)
def _centred_dot(u, u_mean, g, g_mean):
    total = 0.0
    for j in range(u.shape[0]):
        total += (g[j] - g_mean) * (u[j] - u_mean)
    return total


@numba.njit(fastmath=FLAGS, cache=True)
def tangent(u, mean, variance, g, out):
    """out_i = c - (sum_j c_j (u_ij - mean_i) / d) / variance_i (u_i - mean_i) with
    c = g_i - sum_j g_ij / d: Pi_T(u) g row by row (docs/model.md section 1), given u's
    mean and variance (last axis 1); all C-contiguous, u, g and out of one shape."""
    d = u.shape[-1]
    us, gs, outs = u.reshape(-1, d), g.reshape(-1, d), out.reshape(-1, d)
    means, variances = mean.reshape(-1), variance.reshape(-1)
    for i in range(us.shape[0]):
        g_mean = _sum(gs[i]) / d
        along = _centred_dot(us[i], means[i], gs[i], g_mean) / d / variances[i]
        for j in range(d):
            outs[i, j] = (gs[i, j] - g_mean) - along * (us[i, j] - means[i])
    return out


@numba.njit(fastmath=FLAGS, cache=True)
def bias_relu_(a, bias):
    """a_ij = max(a_ij + bias_j, 0) over the last axis, written into the C-contiguous a,
    bias of length a.shape[-1]; NaN stays NaN."""
    rows = a.reshape(-1, bias.shape[0])
    for i in range(rows.shape[0]):
        for j in range(bias.shape[0]):
            x = rows[i, j] + bias[j]
            rows[i, j] = x if not x < 0 else 0
    return a


@numba.njit(fastmath=FLAGS, cache=True)
def gelu(a, out):
    """out = x (1 + erf(x / sqrt 2)) / 2 entrywise, evaluated in float64 with the C
    library's erf and rounded to out's format, for C-contiguous a and out of one shape."""
    entries, results = a.reshape(a.size), out.reshape(out.size)
    for j in range(entries.shape[0]):
        x = np.float64(entries[j])
        results[j] = x * (1.0 + math.erf(x / SQRT_2)) / 2
    return out
