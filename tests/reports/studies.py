"""Small study files for the reports tests (seconds to run) and helpers to compare runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

SMALL = """
[study]
name = "small"
seed = 3

[[experiment]]
kind = "time-step"
name = "orders"
methods = ["lie", "strang-rk2", "projected-rk4"]
steps_per_unit = [4, 8, 16, 32, 64]
reference = "exact"

[experiment.problem]
d = 4
tokens = 3
heads = 2
d_ff = 4
layers = 1
norm = "post"
weight_scale = 0.7
relu_shift = 2.5
manufactured = true

[[experiment]]
kind = "grid"
name = "grid"
family = "legendre"
rules = ["midpoint"]
sizes = [6, 12, 24, 48]

[[experiment]]
kind = "well-posedness"
configurations = 6
"""


def write_study(folder: Path, text: str = SMALL, name: str = "small.toml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def comparable(value: Any) -> Any:
    """A record without what legitimately differs between runs (times, versions)."""
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in ("wall_time", "versions")}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return value
