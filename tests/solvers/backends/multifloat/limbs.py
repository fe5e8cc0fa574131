"""Test numbers for the multi-floats: leading limbs with random tails, and their exact values."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from solvers.backends.multifloat import kernels


def with_tails(heads: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """Limbs (n, *heads.shape): `heads` leading, each further limb a random fraction of half
    an ulp of the one before, renormalised by adding zero."""
    limbs = np.zeros((n, *np.shape(heads)))
    limbs[0] = heads
    for k in range(1, n):
        limbs[k] = np.spacing(np.abs(limbs[k - 1])) * rng.uniform(-0.5, 0.5, np.shape(heads))
    return kernels.binary(kernels.ADD, limbs, np.zeros_like(limbs))


def exact(limbs: np.ndarray) -> np.ndarray:
    """Each number (a column of `limbs`) as the Fraction it is, an object array."""
    out = np.empty(limbs.shape[1:], dtype=object)
    for index in np.ndindex(out.shape):
        out[index] = sum(map(Fraction, limbs[(slice(None), *index)].tolist()), Fraction(0))
    return out
