"""Checks shared by the constructors: finite arrays, shapes, positive sizes.

Each check raises `InvalidInputError` with a message that names the argument, the value
that was found and what is allowed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from solvers.errors import InvalidInputError


def finite_array(name: str, value: object, shape: Sequence[int | None] | None = None) -> np.ndarray:
    """`value` as a float64 array with every entry finite and, if given, this shape.

    `None` in `shape` accepts any size on that axis.
    """
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(
            f"{name} must be an array of real numbers, got {value!r:.80}"
        ) from exc
    if shape is not None:
        if array.ndim != len(shape) or any(
            want is not None and got != want for got, want in zip(array.shape, shape, strict=True)
        ):
            wanted = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
            raise InvalidInputError(f"{name} must have shape {wanted}, got {array.shape}")
    bad = ~np.isfinite(array)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InvalidInputError(f"{name} must be finite, got {array[where]} at index {where}")
    return array


def positive_int(name: str, value: object) -> int:
    """`value` as an int >= 1 (bools are rejected)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise InvalidInputError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def positive_number(name: str, value: object) -> float:
    """`value` as a finite float > 0."""
    number = float(finite_array(name, value, ()))
    if number <= 0:
        raise InvalidInputError(f"{name} must be > 0, got {number!r}")
    return number


def positive_sweep(name: str, values: object, minimum: int = 1) -> np.ndarray:
    """`values` as a non-empty 1-D array of finite numbers > 0, at least `minimum` of them."""
    array = finite_array(name, values)
    if array.ndim != 1 or array.size == 0:
        raise InvalidInputError(f"{name} must be a non-empty 1-D sweep, got shape {array.shape}")
    if (array <= 0).any():
        raise InvalidInputError(f"{name} must be > 0, got {float(array[array <= 0][0])!r}")
    if array.size < minimum:
        raise InvalidInputError(f"{name} needs at least {minimum} values, got {array.size}")
    return array


def token_mask(name: str, value: object, shape: Sequence[int]) -> np.ndarray:
    """`value` as a read-only boolean padding mask of `shape` (..., N): entries 0 or 1 (or
    booleans), 1 for a real token, and at least one real token in every row."""
    array = np.asarray(value)
    if array.shape != tuple(shape):
        wanted = "(" + ", ".join(str(s) for s in shape) + ")"
        raise InvalidInputError(f"{name} must have shape {wanted}, got {array.shape}")
    if array.dtype.kind not in "biuf":
        raise InvalidInputError(f"{name} must hold only 0 and 1, got {array.dtype} entries")
    other = ~np.isin(array, (0, 1))
    if other.any():
        place = tuple(int(i) for i in np.argwhere(other)[0])
        raise InvalidInputError(
            f"{name} must hold only 0 and 1, got {array[place].item()!r} at {place} "
            f"({int(other.sum())} such entries)"
        )
    mask = array.astype(bool)
    empty = ~mask.any(axis=-1)
    if empty.any():
        row = tuple(int(i) for i in np.argwhere(empty)[0])
        raise InvalidInputError(f"{name} has no real token (no 1) in row {row}")
    mask.flags.writeable = False
    return mask


def indices(
    name: str, value: object, shape: Sequence[int | None], count: int, what: str, within: str
) -> np.ndarray:
    """`value` as a non-empty integer array of `shape` (None: any size on that axis) with
    entries in [0, count): `what` says what they are ("token ids"), `within` what count
    is ("the vocabulary")."""
    array = np.asarray(value)
    fits = array.ndim == len(shape) and all(
        want is None or got == want for got, want in zip(array.shape, shape, strict=True)
    )
    if not fits or 0 in array.shape or array.dtype.kind not in "iu":
        wanted = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
        raise InvalidInputError(
            f"{name} must be integer {what} of shape {wanted}, got {array.dtype} {array.shape}"
        )
    outside = (array < 0) | (array >= count)
    if outside.any():
        where = tuple(int(i) for i in np.argwhere(outside)[0])
        raise InvalidInputError(
            f"{name} must lie in [0, {count}) ({within}), got {array[where]} at index {where}"
        )
    return array


def choice(name: str, value: object, allowed: Sequence[str]) -> str:
    """`value` if it is one of `allowed`."""
    if value not in allowed:
        raise InvalidInputError(
            f"unknown {name} {value!r}; allowed: {', '.join(repr(a) for a in allowed)}"
        )
    return value  # type: ignore[return-value]


def frozen(array: np.ndarray) -> np.ndarray:
    """A read-only float64 copy: weights and data cannot change under a per-backend cache."""
    array = np.array(array, dtype=np.float64)
    array.flags.writeable = False
    return array
