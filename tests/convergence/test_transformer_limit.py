"""The distance of a torch-built Transformer from its time-step limit, against weight scale."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from convergence.order import OrderVerdict
from convergence.transformer_limit import transformer_limit_distance
from solvers import (
    InvalidInputError,
    PiecewiseControls,
    Problem,
    UndefinedOperationError,
    solve,
)
from solvers.io.torch_modules import from_torch, torch_forward, torch_norm_placement
from tests.convergence.round_trip import round_trip
from tests.torch_models import random_torch_encoder

SMALL = [2.0**-k for k in range(9, 4, -1)]  # where the distance is in its asymptotic range
SCALES = [1 / 8, 1 / 2, 2]


@pytest.fixture(scope="module")
def encoder():
    return random_torch_encoder(4, 2, 8, layers=2, seed=3)


@pytest.fixture(scope="module")
def u0():
    return np.random.default_rng(3).standard_normal((3, 4))


def test_the_transformer_side_is_torch_itself(encoder, u0):
    layers = [w.scaled(0.5) for w in from_torch(encoder)]
    transformer = torch_forward(layers, u0, torch_norm_placement(encoder))
    lie = solve(Problem(u0, PiecewiseControls(layers), len(layers)), "lie", 1)
    assert np.abs(transformer - lie).max() < 1e-13


@pytest.mark.parametrize(
    ("on_the_set", "order"), [(False, 1.0), (True, 2.0)], ids=["raw-input", "input-on-S1"]
)
def test_distance_is_first_order_in_the_weights_off_the_set_and_second_on_it(
    encoder, u0, on_the_set, order
):
    if on_the_set:
        u0 = (u0 - u0.mean(-1, keepdims=True)) / u0.std(-1, keepdims=True)
    result = transformer_limit_distance(
        from_torch(encoder), u0, SMALL, norm=torch_norm_placement(encoder), expected=order
    )
    assert result.growth.verdict == OrderVerdict.PASS, result.growth
    assert result.growth.order == pytest.approx(order, abs=0.1)
    # every distance lies far above the limit's own error
    assert max(result.reference_error) < 1e-3 * min(result.distance)
    assert len(result.distance_per_layer[0]) == 3 and result.distance_per_layer[0][0] == 0
    round_trip(result)


def test_large_weights_saturate_at_the_size_of_the_constraint_set(encoder, u0):
    result = transformer_limit_distance(from_torch(encoder), u0, SCALES, norm="post")
    assert all(np.diff(result.distance) > 0)
    # two points of S1 (mean 0, variance 1 rows of d = 4) are at most 2 sqrt(4) apart
    assert result.distance[-1] <= 4
    assert result.relative_frobenius[-1] > 0.3


def test_affine_norms_have_no_limit_to_measure_against(u0):
    layers = from_torch(random_torch_encoder(4, 2, 8, layers=2, seed=3, affine=True))
    with pytest.raises(UndefinedOperationError, match="per-feature gain or bias"):
        transformer_limit_distance(layers, u0, SCALES[:3], norm="post")


def test_bad_input(encoder, u0):
    layers = from_torch(encoder)
    with pytest.raises(InvalidInputError, match="at least 3 positive numbers"):
        transformer_limit_distance(layers, u0, [0.5, -1.0, 2.0], norm="post")
    with pytest.raises(InvalidInputError, match="distinct"):
        transformer_limit_distance(layers, u0, [0.5, 0.5, 2.0], norm="post")
    with pytest.raises(TypeError, match="norm"):  # no default placement to misread pre-LN
        transformer_limit_distance(layers, u0, SCALES)
    with pytest.raises(InvalidInputError, match="factor must be > 0"):
        dataclasses.replace(layers[0]).scaled(0.0)


def test_two_different_scalar_norms_have_a_limit_to_measure_against(u0):
    """A trained post-LN layer has norm1 != norm2: its limit is the flow on S2 (docs/limits.md
    section 3), and the distance still vanishes with the weights, at order 1 from a raw
    input."""
    layers = [
        dataclasses.replace(w, norm1=(1.3, 0.2), norm2=(0.8, -0.1), eps=0.0)
        for w in from_torch(random_torch_encoder(4, 2, 8, layers=2, seed=3))
    ]
    result = transformer_limit_distance(layers, u0, SMALL, norm="post", expected=1.0)
    assert result.growth.verdict == OrderVerdict.PASS, result.growth
    assert max(result.reference_error) < 1e-3 * min(result.distance)


def test_the_placement_read_from_a_pre_ln_encoder_changes_the_answer(u0):
    """The same weights as a pre-LN and as a post-LN network are different networks."""
    encoder = random_torch_encoder(4, 2, 8, layers=2, seed=3, norm_first=True)
    layers = from_torch(encoder)
    pre = transformer_limit_distance(layers, u0, SCALES, norm=torch_norm_placement(encoder))
    post = transformer_limit_distance(layers, u0, SCALES, norm="post")
    assert abs(pre.relative_frobenius[-1] - post.relative_frobenius[-1]) > 0.05
