"""Hairer and Ostermann's continuous extension of a Gragg-Bulirsch-Stoer step: a polynomial
P(theta), theta in [0, 1], through the step's ends, built from what the tableau's rows
computed (docs/schemes.md section 8). At column kappa its error is O(H^(2 kappa)), one
power of H short of the step's own local error.

The rows must use step numbers n_j with n_j / 2 of one parity (solvers.integrators.tableaux
DENSE: 2, 6, 10, ...), so that the midpoint of the step is a grid point of the same
parity in every row and the rows' values there share one h^2 expansion.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from solvers.backends import Array, Backend
from solvers.integrators.tableaux import RowSamples, StepNumbers

DEGREE_DEFICIT = 3
"""mu = 2 kappa - DEGREE_DEFICIT midpoint derivatives are matched (ODEX's default: its
IWORK(7) = 4 gives mu = 2 kappa - 3): the polynomial has degree 2 kappa + 1, and its
error O(H^(2 kappa)) is then that of the midpoint value, not of the interpolation
(docs/schemes.md section 8)."""


@dataclass(frozen=True)
class DenseOutput:
    """P(theta) = H3(theta) + theta^2 (1 - theta)^2 sum_k a_k (theta - 1/2)^k / k!, H3 the
    cubic Hermite interpolant of (y0, H f0) and (y1, H f1); `error` estimates
    max over theta of |P(theta) - u(t + theta H)| (max-abs, from the last term)."""

    bk: Backend
    y0: Array
    difference: Array
    hermite: tuple[Array, Array]
    coefficients: tuple[Array, ...]
    error: float

    def __call__(self, theta: Array) -> Array:
        """P at theta (a backend scalar in [0, 1])."""
        bk = self.bk
        one = bk.asarray(1)
        rest = one - theta
        a, b = self.hermite
        value = self.y0 + (self.difference + (a * theta + b * rest) * rest) * theta
        if not self.coefficients:
            return value
        s = theta - bk.asarray(Fraction(1, 2))
        series = self.coefficients[-1]
        for k in range(len(self.coefficients) - 1, 0, -1):
            series = self.coefficients[k - 1] + series * (s / k)
        return value + series * (theta * rest) ** 2


def dense_output(
    bk: Backend,
    samples: Sequence[RowSamples],
    numbers: StepNumbers,
    ends: tuple[Array, Array],
    slopes: tuple[Array, Array],
    h: Array,
    size: Callable[[np.ndarray], float],
) -> DenseOutput:
    """The continuous extension of a step of size h accepted at column kappa =
    len(samples), from its rows' samples, its ends (y0, y1) and the field there
    (f0, f1). `size` measures a float64 state-shaped array (max-abs over the real
    tokens) for the error estimate.

    The data: y at the midpoint, extrapolated over all kappa rows; H^k y^(k) at the
    midpoint for k = 1, ..., mu, from the central differences of the rows' field values
    with spacing 2 H / n_j, (n_j / 2)^(k - 1) delta^(k - 1) f at the midpoint times H,
    extrapolated over the rows j >= k / 2 that have them. P matches them, and y0, y1,
    H f0, H f1: mu + 5 conditions, degree mu + 4."""
    if len({numbers(j) % 4 for j in range(1, len(samples) + 1)}) != 1:
        raise ValueError("dense output needs step numbers with n_j / 2 of one parity")
    kappa = len(samples)
    mu = 2 * kappa - DEGREE_DEFICIT
    y0, y1 = ends
    p0, p1 = slopes[0] * h, slopes[1] * h
    difference = y1 - y0
    # H3 = y0 + theta (y1 - y0 + (1 - theta)(a theta + b (1 - theta)))
    a, b = difference - p1, p0 - difference
    if mu < 0:
        return DenseOutput(bk, y0, difference, (a, b), (), math.inf)
    rows = [numbers(j) for j in range(1, kappa + 1)]
    data = [_extrapolated(bk, [row.midpoint for row in samples], rows)]
    for k in range(1, mu + 1):
        first = (k + 1) // 2  # rows with differences of order k - 1 about the midpoint
        values = [
            _central_difference(bk, samples[j - 1].fields, k - 1)
            * bk.asarray(rows[j - 1] // 2) ** (k - 1)
            for j in range(first, kappa + 1)
        ]
        data.append(_extrapolated(bk, values, rows[first - 1 :]) * h)
    # the Hermite cubic's derivatives in theta at 1/2
    half = bk.asarray(Fraction(1, 2))
    hermite = [
        (y0 + y1) * half + (a + b) * bk.asarray(Fraction(1, 8)),
        difference + (a - b) * bk.asarray(Fraction(1, 4)),
        p1 - p0,
        (b - a) * 6,
    ]
    coefficients: list[Array] = []
    for k in range(mu + 1):
        # (theta (1 - theta))^2 = 1/16 - s^2 / 2 + s^4, s = theta - 1/2: the k-th derivative
        # at s = 0 of it times sum a_i s^i / i! is a_k / 16 - C(k, 2) a_k-2 + 24 C(k, 4) a_k-4
        rest = data[k] - hermite[k] if k < 4 else data[k]
        if k >= 2:
            rest = rest + coefficients[k - 2] * (k * (k - 1) // 2)
        if k >= 4:
            rest = rest - coefficients[k - 4] * (k * (k - 1) * (k - 2) * (k - 3))
        coefficients.append(rest * 16)
    # the last term's largest value over [0, 1]: |s|^mu (1/4 - s^2)^2 / mu! is largest at
    # s^2 = mu / (4 (mu + 4)), where it is s^mu / (mu! (mu + 4)^2)
    peak = (0.5 * math.sqrt(mu / (mu + 4))) ** mu / (math.factorial(mu) * (mu + 4) ** 2)
    error = size(bk.to_float64(coefficients[-1])) * peak
    return DenseOutput(bk, y0, difference, (a, b), tuple(coefficients), error)


def _central_difference(bk: Backend, fields: Sequence[Array], order: int) -> Array:
    """delta^order f at the midpoint index m = len(fields) // 2, spacing 2:
    sum_i (-1)^i C(order, i) f_(m + order - 2 i)."""
    m = len(fields) // 2
    total = fields[m + order]
    for i in range(1, order + 1):
        total = total + fields[m + order - 2 * i] * ((-1) ** i * math.comb(order, i))
    return total


def _extrapolated(bk: Backend, values: Sequence[Array], numbers: Sequence[int]) -> Array:
    """Aitken-Neville to h = 0 in h^2 of values computed with n_j sub-steps: the diagonal
    of the tableau they start."""
    row: list[Array] = []
    for j, value in enumerate(values):
        previous, row = row, [value]
        for k in range(1, j + 1):
            ratio = bk.asarray(Fraction(numbers[j], numbers[j - k]) ** 2 - 1)
            row.append(row[k - 1] + (row[k - 1] - previous[k - 1]) / ratio)
    return row[-1]
