"""Every experiment kind runs a tiny study and renders its section, with its evidence."""

from __future__ import annotations

import json

import pytest

from reports.experiments import EXPERIMENTS
from reports.render import render_report
from reports.runner import run_case
from reports.study import parse_study

SMALL_POST = {"d": 4, "tokens": 3, "heads": 2, "d_ff": 4, "layers": 1, "norm": "post",
              "weight_scale": 0.7, "relu_shift": 2.5}  # fmt: skip
UNIFORM = {"d": 4, "tokens": 3, "norm": "none", "uniform_attention": True}
TINY = {
    "invariants": {"d": 4, "tokens": 3, "precisions": ["float64"]},
    "time-step": {"methods": ["lie"], "steps_per_unit": [8, 16, 32, 64],
                  "problem": SMALL_POST | {"manufactured": True}, "reference": "exact"},
    "splitting-table": {"steps_per_unit": [8, 16, 32, 64], "reference": "richardson",
                        "problem": SMALL_POST | {"manufactured": True}},
    "grid": {"family": "fourier", "rules": ["trapezoid"], "sizes": [4, 8, 16]},
    "precision-ladder": {"method": "projected-rk4", "steps_per_unit": [1, 2, 4, 8],
                         "precisions": ["float32"], "problem": UNIFORM},
    "rounding-depth": {"precisions": ["float32"], "problem": SMALL_POST | {"layers": 3}},
    "layer-norm-limit": {"problem": SMALL_POST, "eps_values": [1e-2, 1e-3, 1e-4],
                         "steps_per_unit": [16, 32, 64],
                         "affine_steps_per_unit": [1, 4, 16, 64, 256]},
    "transformer-limit": {"problem": SMALL_POST | {"relu_shift": 0.0},
                          "scales": [0.01, 0.02, 0.04]},
    "well-posedness": {"configurations": 1},
    "stability": {"methods": ["lie"], "scales": [1.0], "temperatures": [1.0, 2.0],
                  "problem": SMALL_POST, "lyapunov_methods": ["lie"], "max_steps_per_unit": 64},
    "vit": {"image": 4, "patch": 2, "d": 8, "steps_per_unit": [4, 8, 16, 32]},
    "cvt": {"sizes": [6, 12, 24], "reference_size": 96},
    "conditioning": {"stds": [1.0, 0.1, 0.01, 0.001], "betas": [1.0, 2.0, 4.0, 8.0]},
}  # fmt: skip


def test_every_kind_has_a_tiny_study():
    assert set(TINY) | {"claims"} == set(EXPERIMENTS)


@pytest.mark.parametrize("kind", list(TINY))
def test_kind_runs_and_renders(kind, tmp_path):
    study = parse_study(
        {"study": {"name": kind}, "experiment": [{"kind": kind, "name": kind, **TINY[kind]}]}, kind
    )
    records = {case.id: run_case(case) for case in study.cases()}
    assert all(r["status"] == "ok" for r in records.values()), [
        r["error"] for r in records.values()
    ]
    results = render_report(study, records, tmp_path)
    json.dumps(results)
    section = (tmp_path / "report.md").read_text()
    assert f"## {kind}" in section
    assert any(claim["verdict"] != "no evidence" for claim in results["claims"]) or kind in (
        "rounding-depth",
    )


def test_the_claims_kind_runs_one_case():
    study = parse_study({"study": {"name": "c"}, "experiment": [{"kind": "claims"}]}, "c")
    case = next(c for c in study.cases() if "float64" in c.label and "textbook" in c.label)
    record = run_case(case)
    assert record["status"] == "ok"
    assert all(check["verdict"] == "holds" for check in record["result"]["checks"])
