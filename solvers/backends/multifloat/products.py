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
G = GUARD_BITS, are summed with one renormalisation per entry (`expansions.sum_terms`);
the dropped ones and the slices beyond L carry below 2 K 2^(-53 n - G) a_i b_j, with
a_i = max_k |A_ik| and b_j = max_k |B_kj|. So entry (i, j) is within
u^n (|A| |B|)_ij + 2 K 2^(-53 n - G) a_i b_j, cancellation or not: the second term is
relative to the row's and column's largest entries, as every splitting's bound is.
Small products (KERNEL_WORK) and factors whose rows reach 2^900 (where sigma would
overflow) go to the compiled multiply-add kernel (`expansions.matmul`).
"""

from __future__ import annotations

import math

import numpy as np

from solvers.backends.multifloat import expansions as ex

GUARD_BITS = 16
"""Bits carried beyond the format's 53 n by the slices."""
LARGEST_EXPONENT = 900
"""Rows or columns with entries of 2^900 or more take the multiply-add kernel."""
KERNEL_WORK = 2048
"""Products of at most this many multiply-adds take the compiled kernel, faster there
(measured: 16 x 8 x 16 costs both about the same, 120 us at two limbs; at 17 x 32 x 32
the splitting costs 174 us against the kernel's 959 us, at four limbs 467 against 3473)."""


def slice_bits(inner: int, n: int) -> int:
    """beta: the bits of a slice such that 2 (beta + log2 n) + log2 K <= 53."""
    return (53 - math.ceil(math.log2(max(inner, 2)))) // 2 - math.ceil(math.log2(n))


def _exponents(leading: np.ndarray, axis: int) -> np.ndarray:
    """e with 2^e above every |x| along `axis` (0 for an all-zero row or column)."""
    largest = np.max(np.abs(leading), axis=axis, keepdims=True)
    return np.frexp(np.where(largest > 0, largest, 1.0))[1].astype(np.float64)


def _slices(limbs: np.ndarray, exponents: np.ndarray, beta: int, levels: int) -> list:
    """The float64 slices of a limb array (n, ...) at `levels` levels of beta bits."""
    rest = limbs.copy()
    slices = []
    for k in range(levels):
        sigma = np.ldexp(1.0, (exponents - (k + 1) * beta + 52).astype(np.int64))
        high = (rest + sigma) - sigma
        rest -= high
        slices.append(np.sum(high, axis=0))  # exact: multiples of one ulp, few bits
    return slices


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b for limb matrices a (n, rows, inner) and b (n, inner, columns)."""
    n, rows, inner = a.shape
    if rows * inner * b.shape[2] <= KERNEL_WORK:
        return ex.matmul(a, b)
    row_exponents = _exponents(a[0], axis=-1)
    column_exponents = _exponents(b[0], axis=-2)
    if max(row_exponents.max(initial=0), column_exponents.max(initial=0)) >= LARGEST_EXPONENT:
        return ex.matmul(a, b)
    beta = slice_bits(inner, n)
    levels = math.ceil((53 * n + GUARD_BITS) / beta)
    left = _slices(a, row_exponents, beta, levels)
    right = _slices(b, column_exponents, beta, levels)
    terms = [left[p] @ right[s - p] for s in range(levels) for p in range(s + 1)]
    return ex.sum_terms(np.stack(terms), n)
