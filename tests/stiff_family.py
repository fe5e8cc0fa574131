"""The stiff family: two layers of random attention whose FFN is linear and damped, with
eigenvalues from -1 to -STIFFNESS (tests/solvers/reference/test_solve_reference.py checks the
reference on it against scipy's Radau; benchmarks/test_reference_stiff.py times it)."""

from __future__ import annotations

import dataclasses

import numpy as np

from solvers import LayerWeights, PiecewiseControls, Problem

STIFFNESS = 80.0
SHIFT = 100.0  # keeps U + SHIFT > 0: the ReLU never switches and the FFN is linear


def damped_layer(seed: int) -> LayerWeights:
    """Random attention and the linear FFN F(U) = -U K, K with eigenvalues 1 .. 80,
    written as relu(U + SHIFT) (-K) + SHIFT K (the ReLU never switches)."""
    rng = np.random.default_rng(seed)
    layer = LayerWeights.random(4, 2, 4, rng)
    q, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    damping = q @ np.diag(np.linspace(1.0, STIFFNESS, 4)) @ q.T
    return dataclasses.replace(
        layer, w1=np.eye(4), b1=np.full(4, SHIFT), w2=-damping, b2=SHIFT * damping.sum(0)
    )


def stiff_problem(norm: str) -> Problem:
    """Two damped layers on 3 tokens of width 4, with the norm placement `norm`."""
    layers = [damped_layer(seed) for seed in range(2)]
    u0 = np.random.default_rng(9).standard_normal((3, 4))
    return Problem(u0, PiecewiseControls(layers), 2, norm=norm)
