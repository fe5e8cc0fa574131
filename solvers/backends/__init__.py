"""Number systems and the `backend(name, digits=None)` registry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from solvers.backends.base import Array, Backend
from solvers.errors import InvalidInputError


@dataclass(frozen=True)
class BackendFactory:
    """How to make the backend called `name`: `digits` is the allowed range of decimal
    digits (inclusive) for an arbitrary-precision system, None for a fixed format;
    `typical_digits` the digits the built-in checks and the tests run it at (for an
    arbitrary precision); `packages` the Python distributions besides numpy that compute
    its numbers (recorded in every result's provenance)."""

    name: str
    make: Callable[[int | None], Backend]
    digits: tuple[int, int] | None = None
    typical_digits: int | None = None
    packages: tuple[str, ...] = ()


def _float(name: str) -> Callable[[int | None], Backend]:
    def make(digits: int | None) -> Backend:
        from solvers.backends.floats import (
            FusedFloatBackend,
            MixedPrecisionBackend,
        )

        if name == "float16":
            return MixedPrecisionBackend(name, np.float16)
        if name == "bfloat16":
            import ml_dtypes

            return MixedPrecisionBackend(name, ml_dtypes.bfloat16)
        if name == "longdouble":
            from solvers.backends.longdouble import LongDoubleBackend

            return LongDoubleBackend()
        return FusedFloatBackend(name, getattr(np, name))

    return make


def _multi_float(limbs: int) -> Callable[[int | None], Backend]:
    def make(digits: int | None) -> Backend:
        from solvers.backends.multifloat.backend import MultiFloatBackend

        return MultiFloatBackend(limbs)

    return make


def _mpmath(digits: int | None) -> Backend:
    from solvers.backends.mpmath_numbers import MpmathBackend

    return MpmathBackend(digits)


def _arb(digits: int | None) -> Backend:
    from solvers.backends.arb_balls import ArbBackend

    return ArbBackend(digits)


DIGITS_RANGE = (5, 10000)
TYPICAL_DIGITS = 30
REGISTRY: dict[str, BackendFactory] = {
    factory.name: factory
    for factory in (
        BackendFactory("float16", _float("float16")),
        BackendFactory("bfloat16", _float("bfloat16"), packages=("ml_dtypes",)),
        *(BackendFactory(name, _float(name)) for name in ("float32", "float64", "longdouble")),
        *(
            BackendFactory(f"float64x{limbs}", _multi_float(limbs), packages=("numba",))
            for limbs in (2, 3, 4)
        ),
        BackendFactory("mpmath", _mpmath, DIGITS_RANGE, TYPICAL_DIGITS, ("mpmath",)),
        BackendFactory("arb", _arb, DIGITS_RANGE, TYPICAL_DIGITS, ("python-flint",)),
    )
}
"""Every number system by name: the one source of backend names, digit ranges and the
lists derived from them (`registered`, the provenance's packages, the exactness study's
precisions, the reference's wider formats)."""
BACKEND_NAMES = tuple(REGISTRY)


def registered(fixed_only: bool = False) -> list[Backend]:
    """Every registered number system, an arbitrary precision at its typical digits, in
    registration order (`fixed_only`: the fixed formats alone), as REGISTRY holds them now."""
    return [
        backend(name, factory.typical_digits)
        for name, factory in REGISTRY.items()
        if not (fixed_only and factory.digits is not None)
    ]


def backend_packages() -> list[str]:
    """The distributions the registered number systems compute with, in registration order."""
    return list(dict.fromkeys(p for factory in REGISTRY.values() for p in factory.packages))


_cache: dict[tuple[str, int | None], Backend] = {}


def backend(name: str | Backend, digits: int | None = None) -> Backend:
    """The backend called `name` (a Backend instance is returned as it is).

    "float16", "bfloat16", "float32", "float64", "longdouble" and the multi-floats
    "float64x2", "float64x3", "float64x4" (2, 3 and 4 float64 limbs) have a fixed
    precision and take no digits; "mpmath" and "arb" need digits, a whole number from 5 to 10000.
    Backends are immutable and cached, so repeated calls return the same object.
    """
    if isinstance(name, Backend):
        if digits is not None and digits != name.digits:
            raise InvalidInputError(f"digits={digits!r} cannot be applied to the ready {name!r}")
        return name
    if name not in REGISTRY:
        raise InvalidInputError(
            f"unknown backend {name!r}; allowed: {', '.join(repr(n) for n in REGISTRY)}"
        )
    factory = REGISTRY[name]
    if factory.digits is None and digits is not None:
        raise InvalidInputError(
            f"backend {name!r} has a fixed precision; digits must be None, got {digits!r}"
        )
    if factory.digits is not None:
        low, high = factory.digits
        if digits is None:
            raise InvalidInputError(f"backend {name!r} needs digits (a whole number {low}..{high})")
        if isinstance(digits, bool) or not isinstance(digits, int | np.integer):
            raise InvalidInputError(f"digits must be a whole number {low}..{high}, got {digits!r}")
        if not low <= digits <= high:
            raise InvalidInputError(f"digits must lie in {low}..{high}, got {digits}")
        digits = int(digits)
    key = (name, digits)
    if key not in _cache:
        _cache[key] = factory.make(digits)
    return _cache[key]


def convert(value: Array, source: str | Backend, target: str | Backend) -> Array:
    """An array of `source` numbers as `target` numbers.

    The source gives its `portable` numbers and the target reads them: binary floats as
    numbers (every float16, bfloat16 and float32 is a float64; longdouble through its exact
    decimal expansion), mpmath numbers as the exact fractions they are, arb balls through
    decimal strings (a ball becomes its midpoint unless `target` is arb, which reads the
    whole ball). Exact when `target` is at least as precise as `source` (arb: the ball
    contains the value); otherwise rounded to the target, the binary formats reading
    through long double (so a value within a long-double unit of a tie between two
    numbers of the target may round to either).
    """
    source, target = backend(source), backend(target)
    numbers = source.portable(value)
    with target.active():
        return target.asarray(numbers)


__all__ = [
    "BACKEND_NAMES",
    "REGISTRY",
    "Array",
    "Backend",
    "BackendFactory",
    "backend",
    "backend_packages",
    "convert",
    "registered",
]
