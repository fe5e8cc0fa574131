"""The Lie scheme at dt = 1 is torch's TransformerEncoder, layer for layer.

docs/model.md section 2.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
import torch

from solvers import LayerWeights, PiecewiseControls, Problem, from_torch, solve
from solvers.io.torch_modules import to_torch, torch_forward, torch_norm_placement
from tests.torch_models import random_torch_encoder, run_encoder

GRID = list(
    itertools.product(
        (8, 32, 64),  # d
        (1, 2, 4),  # heads
        (1, 4),  # d_ff / d
        (1, 7, 33),  # tokens
        (1, 3),  # batch
        (False, True),  # norm_first
        (0.0, 1e-5),  # eps
        (False, True),  # per-feature affine
    )
)


def _case(d, heads, ff, tokens, batch, norm_first, eps, affine, dtype):
    seed = hash((d, heads, ff, tokens, batch, norm_first, eps, affine)) % 2**32
    batch_first = bool(seed % 2)  # both layouts are covered across the grid
    encoder = random_torch_encoder(
        d,
        heads,
        ff * d,
        norm_first=norm_first,
        eps=eps,
        affine=affine,
        batch_first=batch_first,
        seed=seed,
        dtype=dtype,
    )
    u0 = np.random.default_rng(seed + 1).standard_normal((batch, tokens, d))
    expected = run_encoder(encoder, u0, batch_first=batch_first)
    problem = Problem(
        u0, PiecewiseControls(from_torch(encoder)), 6, norm=torch_norm_placement(encoder)
    )
    return problem, expected


@pytest.mark.parametrize(
    "config", GRID, ids=lambda c: "d{}-h{}-ff{}-n{}-b{}-nf{}-eps{}-aff{}".format(*c)
)
def test_float64_stack_matches_torch(config):
    problem, expected = _case(*config, dtype=torch.float64)
    got = solve(problem, backend="float64")
    assert got.dtype == np.float64
    assert np.max(np.abs(got - expected)) <= 1e-13 * np.max(np.abs(expected))


@pytest.mark.parametrize(
    "config", GRID[::5], ids=lambda c: "d{}-h{}-ff{}-n{}-b{}-nf{}-eps{}-aff{}".format(*c)
)
def test_float32_stack_matches_torch(config):
    problem, expected = _case(*config, dtype=torch.float32)
    got = solve(problem, backend="float32")
    assert got.dtype == np.float32
    assert np.max(np.abs(got - expected)) <= 2e-5 * np.max(np.abs(expected))


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("convention", ["float-mask", "bool-mask", "is_causal"])
def test_causal_mask_matches_torch_conventions(norm_first, convention):
    d, heads, tokens = 16, 4, 9
    encoder = random_torch_encoder(d, heads, 2 * d, layers=3, norm_first=norm_first, seed=3)
    u0 = np.random.default_rng(4).standard_normal((2, tokens, d))
    float_mask = torch.nn.Transformer.generate_square_subsequent_mask(tokens, dtype=torch.float64)
    kwargs = {
        "float-mask": {"mask": float_mask},
        "bool-mask": {"mask": torch.ones(tokens, tokens, dtype=torch.bool).triu(1)},
        "is_causal": {"mask": float_mask, "is_causal": True},
    }[convention]
    expected = run_encoder(encoder, u0, batch_first=True, **kwargs)
    problem = Problem(
        u0,
        PiecewiseControls(from_torch(encoder)),
        3,
        norm=torch_norm_placement(encoder),
        causal=True,
    )
    got = solve(problem)
    assert np.max(np.abs(got - expected)) <= 1e-13 * np.max(np.abs(expected))
    # causality itself: the first token's output ignores every later token
    perturbed = u0.copy()
    perturbed[:, 1:] += 1.0
    moved = solve(Problem(perturbed, problem.controls, 3, norm=problem.norm, causal=True))
    assert np.array_equal(moved[:, 0], got[:, 0])


def test_single_layer_module_and_encoder_agree():
    encoder = random_torch_encoder(8, 2, 16, layers=1, seed=9)
    from_layer = from_torch(encoder.layers[0])
    from_encoder = from_torch(encoder)
    assert len(from_layer) == len(from_encoder) == 1
    for name in ("wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo", "w1", "b1", "w2", "b2"):
        assert np.array_equal(getattr(from_layer[0], name), getattr(from_encoder[0], name))


def test_an_encoder_with_a_final_norm_is_converted_as_its_message_says():
    """The final norm is not a layer of the flow: from_torch refuses the encoder, and the
    advice it gives (convert encoder.layers, apply encoder.norm to the output) gives
    torch's output."""
    from solvers import InvalidInputError

    base = random_torch_encoder(8, 2, 16, layers=2, seed=4, norm_first=True)
    final = torch.nn.LayerNorm(8, dtype=torch.float64)
    with torch.no_grad():
        final.weight.copy_(torch.linspace(0.5, 1.5, 8, dtype=torch.float64))
        final.bias.copy_(torch.linspace(-0.2, 0.3, 8, dtype=torch.float64))
    encoder = torch.nn.TransformerEncoder(
        base.layers[0], 2, norm=final, enable_nested_tensor=False
    ).eval()
    encoder.layers = base.layers
    with pytest.raises(InvalidInputError, match=r"from_torch\(encoder\.layers\)"):
        from_torch(encoder)
    u0 = np.random.default_rng(2).standard_normal((1, 5, 8))
    layers = from_torch(encoder.layers)
    norm = torch_norm_placement(encoder.layers)
    flowed = solve(Problem(u0, PiecewiseControls(layers), 2, norm=norm))
    with torch.no_grad():
        got = encoder.norm(torch.tensor(flowed)).numpy()
        expected = encoder(torch.tensor(u0)).numpy()
    assert np.max(np.abs(got - expected)) <= 1e-13 * np.max(np.abs(expected))


@pytest.mark.parametrize("activation", ["gelu-tanh", "silu"])
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_smooth_activations_go_to_torch_and_back(norm, activation):
    """GELU's tanh form (GPT-2's) and silu (the Llama family's): the Lie scheme at dt = 1 is
    torch's encoder carrying it, and from_torch reads it back."""
    rng = np.random.default_rng(4)
    layers = [
        dataclasses.replace(LayerWeights.random(8, 2, 16, rng), activation=activation)
        for _ in range(2)
    ]
    u0 = rng.standard_normal((2, 5, 8))
    expected = torch_forward(layers, u0, norm)
    got = solve(Problem(u0, PiecewiseControls(layers), 2, norm=norm), backend="float64")
    assert np.abs(got - expected).max() <= 1e-13 * np.abs(expected).max()
    assert [w.activation for w in from_torch(to_torch(layers, norm))] == [activation] * 2
