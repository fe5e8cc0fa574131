"""A small declarative schema for study files: typed fields with defaults and checks.

Every rejection is a StudyFileError whose one-line message names the file, the key (as a
dotted path such as experiment[2].steps_per_unit) and what is allowed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from solvers.backends import BACKEND_NAMES, REGISTRY
from solvers.errors import TideError

REQUIRED = object()
"""The default of a field that must be given."""


class StudyFileError(TideError):
    """A study file that cannot be run: the message names the file, the key and the rule."""


@dataclass(frozen=True)
class Field:
    """A key's parser: `parse(value, where)` returns the checked value or raises."""

    parse: Callable[[Any, str], Any]
    default: Any = REQUIRED
    help: str = ""
    relative: bool = False
    """Paths relative to the study file's folder (a string, or an array or table of them):
    made absolute before `parse` sees them."""


def reject(where: str, message: str) -> StudyFileError:
    return StudyFileError(f"{where}: {message}")


def _type_name(value: Any) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "a table",
    }.get(type(value), type(value).__name__)


def integer(low: int | None = None, high: int | None = None) -> Callable[[Any, str], int]:
    def parse(value: Any, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise reject(where, f"must be an integer, got {_type_name(value)} {value!r}")
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
            raise reject(where, f"must be an integer {bounds}, got {value}")
        return value

    return parse


def number(positive: bool = False, low: float | None = None) -> Callable[[Any, str], float]:
    def parse(value: Any, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise reject(where, f"must be a number, got {_type_name(value)} {value!r}")
        value = float(value)
        if not math.isfinite(value):
            raise reject(where, f"must be finite, got {value}")
        if positive and value <= 0:
            raise reject(where, f"must be > 0, got {value}")
        if low is not None and value < low:
            raise reject(where, f"must be >= {low}, got {value}")
        return value

    return parse


def boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise reject(where, f"must be true or false, got {_type_name(value)} {value!r}")
    return value


def text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise reject(where, f"must be a non-empty string, got {_type_name(value)} {value!r}")
    return value


def one_of(allowed: tuple[str, ...]) -> Callable[[Any, str], str]:
    def parse(value: Any, where: str) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise reject(where, f"unknown value {value!r}; allowed: {', '.join(allowed)}")
        return value

    return parse


def array_of(
    item: Callable[[Any, str], Any], minimum: int = 1, distinct: bool = False
) -> Callable[[Any, str], list]:
    def parse(value: Any, where: str) -> list:
        if not isinstance(value, list):
            raise reject(where, f"must be an array, got {_type_name(value)} {value!r}")
        if len(value) < minimum:
            raise reject(where, f"needs at least {minimum} entries, got {len(value)}")
        items = [item(entry, f"{where}[{i}]") for i, entry in enumerate(value)]
        if distinct and len({repr(x) for x in items}) != len(items):
            raise reject(where, f"entries must be distinct, got {value}")
        return items

    return parse


def orders_by(allowed: tuple[str, ...], what: str) -> Callable[[Any, str], dict[str, float]]:
    """A table {name = expected order} whose names are among `allowed` (methods, rules)."""

    def parse(value: Any, where: str) -> dict[str, float]:
        if not isinstance(value, dict):
            raise reject(where, f"must be a table of {what} = order, got {value!r}")
        orders = {}
        for name, order in value.items():
            one_of(allowed)(name, f"{where}.{name}")
            orders[name] = number()(order, f"{where}.{name}")
        return orders

    return parse


HIGH_PRECISION = tuple(name for name, factory in REGISTRY.items() if factory.digits)
"""The backends whose precision a study chooses (digits), from solvers.backends.REGISTRY."""


def precision(value: Any, where: str) -> dict[str, Any]:
    """A number system of solvers.backends.REGISTRY: a fixed format by name ("float64"), or
    {name = "mpmath" | "arb", digits = N} with N in the backend's range."""
    if isinstance(value, str):
        name = one_of(BACKEND_NAMES)(value, where)
        if name in HIGH_PRECISION:
            raise reject(where, f"{name!r} needs digits: write {{ name = {name!r}, digits = 50 }}")
        return {"name": name, "digits": None}
    if isinstance(value, dict):
        spec = table(
            value, where, {"name": Field(one_of(BACKEND_NAMES)), "digits": Field(integer(), None)}
        )
        name, digits, allowed = spec["name"], spec["digits"], REGISTRY[spec["name"]].digits
        if allowed is None and digits is not None:
            only = " and ".join(HIGH_PRECISION)
            raise reject(f"{where}.digits", f"is only for {only}, not {name!r}")
        if allowed is not None and digits is None:
            raise reject(
                f"{where}.digits", f"is required for {name!r} ({allowed[0]} to {allowed[1]})"
            )
        if allowed is not None:
            integer(*allowed)(digits, f"{where}.digits")
        return spec
    raise reject(where, f"must be a backend name or a table {{ name, digits }}, got {value!r}")


def table(value: Any, where: str, fields: Mapping[str, Field]) -> dict[str, Any]:
    """Check a TOML table against `fields`: unknown keys, missing keys, each value."""
    if not isinstance(value, dict):
        raise reject(where, f"must be a table, got {_type_name(value)} {value!r}")
    unknown = sorted(set(value) - set(fields))
    if unknown:
        prefix = f"{where}." if where else ""
        raise reject(
            f"{prefix}{unknown[0]}", f"unknown key; allowed here: {', '.join(sorted(fields))}"
        )
    checked = {}
    for key, spec in fields.items():
        path = f"{where}.{key}" if where else key
        if key in value:
            checked[key] = spec.parse(value[key], path)
        elif spec.default is REQUIRED:
            raise reject(path, "is required" + (f" ({spec.help})" if spec.help else ""))
        else:
            checked[key] = spec.default
    return checked
