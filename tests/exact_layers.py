"""Layers whose flows are known in closed form, for tests against exact answers."""

from __future__ import annotations

import dataclasses

import numpy as np

from solvers import LayerWeights, PiecewiseControls, Problem
from solvers.equation.manufactured import ManufacturedSolution


def uniform_attention_layer(d: int, rates: tuple[float, ...], rng) -> LayerWeights:
    """Wk = 0 (uniform attention), Wv_h = a_h I, Wo_h = I, biases 0, FFN off (W2 = 0):
    u' = 1 ubar M with M = sum_h a_h I."""
    heads = len(rates)
    zeros = np.zeros
    return LayerWeights(
        wq=rng.standard_normal((heads, d, d)),
        bq=zeros((heads, d)),
        wk=zeros((heads, d, d)),
        bk=zeros((heads, d)),
        wv=np.stack([a * np.eye(d) for a in rates]),
        bv=zeros((heads, d)),
        wo=np.stack([np.eye(d)] * heads),
        bo=zeros(d),
        w1=rng.standard_normal((d, 5)),
        b1=zeros(5),
        w2=zeros((5, d)),
        b2=zeros(d),
    )


def manufactured_post_ln(shift: float = 2.5, norm1: tuple[float, float] | None = None):
    """The manufactured post-LN problem of the order tests: u* on S1 of 5 tokens and 6
    features, two seeded layers (weight scale 0.7) whose FFN bias is shifted by `shift` so
    that no pre-activation crosses zero along u* (2.5 suffices: u* W1 + b1 >= -1.96), and
    optionally a first norm (gain, bias) that differs from the second (the flow on S2)."""
    rng = np.random.default_rng(1)
    star = ManufacturedSolution(tokens=5, d=6)
    layers = [LayerWeights.random(6, 2, 8, rng, weight_scale=0.7) for _ in range(2)]
    layers = [dataclasses.replace(w, b1=w.b1 + shift) for w in layers]
    if norm1 is not None:
        layers = [dataclasses.replace(w, norm1=norm1) for w in layers]
    return Problem(star.initial(), PiecewiseControls(layers), 2, norm="post", manufactured=star)


def uniform_attention_linear_ffn(seed: int = 5, d: int = 4, tokens: int = 3) -> Problem:
    """Two uniform-attention layers (heads at rates 0.3 and -0.2) with a ReLU FFN held in
    its linear region by b1 = 50 (|u W1| stays below 10 along the flow): F(u) = u W1 W2 + c
    with c = b1 W2 + b2 of size 0.1; no norm (docs/model.md section 5)."""
    rng = np.random.default_rng(seed)
    layers = []
    for _ in range(2):
        w = uniform_attention_layer(d, (0.3, -0.2), rng)
        w1, w2 = rng.standard_normal((d, 5)), 0.3 * rng.standard_normal((5, d))
        b1 = np.full(5, 50.0)
        b2 = -b1 @ w2 + 0.1 * rng.standard_normal(d)
        layers.append(dataclasses.replace(w, w1=w1, b1=b1, w2=w2, b2=b2))
    return Problem(rng.standard_normal((tokens, d)), PiecewiseControls(layers), 2, norm="none")
