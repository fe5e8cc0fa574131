"""Refined Lie steps against the exact uniform-attention solution (docs/model.md section 5).

With Wk = 0 and bk = 0 every score row is constant, so attention is the token mean
ubar Wv Wo (zero biases); with the FFN switched off (W2 = 0, b2 = 0) and no norm,
ubar(t) = ubar(0) expm(t M), M = sum_h Wv_h Wo_h, and u_i - ubar is constant in time.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import expm

from solvers import LayerWeights, PiecewiseControls, Problem, solve


def _uniform_attention_layer(d: int, heads: int, rng: np.random.Generator) -> LayerWeights:
    w = LayerWeights.random(d, heads, 2 * d, rng, weight_scale=0.5)
    zero = np.zeros
    return LayerWeights(
        wq=w.wq,
        bq=w.bq,
        wk=zero(w.wk.shape),
        bk=zero(w.bk.shape),
        wv=w.wv,
        bv=zero(w.bv.shape),
        wo=w.wo,
        bo=zero(d),
        w1=w.w1,
        b1=w.b1,
        w2=zero(w.w2.shape),
        b2=zero(d),
    )


def _exact(u0: np.ndarray, layers: list[LayerWeights], t_final: float) -> np.ndarray:
    mean = u0.mean(axis=-2, keepdims=True)
    for n, w in enumerate(layers):
        length = min(t_final, n + 1) - n
        if length <= 0:
            break
        mean = mean @ expm(length * np.einsum("hij,hjk->ik", w.wv, w.wo))
    return u0 - u0.mean(axis=-2, keepdims=True) + mean


@pytest.mark.parametrize("t_final", [3.0, 2.5])
def test_refined_lie_converges_at_order_one_to_the_exact_solution(rng, t_final):
    layers = [_uniform_attention_layer(8, 2, rng) for _ in range(3)]
    u0 = rng.standard_normal((2, 5, 8))
    problem = Problem(u0, PiecewiseControls(layers), t_final, norm="none")
    exact = _exact(u0, layers, t_final)
    errors = [np.abs(solve(problem, steps_per_unit=m) - exact).max() for m in (16, 32, 64, 128)]
    ratios = np.array(errors[:-1]) / np.array(errors[1:])
    assert np.all(np.abs(np.log2(ratios) - 1.0) < 0.05), errors
    # the token deviations from the mean are invariant: exact to rounding at any step size
    got = solve(problem, steps_per_unit=3)
    deviation = got - got.mean(axis=-2, keepdims=True)
    assert np.abs(deviation - (u0 - u0.mean(axis=-2, keepdims=True))).max() < 1e-13


def test_partial_final_layer_takes_equal_steps_to_t_final(rng):
    layers = [LayerWeights.random(8, 2, 16, rng) for _ in range(2)]
    u0 = rng.standard_normal((4, 8))
    half = solve(Problem(u0, PiecewiseControls(layers), 1.5, norm="pre"), steps_per_unit=4)
    # by hand: four steps of 1/4 in layer 0, then two steps of 1/4 in layer 1
    from solvers import backend
    from solvers.methods.transformer_layer import lie_step

    bk = backend("float64")
    u = u0
    for layer, steps in ((layers[0], 4), (layers[1], 2)):
        for _ in range(steps):
            u = lie_step(bk, u, layer, 0.25, "pre")
    assert np.array_equal(half, u)
