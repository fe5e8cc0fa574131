"""Results as JSON, and back: one generic conversion for every result dataclass.

`to_json` turns a dataclass (nested dataclasses, enums, tuples, dicts, numpy scalars and
arrays) into plain JSON data; floats stay floats, nan and inf become their repr strings
(JSON has neither), so `json.dumps` round-trips every number exactly. High-precision
numbers are stored by their producers as decimal strings, which pass through unchanged.
`from_json(cls, data)` reads such data back into `cls`, guided by its type hints.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any

import numpy as np


def to_json(value: Any) -> Any:
    """Plain JSON data for `value` (see the module docstring)."""
    if isinstance(value, enum.Enum):  # before str: a StrEnum becomes its plain value
        return value.value
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, float | np.floating):
        number = float(value)
        return number if math.isfinite(number) else repr(number)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(key): to_json(item) for key, item in value.items()}
    if isinstance(value, np.ndarray):
        return to_json(value.tolist())
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    raise TypeError(f"cannot write a {type(value).__name__} as JSON: {value!r:.80}")


def from_json(cls: Any, data: Any) -> Any:
    """`data` (written by `to_json`) read back as an instance of the type `cls`."""
    origin = typing.get_origin(cls)
    if cls is Any or cls is object:
        return data
    if origin in (typing.Union, types.UnionType):
        return _union(typing.get_args(cls), data)
    if origin is typing.Literal:
        return data
    if origin in (list, tuple, dict) or cls in (list, tuple, dict):
        return _container(cls, origin, data)
    if dataclasses.is_dataclass(cls):
        return _dataclass(cls, data)
    if isinstance(cls, type) and issubclass(cls, enum.Enum):
        return cls(data)
    if cls is float:
        return float(data)  # "nan", "inf" and "-inf" included
    if cls is int:
        if isinstance(data, bool) or not isinstance(data, int):
            raise TypeError(f"expected a whole number, got {data!r}")
        return data
    if cls in (str, bool):
        if not isinstance(data, cls):
            raise TypeError(f"expected {cls.__name__}, got {data!r}")
        return data
    if cls is type(None):
        if data is not None:
            raise TypeError(f"expected null, got {data!r}")
        return None
    if cls is np.ndarray:
        return np.asarray(data, dtype=float)
    raise TypeError(f"cannot read JSON into {cls!r}")


def _union(options: tuple, data: Any) -> Any:
    if data is None and type(None) in options:
        return None
    if isinstance(data, str) and str in options:
        return data
    errors = []
    for option in options:
        if option is type(None):
            continue
        try:
            return from_json(option, data)
        except (TypeError, ValueError, KeyError) as exc:
            errors.append(str(exc))
    raise TypeError(f"{data!r:.80} matches none of {options}: {'; '.join(errors)}")


def _container(cls: Any, origin: Any, data: Any) -> Any:
    args = typing.get_args(cls)
    kind = origin or cls
    if kind is dict:
        if not isinstance(data, Mapping):
            raise TypeError(f"expected an object, got {data!r:.80}")
        key_type, value_type = args or (Any, Any)
        return {_key(key_type, key): from_json(value_type, value) for key, value in data.items()}
    if not isinstance(data, list | tuple):
        raise TypeError(f"expected a list, got {data!r:.80}")
    if kind is list:
        item = args[0] if args else Any
        return [from_json(item, value) for value in data]
    if not args or (len(args) == 2 and args[1] is Ellipsis):
        item = args[0] if args else Any
        return tuple(from_json(item, value) for value in data)
    if len(args) != len(data):
        raise TypeError(f"expected {len(args)} items, got {len(data)}")
    return tuple(from_json(item, value) for item, value in zip(args, data, strict=True))


def _key(key_type: Any, key: str) -> Any:
    return int(key) if key_type is int else key


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _dataclass(cls: type, data: Any) -> Any:
    if not isinstance(data, Mapping):
        raise TypeError(f"expected an object for {cls.__name__}, got {data!r:.80}")
    hints = _hints(cls)
    fields = dataclasses.fields(cls)
    unknown = set(data) - {f.name for f in fields}
    if unknown:
        raise KeyError(f"{cls.__name__} has no field {sorted(unknown)[0]!r}")
    values = {f.name: from_json(hints[f.name], data[f.name]) for f in fields if f.name in data}
    instance = cls(**{f.name: values[f.name] for f in fields if f.init and f.name in values})
    for f in fields:  # derived fields: the stored value must be the one derived again
        if not f.init and f.name in values and getattr(instance, f.name) != values[f.name]:
            raise ValueError(
                f"{cls.__name__}.{f.name} was stored as {values[f.name]!r} but derives to "
                f"{getattr(instance, f.name)!r}"
            )
    return instance
