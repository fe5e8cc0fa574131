"""The spread's bounds (solvers.enclosure.bounds) against numpy's eigenvalues: the
logarithmic Euclidean norm bound lies above lambda_max((J + J^T) / 2) for every matrix
sampled from a ball matrix, and within rounding of it for a point matrix; the Euclidean
radius bounds the radii's 2-norm."""

from __future__ import annotations

import flint
import numpy as np
import pytest

from solvers import backend
from solvers.enclosure.bounds import euclidean_radius, log_norm_bound

ARB = backend("arb", 30)
"""The working precision of an enclosure (bounds run inside its active context)."""


def _balls(middle: np.ndarray, radius: np.ndarray) -> np.ndarray:
    balls = np.empty(middle.shape, dtype=object)
    for index in np.ndindex(middle.shape):
        balls[index] = flint.arb(middle[index], radius[index])
    return balls


def _mu2(matrix: np.ndarray) -> float:
    return float(np.linalg.eigvalsh((matrix + matrix.T) / 2).max())


def test_a_point_matrix_gets_its_log_norm_to_rounding():
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.standard_normal((12, 12)))
    matrix = q @ np.diag(np.linspace(-3, 1.5, 12)) @ q.T + 2 * np.triu(
        rng.standard_normal((12, 12))
    )
    with ARB.active():
        bound = log_norm_bound(_balls(matrix, np.zeros((12, 12)))[None])
    assert _mu2(matrix) <= float(bound.upper()) < _mu2(matrix) + 1e-12
    gershgorin = max(matrix[i, i] + np.abs(matrix[i]).sum() - abs(matrix[i, i]) for i in range(12))
    assert float(bound.upper()) < gershgorin  # the infinity norm's log norm, far above


@pytest.mark.parametrize("radius", [1e-6, 0.1])
def test_every_matrix_in_the_ball_lies_below_the_bound(radius):
    rng = np.random.default_rng(1)
    middle = rng.standard_normal((2, 8, 8))
    radii = radius * rng.random((2, 8, 8))
    with ARB.active():
        bound = float(log_norm_bound(_balls(middle, radii)).upper())
    for _ in range(200):
        sample = middle + radii * rng.uniform(-1, 1, middle.shape)
        assert max(_mu2(block) for block in sample) <= bound
    assert bound <= max(_mu2(block) for block in middle) + 8 * radius


def test_the_euclidean_radius_bounds_the_radii():
    radii = np.random.default_rng(2).random((3, 4)) * 1e-20
    with ARB.active():
        bound = euclidean_radius(_balls(np.ones((3, 4)), radii))
    assert np.linalg.norm(radii) <= float(bound) < np.linalg.norm(radii) * (1 + 1e-6)
