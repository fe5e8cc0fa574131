"""Seeded data of the vision experiments: token fields on the 2-D token domain, GELU
layers, and the time-step schemes with their expected orders.

The flow grid studies start from token fields whose spread over the features stays away
from zero (pre-LN is steep near constant rows, convergence.grid_2d).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from solvers import LayerWeights

SCHEMES = ("lie", "strang-rk2", "projected-rk4")
"""The schemes of the vision time-step studies (judged at their orders, SteppingMethod.order)."""
SPREAD_BASE = np.array([1.0, -1.0, 0.5, -0.5])
FLOW_PERTURBATION = 0.1
"""The flow grid data are SPREAD_BASE (feature spread sqrt(5/8) = 0.79) plus 0.1 times a
field of size <= e (<= 1 for the CvT's): the spread is a seminorm, so every row's spread
stays above 0.79 - 0.28 = 0.51 at t = 0."""


def smooth_2d(x: np.ndarray) -> np.ndarray:
    """A smooth, non-periodic state of the 2-D token variable (4 channels)."""
    return np.stack(
        [
            np.exp(x[:, 0]) * np.cos(1.3 * x[:, 1]),
            x[:, 0] * x[:, 1],
            np.sin(2.1 * x[:, 0] + 0.4),
            np.cos(x[:, 1] ** 2),
        ],
        1,
    )


def spread_2d(x: np.ndarray) -> np.ndarray:
    """smooth_2d around rows of feature spread away from zero: the ViT flow grid data."""
    return SPREAD_BASE + FLOW_PERTURBATION * smooth_2d(x)


def periodic_data(rng: np.random.Generator, d: int) -> Callable[[np.ndarray], np.ndarray]:
    """A seeded trigonometric polynomial T^2 -> R^d, each channel at most 1 in size."""
    waves = np.array([[1, 0], [0, 1], [1, 2]])
    amplitude, phase = rng.standard_normal((d, 3)), rng.uniform(0, 2 * np.pi, (d, 3))
    amplitude /= np.abs(amplitude).sum(axis=1, keepdims=True)

    def data(x: np.ndarray) -> np.ndarray:
        angle = 2 * np.pi * (x @ waves.T)
        return np.stack(
            [(amplitude[c] * np.cos(angle + phase[c])).sum(axis=1) for c in range(d)], 1
        )

    return data


def gelu_layers(
    rng: np.random.Generator, d: int, heads: int, count: int, weight_scale: float
) -> list[LayerWeights]:
    """Pre-LN GELU layers with torch-style norms (eps 1e-6), d_ff = 4d."""
    return [
        dataclasses.replace(
            LayerWeights.random(
                d, heads, 4 * d, rng, weight_scale=weight_scale, affine=True, eps=1e-6
            ),
            activation="gelu",
        )
        for _ in range(count)
    ]
