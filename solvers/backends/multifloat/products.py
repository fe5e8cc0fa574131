"""Matrix products of multi-floats through float64 GEMMs: the error-free splitting of
Ozaki, Ogita, Oishi and Rump ("Error-free transformations of matrix multiplication by
using fast routines of matrix multiplication and its applications", Numer. Algorithms
59, 2012), docs/rounding.md section 7.

Each factor is cut into slices of beta bits: for A, row by row, with 2^e above the row's
largest |A_ij| (its leading limbs), slice k holds the bits of weight 2^(e - (k+1) beta)
up to 2^(e - k beta) of every limb, extracted exactly by S = fl((r + sigma) - sigma),
r <- r - S, sigma = 2^(e - (k+1) beta + 52); B the same by columns. A slice of a row is
an integer multiple of 2^(e - (k+1) beta) of at most beta + log2(n) bits (the n limbs'
slices at one level summed), so with 2 (beta + log2 n) + log2 K <= 53 every product of
two slices, a length-K dot product, is exact in float64: the BLAS computes it without
rounding. The products of slices p and q with p + q < L, L = ceil((53 n + G) / beta),
G = GUARD_BITS, are summed with one renormalisation per entry (`_sum_levels`);
the dropped ones and the slices beyond L carry below 2 K 2^(-53 n - G) a_i b_j, with
a_i = max_k |A_ik| and b_j = max_k |B_kj|. So entry (i, j) is within
u^n (|A| |B|)_ij + 2 K 2^(-53 n - G) a_i b_j, cancellation or not: the second term is
relative to the row's and column's largest entries, as every splitting's bound is.
All slices of a factor come out of one compiled pass, and all their products out of one
GEMM of the stacked slices (the pairs with p + q >= L are computed and not used: one
BLAS call costs less than L (L + 1) / 2 small ones). Small products (KERNEL_WORK) and
factors whose rows reach 2^800 or fall below 2^-800 (EXPONENT_REACH, where sigma would
overflow or underflow) go to the compiled multiply-add kernels (`kernels.matmul`).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from solvers.backends.multifloat import expansions as ex
from solvers.backends.multifloat import kernels

GUARD_BITS = 16
"""Bits carried beyond the format's 53 n by the slices."""
EXPONENT_REACH = 800
"""Rows or columns whose largest entry reaches 2^800, or stays below 2^-800 (zero ones
aside), take the multiply-add kernel: every sigma = 2^(e - k beta + 52) stays in
float64's normal range."""
KERNEL_WORK = {2: math.inf, 3: 2**20, 4: 2**17}
"""Products of at most this many multiply-adds take the compiled kernel, by limb count,
where it is faster (measured on a quiet 2-core machine, best of 5): at two limbs the
vectorised compensated kernel, 0.39 to 0.46 ns a multiply-add, is never slower than the
splitting (whose own best is 0.65 ns, at 64 x 256 x 704); the vectorised network kernels
of three and four limbs take 3.7 to 6.7 and 10.4 to 14.8 ns, and the splitting wins from
64 x 64 x 256 on at three limbs (5.1 against 4.4 ms there, 23 against 48 ms at 64 x 256 x
704) and from 64 x 64 x 64 at four (2.2 against 2.8 ms; 0.76 against 1.19 ms at 17 x 32 x
128)."""


def slice_bits(inner: int, n: int) -> int:
    """beta: the bits of a slice such that 2 (beta + log2 n) + log2 K <= 53."""
    return (53 - math.ceil(math.log2(max(inner, 2)))) // 2 - math.ceil(math.log2(n))


def _exponents(leading: np.ndarray) -> np.ndarray:
    """e with 2^e above every |x| of each row of `leading` (0 for an all-zero row)."""
    largest = np.max(np.abs(leading), axis=-1)
    return np.frexp(np.where(largest > 0, largest, 1.0))[1].astype(np.int64)


@numba.njit(cache=True, error_model="numpy")
def _slices(limbs, exponents, beta, levels, out):
    """out[k, r, c] = slice k of row r of the limbs (n, rows, columns): the bits of weight
    2^(e_r - (k+1) beta) up to 2^(e_r - k beta) of each limb, summed over the limbs (exact:
    multiples of one ulp of few bits), extracted by S = fl((x + sigma) - sigma)."""
    n, rows, columns = limbs.shape
    sigma = np.empty(levels)
    for r in range(rows):
        for k in range(levels):
            sigma[k] = math.ldexp(1.0, exponents[r] - (k + 1) * beta + 52)
        for c in range(columns):
            for limb in range(n):
                rest = limbs[limb, r, c]
                for k in range(levels):
                    high = (rest + sigma[k]) - sigma[k]
                    rest -= high
                    if limb == 0:
                        out[k, r, c] = high
                    else:
                        out[k, r, c] += high


@numba.njit(cache=True, error_model="numpy")
def _sum_levels(products, rows, columns, levels, z, width):
    """z[:, i, j] = the sum over p + q < levels of products[p rows + i, q columns + j], the
    slice products ordered by their level p + q, renormalised to n limbs."""
    n = len(width)
    t = np.empty(levels * (levels + 1) // 2)
    for i in range(rows):
        for j in range(columns):
            m = 0
            for level in range(levels):
                for p in range(level + 1):
                    t[m] = products[p * rows + i, (level - p) * columns + j]
                    m += 1
            ex.renormalised_sum(t, m, z, i * columns + j, n)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b for limb matrices a (n, rows, inner) and b (n, inner, columns): the slices of
    both stacked, their products in one GEMM, summed by level."""
    n, rows, inner = a.shape
    columns = b.shape[2]
    if rows * inner * columns <= KERNEL_WORK[n]:
        return kernels.matmul(a, b)
    b_rows = np.ascontiguousarray(b.transpose(0, 2, 1))
    row_exponents, column_exponents = _exponents(a[0]), _exponents(b_rows[0])
    exponents = np.concatenate([row_exponents, column_exponents])
    if np.any(np.abs(exponents) >= EXPONENT_REACH):
        return kernels.matmul(a, b)
    beta = slice_bits(inner, n)
    levels = math.ceil((53 * n + GUARD_BITS) / beta)
    left = np.empty((levels, rows, inner))
    _slices(np.ascontiguousarray(a), row_exponents, beta, levels, left)
    right = np.empty((levels, columns, inner))
    _slices(b_rows, column_exponents, beta, levels, right)
    products = left.reshape(-1, inner) @ right.reshape(-1, inner).T
    z = np.empty((n, rows, columns))
    _sum_levels(products, rows, columns, levels, z.reshape(n, -1), ex.WIDTHS[n])
    return z
