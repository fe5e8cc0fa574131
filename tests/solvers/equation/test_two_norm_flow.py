"""A torch post-LN stack whose two scalar norms differ (eps = 0, GELU) against its flow on S2,
u_t = Pi_T(u)[A(u) + (s2 / s1) F(P1(u))] (docs/limits.md section 3), solved independently:
torch's own modules evaluate A, F and the norms, Pi_T is written out here, and scipy's
DOP853 integrates each layer from P2 of the state at its start."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from convergence.order import OrderVerdict, estimate_order
from solvers import PiecewiseControls, Problem, backend, from_torch, solve
from solvers.io.torch_modules import torch_norm_placement

torch = pytest.importorskip("torch")

D, HEADS, D_FF, TOKENS, LAYERS = 8, 2, 16, 5, 2
NORMS = [((1.3, 0.2), (0.7, -0.1)), ((0.8, -0.3), (1.25, 0.4))]
"""Per layer: (gain, bias) of norm1 and of norm2, each one number broadcast over features."""


def post_ln_encoder(activation: str = "gelu") -> torch.nn.TransformerEncoder:
    """The torch stack: eps = 0, the scalar norms NORMS, seeded weights."""
    rng = np.random.default_rng(7)
    layer = torch.nn.TransformerEncoderLayer(
        D,
        HEADS,
        D_FF,
        dropout=0.0,
        activation=activation,
        layer_norm_eps=0.0,
        batch_first=True,
        norm_first=False,
        dtype=torch.float64,
    )
    stack = torch.nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
    with torch.no_grad():
        for name, parameter in stack.named_parameters():
            n = int(name.split(".")[1])
            if ".norm" in name:
                which = 0 if ".norm1." in name else 1
                value = NORMS[n][which][0 if name.endswith("weight") else 1]
                parameter.fill_(value)
            elif parameter.ndim == 2:
                shape = tuple(parameter.shape)
                values = 0.6 * rng.standard_normal(shape) / np.sqrt(shape[1])
                parameter.copy_(torch.tensor(values))
            else:
                parameter.copy_(torch.tensor(0.1 * rng.standard_normal(tuple(parameter.shape))))
    return stack.eval()


@pytest.fixture(scope="module")
def encoder():
    return post_ln_encoder()


@pytest.fixture(scope="module")
def u0():
    return np.random.default_rng(3).standard_normal((TOKENS, D))


def _tangent(u: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Pi_T(u) g row by row: remove the mean, then the part along u_i - mean(u_i)."""
    g = g - g.mean(axis=-1, keepdims=True)
    w = u - u.mean(axis=-1, keepdims=True)
    return g - (g * w).sum(axis=-1, keepdims=True) / (w * w).sum(axis=-1, keepdims=True) * w


def flow_solution(encoder, u0: np.ndarray) -> np.ndarray:
    """u(L) of the flow on S2, layer by layer, by DOP853 at rtol = atol = 1e-13 (its error
    control steps through the ReLU kinks of a relu stack by rejection)."""
    u = torch.tensor(u0[None])
    with torch.no_grad():
        for n, layer in enumerate(encoder.layers):
            ratio = NORMS[n][1][0] / NORMS[n][0][0]

            def field(_t, y, layer=layer, ratio=ratio):
                x = torch.tensor(y.reshape(1, TOKENS, D))
                attention = layer.self_attn(x, x, x, need_weights=False)[0]
                ffn = layer.linear2(layer.activation(layer.linear1(layer.norm1(x))))
                g = (attention + ratio * ffn).numpy()[0]
                return _tangent(y.reshape(TOKENS, D), g).ravel()

            start = layer.norm2(u).numpy()[0].ravel()
            run = solve_ivp(field, (0, 1), start, method="DOP853", rtol=1e-13, atol=1e-13)
            assert run.success
            u = torch.tensor(run.y[:, -1].reshape(1, TOKENS, D))
    return u.numpy()[0]


@pytest.fixture(scope="module")
def problem_and_truth(encoder, u0):
    layers = from_torch(encoder)
    assert all(not np.array_equal(w.norm1[0], w.norm2[0]) for w in layers)
    norm = torch_norm_placement(encoder)
    problem = Problem(u0, PiecewiseControls(layers), LAYERS, norm=norm)
    return problem, flow_solution(encoder, u0)


def test_projected_rk4_solves_the_two_norm_flow(problem_and_truth):
    problem, truth = problem_and_truth
    steps = (8, 16, 32, 64)
    errors = [np.abs(solve(problem, "projected-rk4", m) - truth).max() for m in steps]
    assert errors[-1] <= 1e-9
    estimate = estimate_order([1 / m for m in steps], errors, expected=4.0)
    assert estimate.verdict == OrderVerdict.PASS, estimate


def test_the_refined_transformer_converges_to_it_at_order_one(problem_and_truth):
    problem, truth = problem_and_truth
    steps = (16, 32, 64, 128, 256)
    errors = [np.abs(solve(problem, "lie", m) - truth).max() for m in steps]
    estimate = estimate_order([1 / m for m in steps], errors, expected=1.0)
    assert estimate.verdict == OrderVerdict.PASS, estimate
    assert abs(estimate.order - 1) <= 0.1, estimate


def test_the_transformer_itself_is_torch(encoder, problem_and_truth, u0):
    """At dt = 1 the same layers are the torch stack (the flow's rescaled FFN is not the
    Transformer's step)."""
    problem, _ = problem_and_truth
    with torch.no_grad():
        expected = encoder(torch.tensor(u0[None])).numpy()[0]
    assert np.abs(solve(problem, "lie", 1) - expected).max() <= 1e-13 * np.abs(expected).max()


def test_the_reference_steps_to_the_relu_kinks_of_the_two_norm_flow(u0):
    """With relu the field has kinks where a hidden pre-activation of the FFN on the S1
    copy crosses zero; the reference locates them and keeps its accuracy."""
    encoder = post_ln_encoder("relu")
    truth = flow_solution(encoder, u0)
    problem = Problem(u0, PiecewiseControls(from_torch(encoder)), LAYERS, norm="post")
    assert np.abs(solve(problem, "extrapolation", 2) - truth).max() <= 1e-10
    without = np.abs(solve(problem, "extrapolation-no-events", 2) - truth).max()
    assert without > 1e3 * np.abs(solve(problem, "extrapolation", 2) - truth).max()


@pytest.mark.parametrize("precision", [("mpmath", 30), ("arb", 30), ("float32", None)])
def test_every_backend_solves_the_two_norm_flow(problem_and_truth, precision):
    """The same scheme in another number system agrees with float64 to that system's
    rounding (projected RK4, 8 steps per unit)."""
    problem, _ = problem_and_truth
    bk = backend(*precision)
    other = bk.to_float64(solve(problem, "projected-rk4", 8, bk))
    reference = solve(problem, "projected-rk4", 8)
    tolerance = max(1e-13, 1e3 * bk.unit_roundoff)
    assert np.abs(other - reference).max() <= tolerance * np.abs(reference).max()
