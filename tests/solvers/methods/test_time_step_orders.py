"""Observed orders of every time-stepping method on a manufactured post-LN solution.

docs/orders.md section 1: Lie 1; Strang with Euler sub-steps 1; Strang with tangent RK2 2
but ambient RK2 1; projected RK4 4 but ambient RK4 then projection 1. The manufactured
solution u* = sigma1 + sigma2 sqrt(2) cos(2 pi y + phi(x, t)) lies on S1 and the FFN bias
is shifted so that no pre-activation crosses zero along it (a smooth field). In float64
the smallest error (projected RK4 at 128 steps per unit) stays far above float64's
rounding, so the orders observed are the methods'.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import pytest

from solvers import backend, solve
from solvers.methods.extrapolation import Extrapolation
from solvers.solving import METHODS
from tests.exact_layers import manufactured_post_ln

FLOAT64 = backend("float64")
STEPS = (4, 8, 16, 32, 64, 128)
LONG_STEPS = (*STEPS, 256)  # the first-order splittings approach 1 from above, slowly
EXPECTED = {
    "lie": 0.05,
    "strang-euler": 0.1,
    "strang-rk2": 0.1,
    "strang-rk2-ambient": 0.1,
    "projected-rk4": 0.2,
    "ambient-rk4": 0.1,
}
"""The allowance around each method's order on a post-LN flow (SteppingMethod.order)."""


@pytest.fixture(scope="module")
def problem():
    return manufactured_post_ln()


@pytest.mark.parametrize("method", list(EXPECTED))
def test_observed_order(problem, method):
    exact = problem.manufactured.state(FLOAT64, FLOAT64.asarray(2))
    steps = LONG_STEPS if method in ("lie", "strang-euler") else STEPS
    errors = np.array([np.abs(solve(problem, method, m) - exact).max() for m in steps])
    orders = np.log2(errors[:-1] / errors[1:])
    order, tolerance = METHODS[method].order(problem.norm), EXPECTED[method]
    # the last two halvings are in the asymptotic range
    assert np.all(np.abs(orders[-2:] - order) <= tolerance), orders


@pytest.mark.parametrize("norm", ["pre", "none"])
@pytest.mark.parametrize("method", ["lie", "strang-rk2-ambient", "ambient-rk4"])
def test_without_a_projection_ambient_methods_keep_their_order(problem, norm, method):
    """Pre-LN and un-normalised flows have no constraint set: nothing degrades the order
    (the ambient methods' own orders, 1, 2 and 4)."""
    unconstrained = dataclasses.replace(problem, norm=norm)
    order = METHODS[method].order(norm)
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
    order, tolerance = METHODS[method].order(two_norm_problem.norm), EXPECTED[method]
    steps = (16, 32, 64, 128, 256) if order < 2 else (4, 8, 16, 32, 64)
    errors = np.array([np.abs(solve(two_norm_problem, method, m, bk) - exact).max() for m in steps])
    orders = np.log2(errors[:-1] / errors[1:])
    assert np.all(np.abs(orders[-2:] - order) <= tolerance), orders


ORDERS_PAGE = Path(__file__).resolve().parents[3] / "docs" / "orders.md"


def _expanded(cell: str) -> list[str]:
    """The method names a first cell of docs/orders.md section 1 names: parentheses
    dropped, "{a, b}" alternatives expanded, ", tangent or ambient" giving both fields."""
    cell = re.sub(r"\s*\([^)]*\)", "", cell).strip()
    both = cell.endswith(", tangent or ambient")
    cell = cell.removesuffix(", tangent or ambient")
    while (match := re.search(r"\{([^}]*)\}", cell)) is not None:
        options = [o.strip() for o in match.group(1).split(",")]
        cell = ", ".join(cell[: match.start()] + o + cell[match.end() :] for o in options)
    names = [name.strip() for name in cell.split(",")]
    return [n + suffix for n in names for suffix in ("", "-ambient")] if both else names


def _documented(cell: str, count: int) -> list[dict[str, float]]:
    """The orders a p cell states for `count` methods, each as {placement: order}: "1",
    "2, 4" (one per method), "1 post; 2 pre and none", "2 x levels (24 by default)", "none"
    (no order: infinite)."""
    if cell.startswith("none"):
        return [dict.fromkeys(("post", "pre", "none"), math.inf)] * count
    if "x levels" in cell:
        return [dict.fromkeys(("post", "pre", "none"), 24.0)] * count
    if ";" in cell:
        post, rest = cell.split(";")
        orders = {"post": float(post.split()[0])}
        orders |= dict.fromkeys(("pre", "none"), float(rest.split()[0]))
        return [orders] * count
    values = [float(v) for v in cell.split(",")]
    values = values * count if len(values) == 1 else values
    return [dict.fromkeys(("post", "pre", "none"), v) for v in values]


def test_the_orders_page_states_every_methods_declared_order():
    """Each row of docs/orders.md section 1 that names registered methods gives, for each
    placement, SteppingMethod.order; every registered method has a row."""
    section = ORDERS_PAGE.read_text().split("## 1.")[1].split("\n## ")[0]
    seen = set()
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if not line.startswith("| ") or len(cells) < 3:
            continue
        names = _expanded(cells[0])
        if not names or not all(n in METHODS for n in names):
            continue
        for name, orders in zip(names, _documented(cells[1], len(names)), strict=True):
            declared = {p: METHODS[name].order(p) for p in orders}
            assert declared == orders, (name, declared, orders)
            seen.add(name)
    assert seen == set(METHODS), sorted(set(METHODS) - seen)
