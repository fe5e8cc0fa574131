"""Every experiment kind runs a tiny study and renders its section, with its evidence."""

from __future__ import annotations

import json

import pytest

from reports.experiments import EXPERIMENTS
from reports.render import render_report
from reports.runner import run_case
from reports.study import parse_study
from tests.reports.studies import TINY, tiny_study


def test_every_kind_has_a_tiny_study():
    assert set(TINY) | {"claims"} == set(EXPERIMENTS)


@pytest.mark.parametrize("kind", list(TINY))
def test_kind_runs_and_renders(kind, tmp_path):
    study = tiny_study(kind)
    records = {case.id: run_case(case) for case in study.cases()}
    assert all(r["status"] == "ok" for r in records.values()), [
        r["error"] for r in records.values()
    ]
    for record in records.values():  # strict JSON, read back into the result's own type
        stored = json.loads(json.dumps(record, allow_nan=False))
        experiment = EXPERIMENTS[kind]
        typed = experiment.read(stored)
        assert type(typed.result) is experiment.case_kind(record["params"]).result
        assert experiment.stored(record["params"], typed.result) == stored["result"]
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
