"""What a result records about where it came from: package versions and wall time."""

from __future__ import annotations

import math
import platform
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version

PACKAGES = ("tide-suite", "numpy", "scipy", "mpmath", "python-flint", "ml_dtypes")


def versions() -> dict[str, str]:
    """Versions of Python and of the packages that determine the numbers."""
    found = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


def json_float(x: float | None) -> float | str | None:
    """A number for a JSON record: finite floats as they are, nan and inf as their repr
    (JSON has neither), None as None."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else repr(x)


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """The part every result shares: the versions that determined its numbers and the
    wall time it took (seconds). Result dataclasses derive from it."""

    versions: dict[str, str] = field(default_factory=versions)
    wall_time: float = 0.0
