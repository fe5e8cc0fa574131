"""Small study files for the reports tests (seconds to run) and helpers to compare runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reports.study import Study, parse_study
from tests.hf_models import SHIPPED

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


SMALL_POST = {
    "d": 4,
    "tokens": 3,
    "heads": 2,
    "d_ff": 4,
    "layers": 1,
    "norm": "post",
    "weight_scale": 0.7,
    "relu_shift": 2.5,
}
UNIFORM = {"d": 4, "tokens": 3, "norm": "none", "uniform_attention": True}
TINY = {
    "invariants": {"d": 4, "tokens": 3, "precisions": ["float64"]},
    "time-step": {
        "methods": ["lie"],
        "steps_per_unit": [8, 16, 32, 64],
        "problem": SMALL_POST | {"manufactured": True},
        "reference": "exact",
    },
    "splitting-table": {
        "steps_per_unit": [8, 16, 32, 64],
        "reference": "richardson",
        "problem": SMALL_POST | {"manufactured": True},
    },
    "grid": {"family": "fourier", "rules": ["trapezoid"], "sizes": [4, 8, 16]},
    "precision-ladder": {
        "method": "projected-rk4",
        "steps_per_unit": [1, 2, 4, 8],
        "precisions": ["float32"],
        "problem": UNIFORM,
    },
    "rounding-depth": {"precisions": ["float32"], "problem": SMALL_POST | {"layers": 3}},
    "layer-norm-limit": {
        "problem": SMALL_POST,
        "eps_values": [1e-2, 1e-3, 1e-4],
        "steps_per_unit": [16, 32, 64],
        "affine_steps_per_unit": [1, 4, 16, 64, 256],
    },
    "transformer-limit": {
        "problem": SMALL_POST | {"relu_shift": 0.0},
        "scales": [0.01, 0.02, 0.04],
    },
    "well-posedness": {"configurations": 1},
    "stability": {
        "methods": ["lie"],
        "scales": [1.0],
        "temperatures": [1.0, 2.0],
        "problem": SMALL_POST,
        "lyapunov_methods": ["lie"],
        "max_steps_per_unit": 64,
    },
    "vit": {"image": 4, "patch": 2, "d": 8, "steps_per_unit": [4, 8, 16, 32]},
    "cvt": {"sizes": [6, 12, 24], "reference_size": 96},
    "conditioning": {"stds": [1.0, 0.1, 0.01, 0.001], "betas": [1.0, 2.0, 4.0, 8.0]},
    "depth-family": {
        "models": {
            family: [str(SHIPPED / f"depth-max-digit/{family}/L{L}.safetensors") for L in (2, 4, 8)]
            for family in ("smooth", "independent")
        },
        "tokens": str(SHIPPED / "depth-max-digit-tokens.npy"),
        "labels": str(SHIPPED / "depth-max-digit-labels.npy"),
    },
    "network-limit": {
        "model": str(SHIPPED / "max-digit.safetensors"),
        "inputs": str(SHIPPED / "max-digit-inputs.npy"),
        "labels": str(SHIPPED / "max-digit-labels.npy"),
        "steps_per_unit": [1, 2, 4, 8],
        "max_steps_per_unit": 256,
    },
}


def tiny_study(kind: str) -> Study:
    """A study of one experiment of `kind` with its TINY keys (seconds to run)."""
    experiment = {"kind": kind, "name": kind, **TINY[kind]}
    return parse_study({"study": {"name": kind}, "experiment": [experiment]}, kind)


def _toml(value: Any) -> str:
    """A TOML value: inline tables and arrays of JSON-written scalars."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


def tiny_study_text(kinds: list[str], name: str = "tiny") -> str:
    """A study file of one experiment per kind in `kinds`, each with its TINY keys."""
    lines = [f"[study]\nname = {_toml(name)}\nseed = 3\n"]
    for kind in kinds:
        keys = {"kind": kind, "name": kind, **TINY[kind]}
        lines.append("[[experiment]]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in keys.items()))
    return "\n".join(lines)


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
