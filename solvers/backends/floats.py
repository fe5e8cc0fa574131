"""IEEE float backends computed natively by numpy (float32, float64).

Every operation rounds to the format as numpy (and BLAS for matrix products) does; no
wider accumulation is imposed.
"""

from __future__ import annotations

import numpy as np

from solvers.backends.base import Array, Backend


class NativeFloatBackend(Backend):
    """A numpy float dtype whose arithmetic numpy and BLAS perform natively."""

    def __init__(self, name: str, dtype: type[np.floating]) -> None:
        self.name = name
        self.dtype = np.dtype(dtype)
        self.unit_roundoff = float(np.finfo(self.dtype).eps) / 2

    def asarray(self, value: object) -> Array:
        return np.asarray(value, dtype=self.dtype)

    def to_float64(self, value: Array) -> np.ndarray:
        return np.asarray(value, dtype=np.float64)

    def to_output(self, value: Array) -> np.ndarray:
        return np.asarray(value, dtype=self.dtype)

    def matmul(self, a: Array, b: Array) -> Array:
        return np.matmul(a, b)

    def exp(self, a: Array) -> Array:
        return np.exp(a)

    def sqrt(self, a: Array) -> Array:
        return np.sqrt(a)

    def relu_(self, a: Array) -> Array:
        return np.maximum(a, 0, out=a)

    def amax(self, a: Array, axis: int) -> Array:
        return np.max(a, axis=axis, keepdims=True)

    def sum(self, a: Array, axis: int) -> Array:
        return np.sum(a, axis=axis, keepdims=True)

    def softmax_(self, scores: Array) -> Array:
        """Row softmax (the base formula) with exp evaluated in place."""
        scores -= np.max(scores, axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= np.sum(scores, axis=-1, keepdims=True)
        return scores
