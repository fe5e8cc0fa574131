"""The dynamic-tanh norm (docs/model.md section 8): its parameters and refusals, an
independent implementation of a pre-DyT layer, every method and backend on a pre-DyT
flow, the splitting orders against the reference, float64 against mpmath, and model
files that carry it."""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle
import re

import numpy as np
import pytest
import scipy.special

from solvers import (
    InvalidInputError,
    LayerWeights,
    Model,
    PiecewiseControls,
    Problem,
    backend,
    load_model,
    save_model,
    solve,
    solve_layers,
    solve_reference,
)
from solvers.backends import convert
from solvers.equation.norms import KINDS
from solvers.network.readout import Dense, Readout
from solvers.solving import METHODS
from tests.precisions import ALL_PRECISIONS

DYT = KINDS["dyt"]
FLOAT64 = backend("float64")


def _layers(seed: int = 0, layers: int = 2, activation: str = "gelu") -> list[LayerWeights]:
    rng = np.random.default_rng(seed)
    return [
        LayerWeights.random(8, 2, 16, rng, activation=activation, norm_kind="dyt", affine=True)
        for _ in range(layers)
    ]


def _problem(seed: int = 0, layers: int = 2, activation: str = "gelu") -> Problem:
    rng = np.random.default_rng(100 + seed)
    controls = PiecewiseControls(_layers(seed, layers, activation))
    return Problem(rng.standard_normal((4, 8)), controls, float(layers), norm="pre")


def _textbook_pre_dyt(u: np.ndarray, layers: list[LayerWeights]) -> np.ndarray:
    """x <- x + MHA(DyT1(x)); x <- x + FFN(DyT2(x)) in plain numpy, from the unpacked
    per-head weights (no code of the suite's operators)."""

    def dyt(x, norm):
        gain, bias, alpha = norm
        return gain * np.tanh(alpha * x) + bias

    def gelu(z):
        return z * (1 + scipy.special.erf(z / math.sqrt(2))) / 2

    x = np.array(u, dtype=np.float64)
    for w in layers:
        y = dyt(x, w.norm1)
        heads = []
        for h in range(w.heads):
            q, k, v = (y @ m[h] + b[h] for m, b in ((w.wq, w.bq), (w.wk, w.bk), (w.wv, w.bv)))
            scores = q @ k.T / math.sqrt(w.d_k)
            weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
            weights /= weights.sum(axis=-1, keepdims=True)
            heads.append(weights @ v @ w.wo[h])
        x = x + sum(heads) + w.bo
        y = dyt(x, w.norm2)
        x = x + gelu(y @ w.w1 + w.b1) @ w.w2 + w.b2
    return x


def test_random_dyt_weights_carry_gain_bias_and_alpha():
    plain = LayerWeights.random(8, 2, 16, 0, norm_kind="dyt")
    assert plain.norm_kind is DYT
    assert [float(p) for p in plain.norm1] == [1.0, 0.0, 0.5]  # the paper's initial alpha
    affine = _layers()[0]
    gain, bias, alpha = affine.norm2
    assert gain.shape == bias.shape == (8,) and alpha.shape == () and alpha > 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"norm1": (1.0, 0.0)}, "norm1 must be a tuple (gain, bias, alpha) for a DyT"),
        ({"norm2": (1.0, 0.0, np.ones(8))}, "norm2 alpha must be a scalar"),
        ({"norm1": (1.0, 0.0, math.nan)}, "norm1 alpha must be finite"),
        ({"eps": 1e-5}, "a DyT has no eps"),
    ],
)
def test_bad_dyt_parameters_are_refused_by_name(change, message):
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        dataclasses.replace(_layers()[0], **change)


def test_post_dyt_is_refused_with_the_reason():
    controls = PiecewiseControls(_layers())
    with pytest.raises(InvalidInputError, match="DyT is not a projection"):
        Problem(np.ones((4, 8)), controls, 2.0, norm="post")


def test_the_transformer_is_the_textbook_pre_dyt_layer():
    """Lie at dt = 1 against an independent numpy loop, to float64's rounding."""
    problem = _problem()
    layers = list(problem.controls.layers)
    expected = _textbook_pre_dyt(problem.u0, layers)
    got = solve(problem, "lie", 1)
    assert np.abs(got - expected).max() <= 1e-13 * np.abs(expected).max()


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_method_solves_a_pre_dyt_flow(method):
    """Each method at 32 steps per unit is within its order's reach of the reference: the
    pre-DyT field is smooth, so no method is capped."""
    problem = _problem(layers=1)
    reference = solve_reference(problem, 1e-12).states[-1]
    got = solve(problem, method, 32)
    assert np.all(np.isfinite(got))
    assert np.abs(got - reference).max() <= 0.05 * np.abs(reference).max()


@pytest.mark.parametrize("bk", ALL_PRECISIONS, ids=repr)
@pytest.mark.parametrize("method", ["lie", "strang-rk2"])
def test_every_backend_solves_a_pre_dyt_flow(bk, method):
    """Each number system's run is float64's to its own rounding (a few hundred units of
    its unit roundoff on this two-layer flow at 4 steps per unit)."""
    problem = _problem()
    expected = solve(problem, method, 4)
    got = bk.to_float64(np.asarray(solve(problem, method, 4, bk)))
    allowance = 500 * max(bk.unit_roundoff, FLOAT64.unit_roundoff)
    assert np.abs(got - expected).max() <= allowance * np.abs(expected).max()


ORDERS = {"lie": 0.1, "strang-rk2": 0.15}
"""The allowances around each method's order (SteppingMethod.order: 1 and 2 on a smooth
pre-norm field)."""
STEPS = (8, 16, 32, 64, 128)


@pytest.fixture(scope="module")
def orders() -> dict[str, np.ndarray]:
    problem = _problem(seed=3)
    reference = solve_reference(problem, 1e-13).states[-1]
    measured = {}
    for method in ORDERS:
        errors = np.array([np.abs(solve(problem, method, m) - reference).max() for m in STEPS])
        measured[method] = np.log2(errors[:-1] / errors[1:])
    return measured


@pytest.mark.parametrize("method", sorted(ORDERS))
def test_splittings_keep_their_orders_on_a_pre_dyt_flow(orders, method):
    order, tolerance = METHODS[method].order("pre"), ORDERS[method]
    observed = orders[method]
    assert observed.size == len(STEPS) - 1
    assert np.all(np.abs(observed[-2:] - order) <= tolerance), observed


def test_float64_is_mpmath_30_at_dt_1():
    problem = _problem(seed=5, layers=3)
    exact = backend("mpmath", 30)
    wide = exact.to_float64(solve_layers(problem, "lie", 1, exact))
    got = solve_layers(problem, "lie", 1)
    assert np.abs(got - wide).max() <= 1e-13 * np.abs(wide).max()


def test_tanh_is_within_two_units_of_mpmath_at_twice_the_digits():
    """Relative error of every backend's tanh on tiny, moderate, saturated and negative
    arguments, against mpmath at twice the format's digits (at least 40), each input and
    output converted exactly."""
    points = np.array([-20.0, -3.0, -0.55, -1e-3, -1e-7, 1e-7, 0.3, 1.0, 2.5, 9.0, 19.0])
    for bk in ALL_PRECISIONS:
        wide = backend("mpmath", max(40, 2 * (bk.digits or 0)))
        with bk.active():
            inputs = bk.asarray(points)
            values = bk.tanh(inputs)
        x, y = convert(inputs, bk, wide), convert(values, bk, wide)
        with wide.active():
            relative = wide.to_float64(abs((y - wide.tanh(x)) / wide.tanh(x)))
        assert np.all(relative <= 2 * bk.unit_roundoff), (bk, relative / bk.unit_roundoff)


def test_model_files_carry_dyt_layers_and_a_dyt_readout(tmp_path):
    """save_model then load_model gives the same layers, alpha included, and the same
    decisions from a final DyT norm."""
    layers = tuple(_layers())
    rng = np.random.default_rng(7)
    final = (rng.uniform(0.5, 2, 8), rng.standard_normal(8), 0.8, 0.0)
    readout = Readout(final, "mean", (Dense(rng.standard_normal((8, 3)), np.zeros(3)),), "dyt")
    model = Model(layers, "pre", readout=readout)
    loaded = load_model(save_model(model, tmp_path / "dyt.safetensors"))
    for a, b in zip(model.layers, loaded.layers, strict=True):
        assert b.norm_kind is DYT
        assert all(
            np.array_equal(x, y) for x, y in zip(a.norm1 + a.norm2, b.norm1 + b.norm2, strict=True)
        )
    states = rng.standard_normal((2, 4, 8))
    assert np.array_equal(model.readout(states), loaded.readout(states))


def test_a_pickled_or_copied_kind_is_the_registered_one():
    """Weights sent to a worker or deep-copied keep the registry's kind objects."""
    layer = _layers()[0]
    for copied in (pickle.loads(pickle.dumps(layer)), copy.deepcopy(layer)):
        assert copied.norm_kind is DYT
