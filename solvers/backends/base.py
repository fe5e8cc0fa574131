"""The number-system protocol that every operator and scheme is written against.

A backend is to tide-suite what a context (`mp`, `fp`, `iv`) is to mpmath: the algorithm
is written once, in terms of array arithmetic (`+ - * /` with numpy broadcasting) and the
few primitives below, and runs unchanged in each number system. Nothing above the
backends branches on precision.

Primitives whose names end in an underscore work in place (torch's convention): they
overwrite their argument, which must be a fresh intermediate the caller owns. Large
temporaries are the dominant cost of the float paths, so the operators update their own
intermediates in place (`x += b`), which every backend's arrays support.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

Array = Any
"""A backend array: a numpy float array, or an object array of high-precision numbers."""


class Backend(ABC):
    """Primitives of one number system. Subclasses implement the abstract methods."""

    name: str
    unit_roundoff: float
    """u = half the distance from 1 to the next number: the relative rounding error bound."""

    @property
    def key(self) -> tuple:
        """What identifies this number system (name, and precision where it varies)."""
        return (self.name,)

    @abstractmethod
    def asarray(self, value: object) -> Array:
        """`value` (numbers or a float64 array) rounded into this number system."""

    @abstractmethod
    def to_float64(self, value: Array) -> np.ndarray:
        """Nearest float64 array, for plotting and comparison."""

    @abstractmethod
    def to_output(self, value: Array) -> np.ndarray:
        """The array `solve` returns: a float array of this precision, or an object array."""

    @abstractmethod
    def matmul(self, a: Array, b: Array) -> Array:
        """a @ b over the last two axes, with broadcasting over leading axes."""

    @abstractmethod
    def exp(self, a: Array) -> Array:
        """Elementwise exp."""

    @abstractmethod
    def sqrt(self, a: Array) -> Array:
        """Elementwise square root of a non-negative array."""

    @abstractmethod
    def relu_(self, a: Array) -> Array:
        """max(a, 0) elementwise, the projection onto the non-negative orthant, written into a."""

    @abstractmethod
    def amax(self, a: Array, axis: int) -> Array:
        """Maximum along `axis`, keeping the axis."""

    @abstractmethod
    def sum(self, a: Array, axis: int) -> Array:
        """Sum along `axis`, keeping the axis."""

    def softmax_(self, scores: Array) -> Array:
        """Row softmax over the last axis, exp(s - max s) / sum exp(s - max s), written into scores.

        Subtracting the row maximum changes nothing mathematically and keeps exp from
        overflowing; -inf entries (masked scores) give exactly 0.
        """
        scores -= self.amax(scores, -1)
        scores[...] = self.exp(scores)
        scores /= self.sum(scores, -1)
        return scores

    def __repr__(self) -> str:
        return f"backend({self.name!r})"
