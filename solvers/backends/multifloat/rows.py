"""The row operations of the norms and the softmax over multi-float limb arrays, each one
compiled call for a whole array (n, rows, length) instead of one call per elementwise
operation (docs/rounding.md section 6).

Each kernel performs the n-limb operations of the backend's generic method
(`Backend.moments`, `normalise_rows`, `tangent_rows`, `mean_square`, `softmax_` in
solvers/backends/base.py) in the same order, the sums left to right, so its rounding
errors are the generic method's and so are its results on finite numbers; only the Python
dispatch between the operations is gone, which is most of a small problem's cost (an
operation on a row of 8 four-limb numbers is about 1 us of arithmetic and 5 to 10 us of
dispatch).
"""

from __future__ import annotations

import numba
import numpy as np

from solvers.backends.multifloat import elementary, functions
from solvers.backends.multifloat.array import MultiFloatArray, limbs_of
from solvers.backends.multifloat.expansions import (
    WIDTHS,
    add_at,
    add_float_at,
    div_at,
    mul_at,
    scratch,
    set_float_at,
    sqrt_at,
)


@numba.njit(cache=True, error_model="numpy")
def _row_mean(x, r, length, count, w, d, width):
    """w[:, 0] = sum_j x[:, r L + j] / L (left to right), L = `length` held in `count`."""
    w[:, 0] = 0.0
    for j in range(r * length, (r + 1) * length):
        add_at(w, 0, x, j, 1.0, w, 0, width)
    div_at(w, 0, count, 0, w, 0, d, width)


@numba.njit(cache=True, error_model="numpy")
def _count(length, width):
    count = np.zeros((len(width), 1))
    count[0, 0] = length
    return count


@numba.njit(cache=True, error_model="numpy")
def _moments(x, length, mean, variance, width):
    """Per row r: mean = sum x / L, variance = sum (x - mean)^2 / L (two passes)."""
    n = len(width)
    d, w, count = scratch(n), np.empty((n, 2)), _count(length, width)
    for r in range(mean.shape[1]):
        _row_mean(x, r, length, count, w, d, width)
        mean[:, r] = w[:, 0]
        w[:, 0] = 0.0
        for j in range(r * length, (r + 1) * length):
            add_at(x, j, mean, r, -1.0, w, 1, width)
            mul_at(w, 1, w, 1, w, 1, width)
            add_at(w, 0, w, 1, 1.0, w, 0, width)
        div_at(w, 0, count, 0, variance, r, d, width)


@numba.njit(cache=True, error_model="numpy")
def _mean_square(x, length, z, width):
    """Per row r: z = sum x^2 / L."""
    n = len(width)
    d, w, count = scratch(n), np.empty((n, 2)), _count(length, width)
    for r in range(z.shape[1]):
        w[:, 0] = 0.0
        for j in range(r * length, (r + 1) * length):
            mul_at(x, j, x, j, w, 1, width)
            add_at(w, 0, w, 1, 1.0, w, 0, width)
        div_at(w, 0, count, 0, z, r, d, width)


@numba.njit(cache=True, error_model="numpy")
def _normalise(x, length, mean, variance, eps, gain, bias, z, width):
    """Per row r and feature j: z = (x - mean) / sqrt(variance + eps) g_j + b_j, the gain
    and bias of length L or 1 (then repeated)."""
    n = len(width)
    d, w, s = scratch(n), np.empty((n, 3)), np.empty((n, 1))
    gains, biases = gain.shape[1], bias.shape[1]
    for r in range(mean.shape[1]):
        add_at(variance, r, eps, 0, 1.0, s, 0, width)
        sqrt_at(s, 0, s, 0, w, d, width)
        for j in range(length):
            k = r * length + j
            add_at(x, k, mean, r, -1.0, z, k, width)
            div_at(z, k, s, 0, z, k, d, width)
            mul_at(z, k, gain, j % gains, z, k, width)
            add_at(z, k, bias, j % biases, 1.0, z, k, width)


@numba.njit(cache=True, error_model="numpy")
def _tangent(u, length, mean, variance, g, z, width):
    """Per row r: c = g - mean(g), then z = c - (mean(c (u - mean)) / variance) (u - mean)."""
    n = len(width)
    d, w, count = scratch(n), np.empty((n, 3)), _count(length, width)
    centred_u = np.empty((n, length))
    for r in range(mean.shape[1]):
        _row_mean(g, r, length, count, w, d, width)
        w[:, 2] = 0.0
        for j in range(length):
            k = r * length + j
            add_at(g, k, w, 0, -1.0, z, k, width)
            add_at(u, k, mean, r, -1.0, centred_u, j, width)
            mul_at(z, k, centred_u, j, w, 1, width)
            add_at(w, 2, w, 1, 1.0, w, 2, width)
        div_at(w, 2, count, 0, w, 2, d, width)
        div_at(w, 2, variance, r, w, 2, d, width)
        for j in range(length):
            k = r * length + j
            mul_at(w, 2, centred_u, j, w, 1, width)
            add_at(z, k, w, 1, -1.0, z, k, width)


@numba.njit(cache=True, error_model="numpy")
def _softmax(x, length, z, width, c0, rest, inverse, table):
    """Per row: x - c with c the row's largest float64 value (the limbs summed from the
    smallest up, a non-finite number as its leading limb), then z = e^(x - c)
    (`elementary.exp`) and z / sum z. x is overwritten. Non-finite results are the float64
    results of the leading limbs, as the elementwise kernels give them."""
    n, rows = len(width), x.shape[1] // length
    for r in range(rows):
        largest = -np.inf
        for k in range(r * length, (r + 1) * length):
            value = x[0, k]
            if np.isfinite(value):
                value = 0.0
                for limb in range(n - 1, -1, -1):
                    value += x[limb, k]
            largest = max(largest, value)
        for k in range(r * length, (r + 1) * length):
            head = x[0, k] - largest
            add_float_at(x, k, -largest, x, k, width)
            if not (np.isfinite(x[0, k]) and np.isfinite(x[n - 1, k])):
                set_float_at(x, k, head)
    elementary.exp(x, z, width, False, c0, rest, inverse, table)
    d, total = scratch(n), np.empty((n, 1))
    for r in range(rows):
        total[:, 0] = 0.0
        for k in range(r * length, (r + 1) * length):
            add_at(total, 0, z, k, 1.0, total, 0, width)
        for k in range(r * length, (r + 1) * length):
            head = z[0, k] / total[0, 0]
            div_at(z, k, total, 0, z, k, d, width)
            if not (np.isfinite(z[0, k]) and np.isfinite(z[n - 1, k])):
                set_float_at(z, k, head)


def _rows(a: MultiFloatArray) -> tuple[np.ndarray, int]:
    """a's limbs as a C-contiguous (n, size) array and its row length (the last axis)."""
    limbs = np.ascontiguousarray(a.limbs)
    return limbs.reshape(limbs.shape[0], -1), limbs.shape[-1]


def _statistic(a: MultiFloatArray) -> np.ndarray:
    """An empty statistic per row of a, shape (n, *a.shape[:-1], 1)."""
    return np.empty((a.limb_count, *a.shape[:-1], 1))


def _vector(value: object, n: int) -> np.ndarray:
    """A gain, bias or eps (a number or a length-L vector) as limbs (n, m)."""
    return np.ascontiguousarray(limbs_of(value, n)).reshape(n, -1)


def moments(a: MultiFloatArray) -> tuple[MultiFloatArray, MultiFloatArray]:
    """The population mean and variance over the last axis (axis kept)."""
    x, length = _rows(a)
    mean, variance = _statistic(a), _statistic(a)
    n = a.limb_count
    _moments(x, length, mean.reshape(n, -1), variance.reshape(n, -1), WIDTHS[n])
    return MultiFloatArray(mean), MultiFloatArray(variance)


def mean_square(a: MultiFloatArray) -> MultiFloatArray:
    """sum(a^2) / L over the last axis (axis kept)."""
    x, length = _rows(a)
    z, n = _statistic(a), a.limb_count
    _mean_square(x, length, z.reshape(n, -1), WIDTHS[n])
    return MultiFloatArray(z)


def normalise(
    u: MultiFloatArray, mean: object, variance: object, eps: object, gain: object, bias: object
) -> MultiFloatArray:
    """g (u - mean) / sqrt(variance + eps) + b per row, a fresh array."""
    x, length = _rows(u)
    n = u.limb_count
    z = np.empty(u.limbs.shape)
    statistics = [_vector(value, n) for value in (mean, variance, eps, gain, bias)]
    _normalise(x, length, *statistics, z.reshape(n, -1), WIDTHS[n])
    return MultiFloatArray(z)


def tangent(u: MultiFloatArray, mean: object, variance: object, g: object) -> MultiFloatArray:
    """Per row, c = g - mean(g), then c - mean(c (u - mean)) / variance (u - mean)."""
    x, length = _rows(u)
    n = u.limb_count
    direction = np.ascontiguousarray(limbs_of(g, n)).reshape(n, -1)
    z = np.empty(u.limbs.shape)
    statistics = [_vector(value, n) for value in (mean, variance)]
    _tangent(x, length, *statistics, direction, z.reshape(n, -1), WIDTHS[n])
    return MultiFloatArray(z)


def softmax_(scores: MultiFloatArray) -> MultiFloatArray:
    """The row softmax of `Backend.softmax_` (shifted by the row's float64 maximum) written
    into scores."""
    x, length = _rows(scores)
    z = np.empty(x.shape)
    _softmax(x, length, z, WIDTHS[scores.limb_count], *functions.exp_tables(scores.limb_count))
    scores.limbs[...] = z.reshape(scores.limbs.shape)
    return scores
