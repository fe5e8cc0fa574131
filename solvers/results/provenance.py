"""What a result records about where it came from: package versions and wall time."""

from __future__ import annotations

import dataclasses
import functools
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import ParamSpec, TypeVar

from solvers.backends import backend_packages

PACKAGES = ("tide-suite", "numpy", "scipy")
"""The distributions every result's numbers depend on; the number systems add theirs
(solvers.backends.backend_packages)."""


def versions() -> dict[str, str]:
    """Versions of Python and of the packages that determine the numbers."""
    found = {"python": platform.python_version()}
    for package in (*PACKAGES, *backend_packages()):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "not installed"
    return found


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """The part every result shares: the versions that determined its numbers and the
    wall time it took (seconds). Result dataclasses derive from it."""

    versions: dict[str, str] = field(default_factory=versions)
    wall_time: float = 0.0


P = ParamSpec("P")
R = TypeVar("R", bound=Provenance)


def timed(study: Callable[P, R]) -> Callable[P, R]:
    """`study`, with the wall time of each call written into the result it returns."""

    @functools.wraps(study)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        started = time.perf_counter()
        result = study(*args, **kwargs)
        return dataclasses.replace(result, wall_time=time.perf_counter() - started)

    return run
