"""Rotary position embeddings (docs/model.md section 7): the tables and the rotation.

With k = d_k / 2 frequencies omega_i = theta^(-2 i / d_k) and a linear scaling factor f,
the token at position x has angles (x / f) omega_i; a head's vector q = (q', q'') (halves
of width k, the "rotate half" pairing of coordinates i and i + k) becomes

    R(x) q = (q' cos - q'' sin, q'' cos + q' sin).

The tables are computed in the backend's own arithmetic (exp, log, cos and sin at the
working precision), so a 50-digit run has 50-digit angles.
"""

from __future__ import annotations

import numpy as np

from solvers.backends import Array, Backend


def rotary_tables(
    bk: Backend, positions: np.ndarray, theta: float, factor: float, d_k: int
) -> tuple[Array, Array]:
    """(cos, sin) of the angles (x / f) omega_i, each of shape (N, d_k / 2), in bk (active),
    for the float64 token `positions` x (exact numbers), base `theta` and factor f."""
    half = d_k // 2
    exponents = bk.asarray(-2.0 * np.arange(half)) / bk.asarray(float(d_k))
    frequencies = bk.exp(exponents * bk.log(bk.asarray(theta)))
    scaled = bk.asarray(np.asarray(positions, np.float64)) / bk.asarray(factor)
    angles = scaled[:, None] * frequencies[None, :]
    return bk.cos(angles), bk.sin(angles)


def rotate(x: Array, tables: tuple[Array, Array]) -> Array:
    """R(x) applied to every row of x (..., N, d_k) with `tables` (cos, sin) of shape
    (N, d_k / 2): a fresh array."""
    cos, sin = tables
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)
