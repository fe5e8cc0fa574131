"""Number systems and the `backend(name, digits=None)` registry."""

from __future__ import annotations

import numpy as np

from solvers.backends.base import Array, Backend
from solvers.backends.floats import NativeFloatBackend
from solvers.errors import InvalidInputError

_NATIVE_FLOATS = {"float32": np.float32, "float64": np.float64}

BACKEND_NAMES = tuple(_NATIVE_FLOATS)


def backend(name: str | Backend, digits: int | None = None) -> Backend:
    """The backend called `name` (a Backend instance is returned as it is).

    `digits` is for the arbitrary-precision systems; the fixed-width floats reject it.
    """
    if isinstance(name, Backend):
        if digits is not None:
            raise InvalidInputError(f"digits={digits!r} cannot be applied to the ready {name!r}")
        return name
    if name in _NATIVE_FLOATS:
        if digits is not None:
            raise InvalidInputError(
                f"backend {name!r} has a fixed precision; digits must be None, got {digits!r}"
            )
        return NativeFloatBackend(name, _NATIVE_FLOATS[name])
    raise InvalidInputError(
        f"unknown backend {name!r}; allowed: {', '.join(repr(n) for n in BACKEND_NAMES)}"
    )


__all__ = ["BACKEND_NAMES", "Array", "Backend", "backend"]
