"""Time integrators as data: explicit Runge-Kutta tableaux and Gragg-Bulirsch-Stoer extrapolation.

A field is a callable f(t, u) -> du/dt on backend arrays. Coefficients are exact
fractions, rounded into the backend when used, so every method runs at any precision.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

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


def scaled(bk: Backend, h: Array, fraction: Fraction) -> Array:
    """fraction * h, without a multiplication when the fraction is 1."""
    return h if fraction == 1 else h * bk.asarray(fraction)


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


def extrapolation_step(
    bk: Backend, field: Field, t: Array, u: Array, h: Array, levels: int
) -> Array:
    """One Gragg-Bulirsch-Stoer step of order 2 * levels for a smooth field.

    T_{j,1} is Gragg's smoothed modified midpoint rule with n_j = 2j sub-steps; its error
    expands in even powers of h / n_j, which Aitken-Neville removes one at a time:
    T_{j,k+1} = T_{j,k} + (T_{j,k} - T_{j-1,k}) / ((n_j / n_{j-k})^2 - 1). The ratios
    are exact rationals rounded into the backend.
    """
    previous_row: list[Array] = []
    for j in range(1, levels + 1):
        n = 2 * j
        step = h / n
        before, current = u, u + step * field(t, u)
        for i in range(1, n):
            before, current = current, before + (2 * step) * field(t + step * i, current)
        row = [(current + before + step * field(t + h, current)) / 2]
        for k in range(1, j):
            ratio = bk.asarray(Fraction(j, j - k) ** 2 - 1)
            row.append(row[k - 1] + (row[k - 1] - previous_row[k - 1]) / ratio)
        previous_row = row
    return previous_row[-1]
