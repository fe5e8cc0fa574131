"""The dense output of an extrapolation step against exact solutions: its order, exactness
on polynomials, and what it refuses (docs/schemes.md section 8)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from solvers import backend
from solvers.integrators.dense_output import dense_output
from solvers.integrators.tableaux import DENSE, EVEN, extrapolation_rows

BK = backend("mpmath", 50)
THETAS = (0.13, 0.37, 0.5, 0.81, 1.0)


def _dense(bk, field, t0, u0, h, kappa, numbers=DENSE):
    samples = []
    *_, (y1, _) = extrapolation_rows(bk, field, t0, u0, h, kappa, numbers, samples)
    slopes = (field(t0, u0), field(t0 + h, y1))
    size = lambda x: float(np.max(np.abs(x)))  # noqa: E731
    return dense_output(bk, samples, numbers, (u0, y1), slopes, h, size)


def _worst(bk, dense, exact, t0, h) -> float:
    errors = []
    for theta in THETAS:
        theta = bk.asarray(theta)
        errors.append(float(abs(dense(theta)[0] - exact(t0 + theta * h))))
    return max(errors)


@pytest.mark.parametrize("kappa", [2, 3, 5])
def test_the_dense_output_has_order_two_kappa(kappa):
    """u' = -t u, u = exp(-t^2 / 2): the error over the step falls as H^(2 kappa)."""
    ctx = BK.context

    def exact(t):
        return ctx.exp(-(t**2) / 2)

    errors = []
    with BK.active():
        for steps in (8, 16):
            t0, h = BK.asarray(Fraction(3, 10)), BK.asarray(Fraction(1, steps))
            u0 = BK.asarray(np.ones(1)) * exact(t0)
            dense = _dense(BK, lambda s, v: -v * s, t0, u0, h, kappa)
            errors.append(_worst(BK, dense, exact, t0, h))
    assert math.log2(errors[0] / errors[1]) >= 2 * kappa - 0.3


def test_a_polynomial_solution_is_reproduced():
    """u' = 7 t^6, u = t^7: at kappa = 4 every datum is exact (the rows' values, their
    differences and their extrapolations are polynomial in h^2 of low degree), and P, of
    degree 9, is the solution itself."""
    with BK.active():
        t0, h = BK.asarray(Fraction(1, 5)), BK.asarray(Fraction(1, 2))
        u0 = BK.asarray(np.ones(1)) * t0**7
        dense = _dense(BK, lambda s, v: v * 0 + 7 * s**6, t0, u0, h, 4)
        assert _worst(BK, dense, lambda t: t**7, t0, h) <= 1e-45


def test_the_ends_are_the_step_itself():
    with BK.active():
        t0, h = BK.asarray(0), BK.asarray(Fraction(1, 4))
        u0 = BK.asarray(np.array([1.0, -2.0]))
        field = lambda s, v: v * s - 1  # noqa: E731
        dense = _dense(BK, field, t0, u0, h, 3)
        samples: list = []
        *_, (y1, _) = extrapolation_rows(BK, field, t0, u0, h, 3, DENSE, samples)
        assert list(dense(BK.asarray(0))) == list(u0)
        assert max(abs(a - b) for a, b in zip(dense(BK.asarray(1)), y1, strict=True)) <= 1e-48


def test_rows_of_mixed_parity_are_refused():
    bk = backend("float64")
    with pytest.raises(ValueError, match="one parity"):
        _dense(bk, lambda s, v: -v, 0.0, np.ones(2), 0.5, 3, EVEN)
