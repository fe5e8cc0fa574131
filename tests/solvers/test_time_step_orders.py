"""Observed orders of every time-stepping method on a manufactured post-LN solution.

docs/orders.md section 1: Lie 1; Strang with Euler sub-steps 1; Strang with tangent RK2 2
but ambient RK2 1; projected RK4 4 but ambient RK4 then projection 1. The manufactured
solution u* = sigma1 + sigma2 sqrt(2) cos(2 pi y + phi(x, t)) lies on S1 and the FFN bias
is shifted so that no pre-activation crosses zero along it (a smooth field). In float64:
the smallest error measured (projected RK4 at 128 steps per unit, 8.6e-11) is 10^5 times
float64's rounding, so the orders are the methods' (at 50 digits this module took 100 s).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from solvers import backend, solve
from solvers.methods.extrapolation import Extrapolation
from tests.exact_layers import manufactured_post_ln

FLOAT64 = backend("float64")
STEPS = (4, 8, 16, 32, 64, 128)
LONG_STEPS = (*STEPS, 256)  # the first-order splittings approach 1 from above, slowly
EXPECTED = {
    "lie": (1.0, 0.05),
    "strang-euler": (1.0, 0.1),
    "strang-rk2": (2.0, 0.1),
    "strang-rk2-ambient": (1.0, 0.1),
    "projected-rk4": (4.0, 0.2),
    "ambient-rk4": (1.0, 0.1),
}


@pytest.fixture(scope="module")
def problem():
    return manufactured_post_ln()


@pytest.mark.parametrize("method", list(EXPECTED))
def test_observed_order(problem, method):
    exact = problem.manufactured.state(FLOAT64, FLOAT64.asarray(2))
    steps = LONG_STEPS if method in ("lie", "strang-euler") else STEPS
    errors = np.array([np.abs(solve(problem, method, m) - exact).max() for m in steps])
    orders = np.log2(errors[:-1] / errors[1:])
    order, tolerance = EXPECTED[method]
    # the last two halvings are in the asymptotic range
    assert np.all(np.abs(orders[-2:] - order) <= tolerance), orders


@pytest.mark.parametrize("norm", ["pre", "none"])
@pytest.mark.parametrize(
    ("method", "order"), [("lie", 1.0), ("strang-rk2-ambient", 2.0), ("ambient-rk4", 4.0)]
)
def test_without_a_projection_ambient_methods_keep_their_order(problem, norm, method, order):
    """Pre-LN and un-normalised flows have no constraint set: nothing degrades the order."""
    unconstrained = dataclasses.replace(problem, norm=norm)
    exact = problem.manufactured.state(FLOAT64, FLOAT64.asarray(2))
    errors = np.array([np.abs(solve(unconstrained, method, m) - exact).max() for m in (8, 16, 32)])
    assert np.abs(np.log2(errors[-2] / errors[-1]) - order) <= 0.1


def test_reference_of_order_eight_observes_order_eight(problem):
    """The extrapolation reference at 4 levels (order 8) on the smooth manufactured solution."""
    bk = backend("arb", 50)
    with bk.active():
        exact = bk.to_float64(problem.manufactured.state(bk, bk.asarray(2)))
    method = Extrapolation(levels=4)
    errors = np.array(
        [np.abs(bk.to_float64(solve(problem, method, m, bk)) - exact).max() for m in (2, 4, 8)]
    )
    assert np.all(np.log2(errors[:-1] / errors[1:])[-1:] >= 7.8), errors


@pytest.fixture(scope="module")
def two_norm_problem():
    """Post-LN layers whose norm1 (gain 1.4, bias 0.3) differs from norm2, the projection
    onto the manufactured solution's S1: the flow on S2 with the FFN seeing the S1 copy of
    the state, scaled by s2 / s1 (docs/limits.md section 3)."""
    problem = manufactured_post_ln(shift=4.0, norm1=(1.4, 0.3))
    star, bk = problem.manufactured, backend("float64")
    for w in problem.controls.layers:  # the shift keeps the pre-activations positive along u*
        for t in np.linspace(0, 2, 41):
            copy = 0.3 + 1.4 * star.state(bk, t)
            assert (copy @ w.w1 + w.b1).min() > 0.1
    return problem


@pytest.mark.parametrize("method", list(EXPECTED))
def test_observed_order_with_two_norms_per_layer(two_norm_problem, method):
    bk = backend("float64")
    exact = two_norm_problem.manufactured.state(bk, 2.0)
    steps = (16, 32, 64, 128, 256) if EXPECTED[method][0] < 2 else (4, 8, 16, 32, 64)
    errors = np.array([np.abs(solve(two_norm_problem, method, m, bk) - exact).max() for m in steps])
    orders = np.log2(errors[:-1] / errors[1:])
    order, tolerance = EXPECTED[method]
    assert np.all(np.abs(orders[-2:] - order) <= tolerance), orders
