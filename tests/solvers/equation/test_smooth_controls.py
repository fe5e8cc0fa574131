"""SmoothControls: weights and norms that move continuously in time."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from solvers import LayerWeights, PiecewiseControls, Problem, solve, solve_reference
from solvers.equation.controls import SmoothControls
from solvers.errors import InvalidInputError


def test_constant_keyframes_are_the_piecewise_layer(rng):
    layer = LayerWeights.random(8, 2, 16, rng)
    u0 = rng.standard_normal((5, 8))
    smooth = Problem(u0, SmoothControls([layer] * 3, [0.0, 0.5, 1.0], 1), 1)
    piecewise = Problem(u0, PiecewiseControls([layer]), 1)
    for method in ("lie", "projected-rk4"):
        a, b = solve(smooth, method, 8), solve(piecewise, method, 8)
        assert np.abs(a - b).max() < 1e-13


@pytest.fixture(scope="module")
def moving():
    """Keyframes whose norms (sigma2, sigma1) move from (1, 0) through (1.5, 0.3) to (0.8, -0.2)."""
    rng = np.random.default_rng(5)
    frames = [
        dataclasses.replace(
            LayerWeights.random(5, 1, 6, rng, weight_scale=0.7), norm1=norm, norm2=norm
        )
        for norm in ((1.0, 0.0), (1.5, 0.3), (0.8, -0.2))
    ]
    frames = [dataclasses.replace(w, b1=w.b1 + 3.0) for w in frames]  # no ReLU kink
    controls = SmoothControls(frames, [0.0, 0.5, 1.0], 1)
    return Problem(rng.standard_normal((3, 5)), controls, 1, norm="post")


def test_post_ln_flow_follows_the_moving_constraint_set(moving):
    solution = solve_reference(moving)
    reference = solution.states[-1]
    # at t = 1 the set is S1(sigma1 = -0.2, sigma2 = 0.8)
    assert np.allclose(reference.mean(-1), -0.2, rtol=0, atol=1e-14)
    assert np.allclose(reference.std(-1), 0.8, rtol=0, atol=1e-14)
    assert solution.error[-1] < 1e-10  # far below the errors measured against it
    for method, order in (("lie", 1), ("strang-rk2", 2), ("projected-rk4", 4)):
        errors = [np.abs(solve(moving, method, m) - reference).max() for m in (8, 16, 32)]
        assert abs(np.log2(errors[-2] / errors[-1]) - order) <= 0.15, (method, errors)


def test_smooth_controls_reject(rng):
    a = LayerWeights.random(8, 2, 16, rng)
    with pytest.raises(InvalidInputError, match="keyframe 1 differs from keyframe 0"):
        SmoothControls([a, LayerWeights.random(8, 4, 16, rng)], [0, 1], 1)
    with pytest.raises(InvalidInputError, match="2 keyframes need as many times, got 3"):
        SmoothControls([a, a], [0, 1, 2], 1)
    with pytest.raises(InvalidInputError, match="keyframe times must be distinct"):
        SmoothControls([a, a], [1, 1], 1)
    with pytest.raises(InvalidInputError, match="horizon must be a positive integer, got 0"):
        SmoothControls([a], [0], 0)
