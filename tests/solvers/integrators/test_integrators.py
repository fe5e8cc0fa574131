"""Runge-Kutta tableaux and extrapolation reach their orders on u' = -t u (u = exp(-t^2/2))."""

from __future__ import annotations

import numpy as np
import pytest

from solvers import backend
from solvers.integrators.tableaux import EULER, RK2, RK4, extrapolation_step, rk_step


def _orders(step, steps=(8, 16, 32)):
    bk = backend("mpmath", 60)
    exact = bk.context.exp(-bk.context.mpf(1) / 2)
    errors = []
    for n in steps:
        u, t, h = bk.asarray(np.array([1.0])), bk.asarray(0), bk.asarray(1) / n
        for i in range(n):
            u = step(bk, lambda s, v: -v * s, t + h * i, u, h)
        errors.append(abs(u[0] - exact))
    return [float(bk.context.log(errors[i] / errors[i + 1], 2)) for i in range(len(steps) - 1)]


@pytest.mark.parametrize("tableau", [EULER, RK2, RK4], ids=lambda t: t.name)
def test_tableaux_reach_their_order(tableau):
    orders = _orders(lambda bk, f, t, u, h: rk_step(bk, f, t, u, h, tableau), (32, 64, 128))
    assert orders[-1] == pytest.approx(tableau.order, abs=0.1)


@pytest.mark.parametrize("levels", [2, 4, 6])
def test_extrapolation_has_order_twice_its_levels(levels):
    orders = _orders(lambda bk, f, t, u, h: extrapolation_step(bk, f, t, u, h, levels), (4, 8, 16))
    assert orders[-1] == pytest.approx(2 * levels, abs=0.4)
