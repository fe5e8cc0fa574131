"""Layers whose flows are known in closed form, for tests against exact answers."""

from __future__ import annotations

import numpy as np

from solvers import LayerWeights


def uniform_attention_layer(d: int, rates: tuple[float, ...], rng) -> LayerWeights:
    """Wk = 0 (uniform attention), Wv_h = a_h I, Wo_h = I, biases 0, FFN off (W2 = 0):
    u' = 1 ubar M with M = sum_h a_h I."""
    heads = len(rates)
    zeros = np.zeros
    return LayerWeights(
        wq=rng.standard_normal((heads, d, d)), bq=zeros((heads, d)),
        wk=zeros((heads, d, d)), bk=zeros((heads, d)),
        wv=np.stack([a * np.eye(d) for a in rates]), bv=zeros((heads, d)),
        wo=np.stack([np.eye(d)] * heads), bo=zeros(d),
        w1=rng.standard_normal((d, 5)), b1=zeros(5), w2=zeros((5, d)), b2=zeros(d),
    )  # fmt: skip
