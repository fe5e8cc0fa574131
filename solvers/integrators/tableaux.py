"""Time integrators as data: explicit Runge-Kutta tableaux and Gragg-Bulirsch-Stoer extrapolation.

A field is a callable f(t, u) -> du/dt on backend arrays. Coefficients are exact
fractions, rounded into the backend when used, so every method runs at any precision.
Beside the tableaux, their algebra: stage error growth, the stability function R(z) and
where |R| crosses 1 along a ray (docs/stability.md section 3).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from solvers.backends import Array, Backend

Field = Callable[[Array, Array], Array]
"""f(t, u) -> du/dt; it must return a fresh array (the steppers update it in place)."""


@dataclass(frozen=True)
class Tableau:
    """An explicit Runge-Kutta method: stages k_i = f(t + c_i h, u + h sum_j a_ij k_j),
    u_new = u + h sum_i b_i k_i (a strictly lower triangular)."""

    name: str
    order: int
    a: tuple[tuple[Fraction, ...], ...]
    b: tuple[Fraction, ...]
    c: tuple[Fraction, ...]


F = Fraction
EULER = Tableau("euler", 1, ((),), (F(1),), (F(0),))
RK2 = Tableau("rk2", 2, ((), (F(1, 2),)), (F(0), F(1)), (F(0), F(1, 2)))  # explicit midpoint
RK4 = Tableau(
    "rk4",
    4,
    ((), (F(1, 2),), (F(0), F(1, 2)), (F(0), F(0), F(1))),
    (F(1, 6), F(1, 3), F(1, 3), F(1, 6)),
    (F(0), F(1, 2), F(1, 2), F(1)),
)


def stage_growth(tableau: Tableau, x: float) -> float:
    """max_i sum_l |b_l| alpha_l: how much an error in stage i's field value can grow by the
    end of an explicit Runge-Kutta step, first order, for a field with Lipschitz constant
    Lam and x = h Lam: alpha_i = 1, alpha_l = x sum_{i <= j < l} |a_lj| alpha_j (l > i)."""
    a = [[abs(float(c)) for c in row] for row in tableau.a]
    b = [abs(float(c)) for c in tableau.b]
    worst = 0.0
    for i in range(len(b)):
        alpha = [0.0] * len(b)
        alpha[i] = 1.0
        for stage in range(i + 1, len(b)):
            alpha[stage] = x * sum(c * alpha[j] for j, c in enumerate(a[stage]) if j >= i)
        worst = max(worst, sum(c * w for c, w in zip(b, alpha, strict=True)))
    return worst


def stability_function(tableau: Tableau) -> list[Fraction]:
    """Coefficients c_0 .. c_s of R(z) = sum_k c_k z^k, c_0 = 1, c_k = b^T A^(k-1) 1: the
    stability function of an explicit Runge-Kutta tableau (u' = lambda u gives
    u_new = R(h lambda) u). Exact fractions."""
    stages = len(tableau.b)
    a = [[row[j] if j < len(row) else Fraction(0) for j in range(stages)] for row in tableau.a]
    vector = [Fraction(1)] * stages
    coefficients = [Fraction(1)]
    for _ in range(stages):
        coefficients.append(
            sum((b * v for b, v in zip(tableau.b, vector, strict=True)), Fraction(0))
        )
        vector = [
            sum((a[i][j] * vector[j] for j in range(stages)), Fraction(0)) for i in range(stages)
        ]
    return coefficients


def ray_boundary(coefficients: Sequence[Fraction], angle: float) -> tuple[float, float]:
    """(r*, g') along the ray z = r e^(i angle): r* the first r > 0 where |R(z)| crosses 1
    upwards (0 if |R| > 1 right away, inf if never), g' = d|R|/dr there.

    The crossings are the positive real roots of |R(r w)|^2 - 1, a polynomial in r with
    real coefficients (w = e^(i angle)); numpy.roots finds them.
    """
    w = complex(math.cos(angle), math.sin(angle))
    ray = np.array([complex(c) * w**k for k, c in enumerate(coefficients)])  # ascending in r
    square = np.convolve(ray, ray.conj()).real
    square[0] -= 1  # |R|^2 - 1, which vanishes at r = 0

    def excess(r: float) -> float:
        return float(np.polynomial.polynomial.polyval(r, square))

    roots = np.roots(square[1:][::-1])  # |R|^2 - 1 = r q(r)
    positive = sorted(
        r.real for r in roots if r.real > 0 and abs(r.imag) <= 1e-9 * max(1.0, abs(r))
    )
    first = positive[0] if positive else math.inf
    if excess(min(first, 1.0) * 1e-6) > 0:
        return 0.0, math.nan  # |R| > 1 for small r: the ray leaves the region at once
    for r in positive:
        if excess(r * (1 + 1e-6)) > 0:
            size = abs(np.polynomial.polynomial.polyval(r, ray))
            derivative = np.polynomial.polynomial.polyval(
                r, np.polynomial.polynomial.polyder(square)
            ) / (2 * size)
            return float(r), float(derivative)
    return math.inf, math.nan


def scaled(bk: Backend, h: Array, fraction: Fraction) -> Array:
    """fraction * h, without a multiplication when the fraction is 1 (told by its integers:
    comparing a Fraction with 1 is Python code, a microsecond on every stage)."""
    return h if fraction.numerator == fraction.denominator else h * bk.asarray(fraction)


def rk_step(bk: Backend, field: Field, t: Array, u: Array, h: Array, tableau: Tableau) -> Array:
    """u + h sum_i b_i k_i with k_i = f(t + c_i h, u + h sum_j a_ij k_j): one explicit
    Runge-Kutta step of `tableau` from (t, u).

    The stages are fresh arrays the field returned, so the final combination scales them
    in place (the float paths' cost is their temporaries).
    """
    stages: list[Array] = []
    for a_row, c in zip(tableau.a, tableau.c, strict=True):
        state = u
        for a, k in zip(a_row, stages, strict=False):
            if a:
                state = state + k * scaled(bk, h, a)
        stages.append(field(t + scaled(bk, h, c) if c else t, state))
    result = None
    for b, k in zip(tableau.b, stages, strict=True):
        if b:
            k *= scaled(bk, h, b)
            result = k if result is None else result + k
    result += u
    return result


@dataclass(frozen=True)
class StepNumbers:
    """The sub-step counts of the extrapolation's rows: n_j = first + increment (j - 1)."""

    first: int
    increment: int

    def __call__(self, j: int) -> int:
        return self.first + self.increment * (j - 1)


EVEN = StepNumbers(2, 2)
"""2, 4, 6, 8, ...: ODEX's default, the cheapest per column."""
DENSE = StepNumbers(2, 4)
"""2, 6, 10, 14, ...: n_j / 2 is odd in every row, so the midpoint of the step is a grid
point of the same parity in all of them, as the dense output needs (docs/schemes.md
section 8)."""


@dataclass
class RowSamples:
    """What the dense output keeps of row j: the midpoint rule's state at the step's
    midpoint (index n_j / 2, before smoothing) and its field values f_0, ..., f_n_j at the
    sub-step points (f_n_j at the unsmoothed end state)."""

    midpoint: Array
    fields: list[Array]


def extrapolation_rows(
    bk: Backend,
    field: Field,
    t: Array,
    u: Array,
    h: Array,
    levels: int,
    numbers: StepNumbers = EVEN,
    samples: list[RowSamples] | None = None,
    start: Array | None = None,
) -> Iterator[tuple[Array, Array | None]]:
    """The Gragg-Bulirsch-Stoer tableau over one step, row by row (docs/schemes.md section 3).

    T_{j,1} is Gragg's smoothed modified midpoint rule with n_j sub-steps (`numbers`); its
    error expands in even powers of h / n_j, which Aitken-Neville removes one at a time:
    T_{j,k+1} = T_{j,k} + (T_{j,k} - T_{j-1,k}) / ((n_j / n_{j-k})^2 - 1), the ratios exact
    rationals rounded into the backend. Row j yields (T_{j,j}, T_{j,j-1}): the value of
    order 2j and its neighbour, whose difference estimates the error of T_{j,j-1} (None
    in row 1). f(t, u) is evaluated once for all rows, unless given as `start`. With
    `samples`, each row appends its RowSamples (for the dense output; n_j must then be
    even).
    """
    start = field(t, u) if start is None else start
    previous_row: list[Array] = []
    for j in range(1, levels + 1):
        n = numbers(j)
        step = h / n
        before, current = u, u + start * step
        fields = [start]
        for i in range(1, n):
            if samples is not None and i == n // 2:
                midpoint = current
            slope = field(t + step * i, current)
            fields.append(slope)
            before, current = current, before + slope * (2 * step)
        slope = field(t + h, current)
        row = [(current + before + slope * step) / 2]
        if samples is not None:
            fields.append(slope)
            samples.append(RowSamples(midpoint, fields))
        for k in range(1, j):
            ratio = bk.asarray(Fraction(n, numbers(j - k)) ** 2 - 1)
            row.append(row[k - 1] + (row[k - 1] - previous_row[k - 1]) / ratio)
        previous_row = row
        yield row[-1], (row[-2] if j > 1 else None)


@functools.cache
def extrapolation_amplification(levels: int, numbers: StepNumbers = EVEN) -> float:
    """The Lebesgue constant of T_{L,L}: sum_i |c_i| over the weights of the first column,
    c_i = prod_{k != i} n_i^2 / (n_i^2 - n_k^2) (the extrapolation to h = 0 in h^2). A
    perturbation of size e in the T_{i,1} moves T_{L,L} by at most this times e; for the
    even numbers it grows about 2.2-fold per column (docs/schemes.md section 7)."""
    squares = [Fraction(numbers(i)) ** 2 for i in range(1, levels + 1)]
    return float(sum(abs(math.prod(a / (a - b) for b in squares if b != a)) for a in squares))


def extrapolation_evaluations(levels: int, numbers: StepNumbers = EVEN) -> int:
    """Field evaluations of `levels` rows: 1 + sum_j n_j."""
    return 1 + sum(numbers(j) for j in range(1, levels + 1))


def extrapolation_step(
    bk: Backend, field: Field, t: Array, u: Array, h: Array, levels: int
) -> Array:
    """One Gragg-Bulirsch-Stoer step of order 2 * levels for a smooth field: T_{L,L}."""
    *_, (diagonal, _) = extrapolation_rows(bk, field, t, u, h, levels)
    return diagonal
