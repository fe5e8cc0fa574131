"""Number systems and the `backend(name, digits=None)` registry."""

from __future__ import annotations

import numpy as np

from solvers.backends.base import Array, Backend, exact_decimals
from solvers.errors import InvalidInputError

FIXED_PRECISION = ("float16", "bfloat16", "float32", "float64", "longdouble")
ARBITRARY_PRECISION = ("mpmath", "arb")
BACKEND_NAMES = FIXED_PRECISION + ARBITRARY_PRECISION
DIGITS_RANGE = (5, 10000)

_cache: dict[tuple[str, int | None], Backend] = {}


def _make(name: str, digits: int | None) -> Backend:
    if name == "mpmath":
        from solvers.backends.mpmath_numbers import MpmathBackend

        return MpmathBackend(digits)
    if name == "arb":
        from solvers.backends.arb_balls import ArbBackend

        return ArbBackend(digits)
    from solvers.backends.floats import MixedPrecisionBackend, NativeFloatBackend

    if name in ("float16", "bfloat16"):
        import ml_dtypes

        dtype = np.float16 if name == "float16" else ml_dtypes.bfloat16
        return MixedPrecisionBackend(name, dtype)
    return NativeFloatBackend(name, getattr(np, name))


def backend(name: str | Backend, digits: int | None = None) -> Backend:
    """The backend called `name` (a Backend instance is returned as it is).

    "float16", "bfloat16", "float32", "float64", "longdouble" have a fixed precision and
    take no digits; "mpmath" and "arb" need digits, a whole number from 5 to 10000.
    Backends are immutable and cached, so repeated calls return the same object.
    """
    if isinstance(name, Backend):
        if digits is not None and digits != name.digits:
            raise InvalidInputError(f"digits={digits!r} cannot be applied to the ready {name!r}")
        return name
    if name not in BACKEND_NAMES:
        raise InvalidInputError(
            f"unknown backend {name!r}; allowed: {', '.join(repr(n) for n in BACKEND_NAMES)}"
        )
    if name in FIXED_PRECISION and digits is not None:
        raise InvalidInputError(
            f"backend {name!r} has a fixed precision; digits must be None, got {digits!r}"
        )
    if name in ARBITRARY_PRECISION:
        low, high = DIGITS_RANGE
        if digits is None:
            raise InvalidInputError(f"backend {name!r} needs digits (a whole number {low}..{high})")
        if isinstance(digits, bool) or not isinstance(digits, int | np.integer):
            raise InvalidInputError(f"digits must be a whole number {low}..{high}, got {digits!r}")
        if not low <= digits <= high:
            raise InvalidInputError(f"digits must lie in {low}..{high}, got {digits}")
        digits = int(digits)
    key = (name, digits)
    if key not in _cache:
        _cache[key] = _make(name, digits)
    return _cache[key]


def convert(value: Array, source: str | Backend, target: str | Backend) -> Array:
    """An array of `source` numbers as `target` numbers.

    Exact when `target` is at least as precise as `source`, and correctly rounded once
    otherwise: binary floats go as numbers (every float16, bfloat16 and float32 is a
    float64; longdouble through its exact decimal expansion), mpmath and arb numbers
    through decimal strings; a ball becomes its midpoint unless `target` is arb, which
    reads the whole ball.
    """
    source, target = backend(source), backend(target)
    dtype = getattr(source, "dtype", None)
    if dtype is None:
        numbers = source.to_strings(value)
    elif dtype.itemsize > 8:
        numbers = exact_decimals(np.asarray(value, dtype=dtype))
    else:
        numbers = source.to_float64(value)
    with target.active():
        return target.asarray(numbers)


__all__ = ["BACKEND_NAMES", "Array", "Backend", "backend", "convert"]
