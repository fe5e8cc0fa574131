"""The decoder operators of docs/model.md section 7 against truths the suite did not
produce: torch's rms_norm and silu in float64, plain multi-head attention with the
key-value maps repeated, the sphere's geometry, and a 50-digit run; in every backend."""

from __future__ import annotations

import dataclasses

import flint
import mpmath
import numpy as np
import pytest
import torch

from solvers import (
    LayerWeights,
    PiecewiseControls,
    Problem,
    UndefinedOperationError,
    backend,
    solve,
)
from solvers.backends import REGISTRY
from solvers.equation.norms import rms_norm
from solvers.equation.operators import TokenLayout, attention, feed_forward
from solvers.equation.rotary import rotary_tables

FLOAT64 = backend("float64")
RNG = np.random.default_rng(31)
U = RNG.standard_normal((2, 5, 8))


def decoder_layer(seed: int = 0, **parts) -> LayerWeights:
    settings = dict(kv_heads=2, gated=True, norm_kind="rms", rope_theta=1e4, activation="silu")
    return LayerWeights.random(8, 4, 12, seed, affine=True, eps=1e-6, **(settings | parts))


@pytest.mark.parametrize("gain", [1.3, RNG.uniform(0.5, 1.5, 8)], ids=["scalar", "per-feature"])
@pytest.mark.parametrize("eps", [0.0, 1e-6])
def test_rms_norm_is_torchs(gain, eps):
    got = rms_norm(FLOAT64, U, FLOAT64.asarray(gain), FLOAT64.asarray(0.0), FLOAT64.asarray(eps))
    weight = torch.tensor(np.broadcast_to(gain, (8,)).copy())
    expected = torch.nn.functional.rms_norm(torch.tensor(U), (8,), weight, eps).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-15, atol=1e-15)


def test_rms_norm_is_the_projection_onto_its_sphere():
    """eps = 0, scalar gain g: rows land on rms = g, R is idempotent and scale invariant,
    and the residual V - R(V) is parallel to V (normal to the sphere)."""
    g = FLOAT64.asarray(1.7)

    def project(v):
        return rms_norm(FLOAT64, v, g, FLOAT64.asarray(0.0), FLOAT64.asarray(0.0))

    once = project(U)
    np.testing.assert_allclose(np.sqrt(np.mean(once**2, axis=-1)), 1.7, rtol=1e-15)
    np.testing.assert_allclose(project(once), once, rtol=5e-16, atol=0)
    np.testing.assert_allclose(project(3.5 * U), once, rtol=5e-16, atol=0)
    residual = U - once
    cross = residual[..., None, :] * U[..., :, None] - residual[..., :, None] * U[..., None, :]
    assert np.abs(cross).max() <= 1e-14
    zero = U.copy()
    zero[1, 3] = 0.0
    with pytest.raises(UndefinedOperationError, match=r"zero row: token 3 in batch entry \(1,\)"):
        project(zero)
    with_eps = rms_norm(FLOAT64, zero, g, FLOAT64.asarray(0.0), FLOAT64.asarray(1e-6))
    assert np.all(with_eps[1, 3] == 0)


def test_grouped_query_attention_is_attention_with_repeated_key_value_maps():
    """Query head h reads key-value head floor(h H_kv / H): the same operator as plain
    multi-head attention whose key and value maps are repeated over each group."""
    for kv_heads in (1, 2, 4):
        layer = decoder_layer(kv_heads=kv_heads)
        group = layer.heads // kv_heads
        assert [layer.kv_of_head(h) for h in range(layer.heads)] == [h // group for h in range(4)]
        plain = dataclasses.replace(
            layer,
            **{k: np.repeat(getattr(layer, k), group, axis=0) for k in ("wk", "bk", "wv", "bv")},
        )
        tables = rotary_tables(FLOAT64, np.arange(5.0), 1e4, 1.0, layer.d_k)
        got = attention(FLOAT64, U, layer.on(FLOAT64), TokenLayout(rotary=tables))
        expected = attention(FLOAT64, U, plain.on(FLOAT64), TokenLayout(rotary=tables))
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-15)


@pytest.mark.parametrize("activation", ["silu", "gelu"])
def test_the_gated_feed_forward_is_swiglu_and_geglu(activation):
    layer = decoder_layer(activation=activation)
    x = torch.tensor(U)
    act = torch.nn.functional.silu if activation == "silu" else torch.nn.functional.gelu

    def linear(w, b):
        return x @ torch.tensor(w) + torch.tensor(b)

    expected = (
        act(linear(layer.w_gate, layer.b_gate)) * linear(layer.w1, layer.b1)
    ) @ torch.tensor(layer.w2) + torch.tensor(layer.b2)
    got = feed_forward(FLOAT64, U, layer.on(FLOAT64))
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-14, atol=1e-15)


def test_a_rotary_layer_needs_its_tables():
    from solvers import InvalidInputError

    with pytest.raises(InvalidInputError, match="rotary tables are needed exactly for a layer"):
        attention(FLOAT64, U, decoder_layer().on(FLOAT64))


ALLOWANCE = 100
"""Unit roundoffs of each format allowed over two decoder layers (relative max-abs)."""


@pytest.fixture(scope="module")
def two_decoder_layers():
    """Two causal pre-RMSNorm layers (the second multi-query with GeGLU) and their Lie
    states at mpmath's 80 digits (more than the widest fixed format, float64x4, holds)."""
    layers = [decoder_layer(0), decoder_layer(1, kv_heads=1, activation="gelu")]
    problem = Problem(U[0], PiecewiseControls(layers), 2, norm="pre", causal=True)
    return problem, solve(problem, "lie", 1, backend("mpmath", 80))


@pytest.mark.parametrize(
    ("name", "digits"),
    [(name, 30 if factory.digits else None) for name, factory in REGISTRY.items() if name != "arb"],
)
def test_every_backend_runs_the_decoder_to_its_precision(two_decoder_layers, name, digits):
    problem, truth = two_decoder_layers
    bk = backend(name, digits)
    got = solve(problem, "lie", 1, bk)
    with mpmath.workdps(90):
        if got.dtype != object:  # the shortest decimal that round-trips, within 1/2 ulp
            got = [mpmath.mpf(np.format_float_scientific(x, unique=True)) for x in got.ravel()]
        error = max(abs(a - b) for a, b in zip(np.ravel(got), truth.ravel(), strict=True))
        size = max(abs(b) for b in truth.ravel())
    assert float(error / size) <= ALLOWANCE * bk.unit_roundoff


def test_arb_balls_of_the_decoder_contain_the_80_digit_states(two_decoder_layers):
    problem, truth = two_decoder_layers
    balls = solve(problem, "lie", 1, backend("arb", 30))
    flint.ctx.prec, before = 300, flint.ctx.prec
    try:
        assert all(
            ball.contains(flint.arb(mpmath.nstr(x, 55)))
            for ball, x in zip(balls.ravel(), truth.ravel(), strict=True)
        )
    finally:
        flint.ctx.prec = before


def test_decoder_parts_are_checked_in_one_line():
    from solvers import InvalidInputError

    layer = decoder_layer()
    cases = [
        (
            dict(wk=layer.wk[:1].repeat(3, axis=0), bk=np.zeros((3, 2))),
            "the 3 key-value heads of wk",
        ),
        (dict(w_gate=None), "b_gate was given without w_gate"),
        (dict(norm1=(1.0, 0.5)), "norm1: an RMSNorm has no bias"),
        (dict(norm_kind="batch"), "unknown norm_kind 'batch'; allowed: 'layer', 'rms'"),
        (dict(rope_theta=-1.0), "rope_theta must be > 0"),
        (dict(rope_theta=None), "rope_factor was given without rope_theta"),
        (dict(rope_factor=0.0), "rope_factor must be > 0"),
    ]
    for change, message in cases:
        if "rope_factor was given" in message:
            change |= {"rope_factor": 2.0}
        with pytest.raises(InvalidInputError, match=message):
            dataclasses.replace(layer, **change)
    odd = LayerWeights.random(6, 2, 4, 0)  # d_k = 3
    with pytest.raises(
        InvalidInputError, match="rotary positions need an even key width, got d_k=3"
    ):
        dataclasses.replace(odd, rope_theta=1e4)


def test_problems_refuse_what_the_decoder_flow_does_not_define():
    from solvers import InvalidInputError

    controls = PiecewiseControls([decoder_layer()])
    with pytest.raises(InvalidInputError, match="post-norm RMSNorm flows are not implemented"):
        Problem(U[0], controls, 1, norm="post")
    with pytest.raises(InvalidInputError, match="rotary positions, which token_maps"):
        Problem(U[0], controls, 1, norm="pre", token_maps=(np.eye(5), np.eye(5), np.eye(5)))
    with pytest.raises(InvalidInputError, match="positions"):
        Problem(U[0], controls, 1, norm="pre", positions=np.arange(4.0))


def test_positions_move_the_rotary_angles_only_by_their_differences():
    """The score of tokens x, x' depends on x' - x: shifting every position by the same
    amount leaves the decoder's flow unchanged (to rounding), scaling them does not."""
    controls = PiecewiseControls([decoder_layer(), decoder_layer(1)])
    base = Problem(U[0], controls, 2, norm="pre", causal=True)
    shifted = dataclasses.replace(base, positions=np.arange(5.0) + 7.0)
    stretched = dataclasses.replace(base, positions=2.0 * np.arange(5.0))
    reference = solve(base, "strang-rk2", 4)
    np.testing.assert_allclose(solve(shifted, "strang-rk2", 4), reference, rtol=0, atol=1e-13)
    assert np.abs(solve(stretched, "strang-rk2", 4) - reference).max() > 1e-3


def test_rotary_attention_has_a_token_grid_limit_at_physical_positions():
    """docs/model.md section 7: on a token grid refined r times, the tokens of a smooth
    u(x) sit at x = i / r in units of the original spacing. With those physical positions
    the rotary attention at the original tokens converges as r grows (the key sum is a
    Riemann sum, first order); with the refined grid's indices as positions the angle of
    the token at x grows like r x, and the operator drifts away from that limit."""
    layer = decoder_layer(kv_heads=2)
    packed = layer.on(FLOAT64)
    phases = np.linspace(0.0, 2.0, 8)

    def attended(r: int, physical: bool) -> np.ndarray:
        x = np.arange(4 * r) / r
        u = np.sin(0.7 * x[:, None] + phases) + 0.5 * np.cos(0.3 * x[:, None] * phases)
        positions = x if physical else np.arange(4.0 * r)
        tables = rotary_tables(FLOAT64, positions, 1e4, 1.0, layer.d_k)
        return attention(FLOAT64, u, packed, TokenLayout(rotary=tables))[::r]

    fine = attended(256, True)
    errors = [np.abs(attended(r, True) - fine).max() for r in (8, 16, 32)]
    assert 1.7 <= errors[0] / errors[1] <= 2.3 and 1.7 <= errors[1] / errors[2] <= 2.3, errors
    by_index = [np.abs(attended(r, False) - fine).max() for r in (8, 16, 32)]
    assert min(by_index) > 10 * errors[-1], by_index


def test_checks_that_do_not_implement_a_decoder_part_refuse_it():
    """A check written for the encoder of section 1 says so instead of comparing a decoder
    layer with an encoder that lacks its parts."""
    from properties.exactness.transformer_identity import check_lie_is_transformer
    from properties.invariants.equivariance import check_permutation_equivariance
    from solvers import InvalidInputError

    for part in ({"norm_kind": "rms"}, {"gated": True}, {"rope_theta": 1e4}, {"kv_heads": 1}):
        layer = LayerWeights.random(8, 2, 12, 1, **part)
        with pytest.raises(
            InvalidInputError, match="layer 0: the textbook encoder is not implemented"
        ):
            check_lie_is_transformer([layer], U[0], norm="pre")
    with pytest.raises(InvalidInputError, match="this layer has RMSNorm"):
        check_permutation_equivariance(
            decoder_layer(), U[0], [1, 0, 2, 3, 4], operators=["layer_norm"], norm="pre"
        )
