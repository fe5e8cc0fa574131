"""Grid discretisation of the continuous layer (docs/model.md section 4) and its convergence."""

from __future__ import annotations

import numpy as np
import pytest

from solvers import InvalidInputError, PiecewiseControls, Problem, backend, solve
from solvers.equation.operators import attention
from solvers.io.torch_modules import torch_forward
from solvers.space.grids import Grid, attention_at, discretize, quadrature
from solvers.space.kernels import ContinuousLayer, SeriesKernel

PROBES = np.random.default_rng(0).random((2, 20))


@pytest.mark.parametrize("rule", ["trapezoid", "midpoint", "gauss-legendre"])
def test_rules_integrate_what_they_should(rule):
    nodes, weights = quadrature(rule, 8)
    assert weights.sum() == pytest.approx(1.0, abs=1e-15)
    assert np.all((nodes >= 0) & (nodes < 1))
    exact_degree = {"trapezoid": 0, "midpoint": 1, "gauss-legendre": 15}[rule]
    for degree in range(exact_degree + 1):
        assert weights @ nodes**degree == pytest.approx(1 / (degree + 1), abs=1e-14)
    # and every trigonometric polynomial of degree < n on the periodic trapezoid rule
    if rule == "trapezoid":
        assert weights @ np.cos(2 * np.pi * 7 * nodes) == pytest.approx(0, abs=1e-15)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_uniform_grid_discretisation_is_a_transformer_torch_reproduces(norm):
    grid = Grid(tokens=16, features=16, head_features=8, hidden=32)
    layer = ContinuousLayer.random(0, heads=2, scale=1 / np.sqrt(8))
    weights = discretize(layer, grid)
    f = SeriesKernel.random(np.random.default_rng(1))
    x, _ = grid.axis("tokens")
    y, _ = grid.axis("features")
    u0 = f(x[:, None], y[None, :])
    expected = torch_forward([weights], u0, norm, False)
    got = solve(Problem(u0, PiecewiseControls([weights]), 1, norm=norm))
    assert np.abs(got - expected).max() <= 1e-13 * np.abs(expected).max()


@pytest.mark.parametrize("rule", ["trapezoid", "midpoint"])
def test_probe_evaluation_is_the_discrete_operator_at_the_nodes(rule):
    grid = Grid(tokens=9, features=12, head_features=6, hidden=8, rule=rule)
    layer = ContinuousLayer.random(3, heads=2)
    f = SeriesKernel.random(np.random.default_rng(4))
    x, _ = grid.axis("tokens")
    y, _ = grid.axis("features")
    bk = backend("float64")
    weights = discretize(layer, grid)
    discrete = attention(bk, f(x[:, None], y[None, :]), weights.on(bk))
    assert np.abs(attention_at(layer, f, grid, x, y) - discrete).max() < 1e-13


def _errors(family, rule, sizes):
    layer = ContinuousLayer.random(1, heads=2, family=family)
    f = SeriesKernel.random(np.random.default_rng(2), family)
    reference = attention_at(layer, f, Grid(128, 128, 128, 8, "gauss-legendre"), *PROBES)
    return np.array(
        [
            np.abs(attention_at(layer, f, Grid(n, n, n, 8, rule), *PROBES) - reference).max()
            for n in sizes
        ]
    )


def test_trapezoid_on_periodic_data_is_spectral():
    errors = _errors("fourier", "trapezoid", (4, 8, 16, 32))
    assert errors[-1] < 1e-12
    orders = np.log2(errors[:-1] / errors[1:])
    assert orders[1] > 20  # faster than any fixed power


def test_midpoint_on_non_periodic_data_has_order_two():
    errors = _errors("legendre", "midpoint", (6, 12, 24, 48))
    assert np.all(np.abs(np.log2(errors[:-1] / errors[1:]) - 2.0) <= 0.1)


def test_gauss_legendre_is_spectral_on_non_periodic_data():
    errors = _errors("legendre", "gauss-legendre", (4, 8, 16))
    assert errors[1] < 1e-7 and errors[2] < 1e-13


def test_grids_reject_bad_sizes_and_rules():
    with pytest.raises(InvalidInputError, match="at least 2 points, got 1"):
        quadrature("midpoint", 1)
    with pytest.raises(InvalidInputError, match="unknown quadrature rule 'simpson'"):
        quadrature("simpson", 8)
    rng = np.random.default_rng(0)
    layer = discretize(ContinuousLayer.random(0), Grid(8, 8, 8, 8))
    with pytest.raises(InvalidInputError, match="feature_weights must be positive and sum to 1"):
        Problem(rng.random((4, 8)), PiecewiseControls([layer]), 1, feature_weights=np.ones(8))


@pytest.mark.parametrize("method", ["lie", "projected-rk4", "reference"])
def test_gauss_legendre_feature_grid_keeps_the_weighted_constraint(method):
    """On a non-uniform feature grid S1 is {w^y-weighted mean sigma1, variance sigma2^2}."""
    grid = Grid(6, 10, 5, 8, "gauss-legendre")
    layer = discretize(ContinuousLayer.random(0), grid)
    u0 = grid.sample(SeriesKernel.random(np.random.default_rng(1), "legendre"))
    problem = Problem(
        u0,
        PiecewiseControls([layer]),
        1,
        token_weights=grid.token_weights,
        feature_weights=grid.feature_weights,
    )
    u = solve(problem, method, 4)
    w = grid.feature_weights
    mean = (u * w).sum(-1)
    assert np.abs(mean).max() < 1e-14
    assert np.abs(((u - mean[:, None]) ** 2 * w).sum(-1) - 1).max() < 1e-14
