"""A flow whose attention switches keys within a tiny fraction of a step: two gated ReLU
layers without norms whose state grows, so that the scores grow with its square
(docs/schemes.md section 7, "The softmax's reach"). Used by
tests/solvers/reference/test_softmax_reach.py and benchmarks/reference_figures.py."""

from __future__ import annotations

import numpy as np

from solvers import LayerWeights, PiecewiseControls, Problem


def growing_gated_flow() -> Problem:
    """Two gated ReLU layers without norms (d 4, d_ff 8, 3 tokens, seed 1, after two unused
    draws of layers): the state grows to |u| of about 160, the scores to about 3000, and
    rows of the softmax switch keys within about 1e-5 of time."""
    rng = np.random.default_rng(1)
    for _ in range(2):
        LayerWeights.random(4, 2, 8, rng, bias_scale=0.5)
    layers = [LayerWeights.random(4, 2, 8, rng, gated=True, bias_scale=0.5) for _ in range(2)]
    return Problem(rng.standard_normal((3, 4)), PiecewiseControls(layers), 2, norm="none")
