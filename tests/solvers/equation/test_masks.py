"""Padding masks (docs/model.md section 6): the token measure restricted to the real tokens.
The truth is the same flow on fewer tokens: each padded input solved without its padding."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from solvers import LayerWeights, PiecewiseControls, Problem, solve, solve_reference
from solvers.errors import InvalidInputError
from solvers.solving import METHODS
from tests.precisions import ALL_PRECISIONS

MASK = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 0]])
"""Right padding, none, and padding on both sides (a causal mask then leaves the first
masked tokens nothing real to see: they see themselves)."""


def _problem(rng, norm, causal, activation="gelu", mask=MASK, layers=2, d_ff=12):
    weights = [LayerWeights.random(6, 2, d_ff, rng, activation=activation) for _ in range(layers)]
    u0 = rng.standard_normal((len(MASK), MASK.shape[1], 6))
    return Problem(u0, PiecewiseControls(weights), layers, norm=norm, causal=causal, mask=mask)


def _unpadded(problem, b):
    real = problem.mask[b]
    return Problem(
        problem.u0[b][real],
        problem.controls,
        problem.t_final,
        norm=problem.norm,
        causal=problem.causal,
    )


def _masked_error(problem, method, steps, precision="float64"):
    """max over the batch of |padded solve - unpadded solve| on the real tokens."""
    padded = np.asarray(solve(problem, method, steps, precision), dtype=np.float64)
    return max(
        float(
            np.abs(padded[b][problem.mask[b]] - solve(_unpadded(problem, b), method, steps)).max()
        )
        for b in range(len(MASK))
    )


@pytest.mark.parametrize("method", sorted(METHODS))
@pytest.mark.parametrize(("norm", "causal"), [("post", False), ("pre", True)])
def test_every_method_solves_the_flow_on_the_real_tokens(rng, method, norm, causal):
    """Each method on a padded batch gives, at the real tokens, what it gives on each input
    without its padding: to rounding (the products differ in shape), and for the methods
    that step to ReLU kinks to their own truncation error, since the other inputs' kinks
    cut the batch's steps elsewhere (masked rows' kinks are not events)."""
    located = method.startswith("extrapolation") or method == "reference"
    problem = (
        _problem(rng, norm, causal, "relu", layers=1, d_ff=4)
        if located
        else _problem(rng, norm, causal)
    )
    steps = {"reference": 1, "extrapolation": 4}.get(method, 2)
    assert _masked_error(problem, method, steps) <= (1e-11 if located else 1e-12)


@pytest.mark.parametrize("bk", ALL_PRECISIONS, ids=repr)
def test_every_backend_honours_the_mask(rng, bk):
    """Lie at dt = 1 (the Transformer) in each number system against the unpadded float64
    solves, to that system's rounding."""
    problem = _problem(rng, "pre", True)
    unit = {"float16": 2e-2, "bfloat16": 1e-1, "float32": 1e-5}.get(bk.name, 1e-12)
    assert _masked_error(problem, "lie", 1, bk) <= unit


def test_padding_is_seen_by_nobody(rng):
    """Whatever the padded rows hold, the real rows come out bit for bit the same."""
    problem = _problem(rng, "post", False)
    other = problem.u0.copy()
    other[~problem.mask] = 100 * rng.standard_normal(other[~problem.mask].shape)
    moved = dataclasses.replace(problem, u0=other)
    real = problem.mask
    assert np.array_equal(solve(problem)[real], solve(moved)[real])
    assert not np.array_equal(solve(problem)[~real], solve(moved)[~real])


def test_a_mask_of_ones_is_no_mask(rng):
    problem = _problem(rng, "pre", True, mask=np.ones_like(MASK))
    plain = dataclasses.replace(problem, mask=None)
    assert np.array_equal(solve(problem, "strang-rk2", 2), solve(plain, "strang-rk2", 2))


@pytest.mark.parametrize(
    ("mask", "message"),
    [
        (MASK[:2], r"mask must have shape \(3, 6\), got \(2, 6\)"),
        (MASK * 2, r"mask must hold only 0 and 1, got 2 at \(0, \d\) \(\d+ such entries\)"),
        (np.where(MASK, np.nan, 0), "mask must hold only 0 and 1"),
        (np.vstack([MASK[:2], np.zeros(6, int)]), r"mask has no real token \(no 1\) in row \(2,\)"),
    ],
)
def test_bad_masks_are_refused_in_one_line(rng, mask, message):
    with pytest.raises(InvalidInputError, match=message) as refused:
        _problem(rng, "pre", False, mask=mask)
    assert "\n" not in str(refused.value)


def test_a_mask_with_token_maps_is_refused(rng):
    layers = [LayerWeights.random(d=6, heads=2, d_ff=12, rng=rng)]
    eye = np.eye(4)
    with pytest.raises(InvalidInputError, match="cannot be combined with token_maps"):
        Problem(
            rng.standard_normal((4, 6)),
            PiecewiseControls(layers),
            1,
            token_maps=(eye, eye, eye),
            mask=np.ones(4),
        )


def test_kinks_of_masked_tokens_are_not_events(rng):
    """One input with two padding rows: the reference locates exactly the kinks of the
    unpadded input (the padding's own crossings are no events) and agrees with it."""
    problem = _problem(rng, "pre", False, "relu", mask=np.array([1, 1, 1, 1, 0, 0]))
    problem = dataclasses.replace(problem, u0=problem.u0[0], mask=problem.mask)
    alone = _unpadded(dataclasses.replace(problem, u0=problem.u0[None], mask=problem.mask[None]), 0)
    padded, unpadded = solve_reference(problem), solve_reference(alone)
    assert len(unpadded.events) > 0
    assert len(padded.events) == len(unpadded.events)
    assert np.abs(padded.states[-1][problem.mask] - unpadded.states[-1]).max() <= 1e-12
