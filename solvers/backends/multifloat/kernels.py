"""The array kernels of the multi-floats over limb arrays (n, size), and their entry
points: +, -, * and / elementwise (a float64 operand with its own kernels), the square
root, the multiply-add matrix product and row sums, each element through the column
operations of `expansions` (docs/rounding.md section 6). Operands broadcast as numpy's
do, without a copy where an operand's own axes are one block of the result's (a scalar, a
bias along the last axis, a column of row statistics): the result's element i reads the
operand's element (i // divisor) % period (`operand`)."""

from __future__ import annotations

import math

import numba
import numpy as np

from solvers.backends.multifloat import double_word as dw
from solvers.backends.multifloat import networks as nw
from solvers.backends.multifloat.expansions import (
    WIDTHS,
    add_at,
    add_float_at,
    div_at,
    mul_at,
    mul_float_at,
    scratch,
    set_float_at,
    sqrt_at,
)

ADD, SUB, MUL, DIV = 0, 1, 2, 3
"""The operations of `_binary` (one kernel with the operation an argument: kernels closed
over their operation miss numba's disk cache in every new process)."""


@numba.njit(cache=True, inline="always", error_model="numpy")
def _float_result(operation, a, b):
    if operation == ADD:
        return a + b
    if operation == SUB:
        return a - b
    if operation == MUL:
        return a * b
    return a / b


@numba.njit(cache=True, inline="always")
def _at(i, index):
    """The operand's element read at the result's element i, index = (divisor, period)."""
    return (i // index[0]) % index[1]


@numba.njit(cache=True, error_model="numpy")
def _non_finite(operation, x, xi, y, yi, z):
    """Where an operand or a result is not finite, the float64 result of the leading limbs
    (inf, -inf or nan, as float64 gives them; y is the other operand's leading limbs) and
    zero limbs after it: the error-free transformations turn inf into nan."""
    n, size = z.shape
    for i in range(size):
        if not (np.isfinite(z[0, i]) and np.isfinite(z[n - 1, i])):
            set_float_at(z, i, _float_result(operation, x[0, _at(i, xi)], y[_at(i, yi)]))


@numba.njit(cache=True, error_model="numpy")
def _binary(operation, x, xi, y, yi, z, width):
    """z = x (operation) y elementwise over limb arrays (n, size), x's element _at(i, xi)
    and y's _at(i, yi) for z's element i. Each operation has its own loop, and operands
    of z's own shape their own, so that the loops have no branch and vectorise."""
    size = z.shape[1]
    if operation == DIV:
        d = scratch(len(width))
        for i in range(size):
            div_at(x, _at(i, xi), y, _at(i, yi), z, i, d, width)
    elif xi[0] == 1 and xi[1] == size and yi[0] == 1 and yi[1] == size:
        if operation == MUL:
            for i in range(size):
                mul_at(x, i, y, i, z, i, width)
        else:
            sign = 1.0 if operation == ADD else -1.0
            for i in range(size):
                add_at(x, i, y, i, sign, z, i, width)
    elif operation == MUL:
        for i in range(size):
            mul_at(x, _at(i, xi), y, _at(i, yi), z, i, width)
    else:
        sign = 1.0 if operation == ADD else -1.0
        for i in range(size):
            add_at(x, _at(i, xi), y, _at(i, yi), sign, z, i, width)
    _non_finite(operation, x, xi, y[0], yi, z)


@numba.njit(cache=True, error_model="numpy")
def _binary_float(operation, x, xi, c, ci, z, width):
    """z = x (operation) c elementwise for float64 numbers c, ADD, SUB or MUL."""
    for i in range(z.shape[1]):
        if operation == MUL:
            mul_float_at(x, _at(i, xi), c[_at(i, ci)], z, i, width)
        else:
            value = c[_at(i, ci)] if operation == ADD else -c[_at(i, ci)]
            add_float_at(x, _at(i, xi), value, z, i, width)
    _non_finite(operation, x, xi, c, ci, z)


@numba.njit(cache=True, error_model="numpy")
def _square_root(x, z, width):
    """z = sqrt(x) elementwise (`expansions.sqrt_at`)."""
    d, w = scratch(len(width)), np.empty((len(width), 3))
    for i in range(z.shape[1]):
        sqrt_at(x, i, z, i, w, d, width)


@numba.njit(cache=True, error_model="numpy", parallel=True)
def _matmul_networks(a, b, z):
    """z = a @ b for three- or four-limb matrices given as tuples of their limb planes
    (rows x inner, inner x columns): row r of z accumulates a_rk times row k of b, an
    n-limb product and sum (`networks`) per term, in a loop over the columns without
    branches that the compiler vectorises (separate planes let it see that the limbs do
    not overlap), the rows split over the cores (numba's prange). Its error is within
    the bound of K n-limb multiply-adds."""
    n = len(a)
    rows, inner = a[0].shape
    columns = b[0].shape[1]
    for plane in z:
        plane[:] = 0.0
    for r in numba.prange(rows):
        for k in range(inner):
            if n == 3:
                x0, x1, x2 = a[0][r, k], a[1][r, k], a[2][r, k]
                for c in range(columns):
                    p0, p1, p2 = nw.mul3(x0, x1, x2, b[0][k, c], b[1][k, c], b[2][k, c])
                    z[0][r, c], z[1][r, c], z[2][r, c] = nw.add3(
                        z[0][r, c], z[1][r, c], z[2][r, c], p0, p1, p2
                    )
            else:
                x0, x1, x2, x3 = a[0][r, k], a[1][r, k], a[2][r, k], a[3][r, k]
                for c in range(columns):
                    p0, p1, p2, p3 = nw.mul4(
                        x0, x1, x2, x3, b[0][k, c], b[1][k, c], b[2][k, c], b[3][k, c]
                    )
                    z[0][r, c], z[1][r, c], z[2][r, c], z[3][r, c] = nw.add4(
                        z[0][r, c], z[1][r, c], z[2][r, c], z[3][r, c], p0, p1, p2, p3
                    )


@numba.njit(cache=True, error_model="numpy", parallel=True)
def _matmul_double_word(ah, al, bh, bl, zh, zl):
    """z = a @ b for two-limb matrices given by their limbs (rows x inner, inner x
    columns), each entry a compensated dot product (Ogita, Rump and Oishi's Dot2 carried
    to double-word operands): the high parts' products and running sum kept exactly as
    a float64 sum s plus errors (TwoProd, TwoSum), the errors, the cross products
    a_h b_l + a_l b_h and the tail summed in float64 in c, z = TwoSum(s, c). Its error
    is within a few K u^2 sum_k |a_k b_k|, the bound of K double-word multiply-adds. Row r
    of z accumulates a_rk times row k of b, a loop over the columns without branches
    that the compiler vectorises; the rows are split over the cores (numba's prange:
    about twice as fast on two, 53 against 110 us at 64 x 64 x 64)."""
    rows, inner = ah.shape
    columns = bh.shape[1]
    for r in numba.prange(rows):
        for c in range(columns):
            zh[r, c] = 0.0
            zl[r, c] = 0.0
        for k in range(inner):
            xh, xl = ah[r, k], al[r, k]
            for c in range(columns):
                p, error = dw.two_prod(xh, bh[k, c])
                s, carry = dw.two_sum(zh[r, c], p)
                zh[r, c] = s
                zl[r, c] += carry + (error + dw.fma(xh, bl[k, c], xl * bh[k, c]))
        for c in range(columns):
            zh[r, c], zl[r, c] = dw.two_sum(zh[r, c], zl[r, c])  # c may outgrow s


@numba.njit(cache=True, error_model="numpy")
def _row_sums(x, z, length, width):
    """z[:, r] = the sum of x[:, r * length : (r + 1) * length] (left to right)."""
    n = len(width)
    w = np.empty((n, 1))
    for r in range(z.shape[1]):
        w[:, 0] = 0.0
        for j in range(r * length, (r + 1) * length):
            add_at(w, 0, x, j, 1.0, w, 0, width)
        z[:, r] = w[:, 0]


def operand(limbs: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, tuple[int, int]]:
    """Limbs (n, *s) of an operand broadcast to element shape `shape`, as a C-contiguous
    (n, m) array and the index map (divisor, period) by which the result's element i reads
    element (i // divisor) % period: where s's axes of length above 1 are one block
    shape[a:b] of the result's, divisor = prod(shape[b:]) and period = prod(shape[a:b]) (no
    copy); otherwise s broadcast to `shape` by a copy, (1, size)."""
    n, element = limbs.shape[0], limbs.shape[1:]
    size = math.prod(shape)
    if element == shape:
        return np.ascontiguousarray(limbs).reshape(n, -1), (1, size)
    padded = (1,) * (len(shape) - len(element)) + element
    kept = [k for k, length in enumerate(padded) if length > 1]
    contiguous = np.ascontiguousarray(limbs).reshape(n, -1)
    if not kept:
        return contiguous, (1, 1)
    first, last = kept[0], kept[-1] + 1
    if all(padded[k] == shape[k] for k in range(first, last)):
        return contiguous, (math.prod(shape[last:]), math.prod(shape[first:last]))
    full = np.broadcast_to(limbs.reshape(n, *padded), (n, *shape))
    return np.ascontiguousarray(full).reshape(n, -1), (1, size)


def binary(operation: int, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """ADD, SUB, MUL or DIV elementwise over limb arrays x (n, *a) and y (n, *b), their
    element shapes broadcast against each other; a fresh (n, *shape) array."""
    shape = x.shape[1:] if x.shape == y.shape else np.broadcast_shapes(x.shape[1:], y.shape[1:])
    z = np.empty((x.shape[0], *shape))
    n = x.shape[0]
    _binary(operation, *operand(x, shape), *operand(y, shape), z.reshape(n, -1), WIDTHS[n])
    return z


def binary_float(operation: int, x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """ADD, SUB or MUL of limbs x (n, *a) and float64 numbers c (*b), broadcast: one
    rounding where the n-limb operation would round the float64 as an expansion too."""
    shape = np.broadcast_shapes(x.shape[1:], c.shape)
    z = np.empty((x.shape[0], *shape))
    values, index = operand(np.asarray(c, dtype=np.float64)[None], shape)
    n = x.shape[0]
    _binary_float(operation, *operand(x, shape), values[0], index, z.reshape(n, -1), WIDTHS[n])
    return z


def sqrt(x: np.ndarray) -> np.ndarray:
    """sqrt(x) elementwise over a limb array (n, *shape), x >= 0."""
    n = x.shape[0]
    z = np.empty(x.shape)
    _square_root(np.ascontiguousarray(x).reshape(n, -1), z.reshape(n, -1), WIDTHS[n])
    return z


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b for limb matrices a (n, rows, inner) and b (n, inner, columns): each entry's
    products and sums in n-limb arithmetic (the error of a length-K dot product is within
    the K multiply-adds' roundings of its terms' magnitudes)."""
    n, rows = a.shape[:2]
    z = np.empty((n, rows, b.shape[2]))
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    if n == 2:
        _matmul_double_word(a[0], a[1], b[0], b[1], z[0], z[1])
    else:
        _matmul_networks(tuple(a), tuple(b), tuple(z))
    return z


def row_sums(x: np.ndarray) -> np.ndarray:
    """The sums of a limb array (n, *shape) along its last axis, (n, *shape[:-1])."""
    n, length = x.shape[0], x.shape[-1]
    z = np.empty((n, *x.shape[1:-1]))
    _row_sums(np.ascontiguousarray(x).reshape(n, -1), z.reshape(n, -1), length, WIDTHS[n])
    return z
