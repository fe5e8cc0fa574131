"""Every experiment kind runs a tiny study and renders its section, with its evidence; its
judge alone gives the evidence and figures of merit the report prints."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from reports.experiments import EXPERIMENTS
from reports.experiments.base import Judgement
from reports.judging import judgements
from reports.merit import rule_of, tolerance_text
from reports.render import claims_table, render_report, sections
from reports.runner import run_case
from reports.study import parse_study
from tests.reports.studies import TINY, tiny_study

Records = dict[str, dict[str, Any]]


@pytest.fixture(scope="module")
def tiny_records() -> Callable[[str], Records]:
    """Each kind's tiny-study records, run once for every test of the module."""
    found: dict[str, Records] = {}

    def records(kind: str) -> Records:
        if kind not in found:
            found[kind] = {case.id: run_case(case) for case in tiny_study(kind).cases()}
        return found[kind]

    return records


def test_every_kind_has_a_tiny_study():
    """So every kind (those of the built-in study among them) is walked by
    test_judge_gives_what_the_report_prints, claims by the test after it."""
    assert set(TINY) | {"claims"} == set(EXPERIMENTS)


@pytest.mark.parametrize("kind", list(TINY))
def test_kind_runs_and_renders(kind, tmp_path, tiny_records):
    study = tiny_study(kind)
    records = tiny_records(kind)
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


def _merit(judged: Judgement) -> str:
    return json.dumps(judged.figures_of_merit)  # NaN written as NaN: equal when both are


@pytest.mark.parametrize("kind", list(TINY))
def test_judge_gives_what_the_report_prints(kind, tiny_records):
    """The judgement `tide check` and baselines use (reports.judging, no drawing) is the
    report's: the section's evidence and figures of merit, and the claims table's rows;
    render itself judges nothing."""
    study, records = tiny_study(kind), tiny_records(kind)
    judged = judgements(study, records)[kind]
    assert judged.figures_of_merit, f"{kind} gives a baseline nothing to keep"
    for name, merit in judged.figures_of_merit.items():
        assert rule_of(merit) == merit["rule"] and tolerance_text(merit), name
    experiment = EXPERIMENTS[kind]
    typed = [experiment.read(r) for r in records.values()]
    assert experiment.render(kind, typed).judgement == Judgement()
    section = sections(study, records)[0]
    assert section.judgement.evidence == judged.evidence
    assert _merit(section.judgement) == _merit(judged)
    rows = {row[0]: row[1:] for row in claims_table([section])}
    for item in judged.evidence:
        assert rows[item.claim.text] == [str(item.verdict), f"{kind}: {item.evidence}"]
    spoken = {item.claim.text for item in judged.evidence}
    assert all(
        verdict == "no evidence" for claim, (verdict, _) in rows.items() if claim not in spoken
    )


def test_the_claims_kind_runs_one_case():
    study = parse_study({"study": {"name": "c"}, "experiment": [{"kind": "claims"}]}, "c")
    case = next(c for c in study.cases() if "float64" in c.label and "textbook" in c.label)
    record = run_case(case)
    assert record["status"] == "ok"
    assert all(check["verdict"] == "holds" for check in record["result"]["checks"])
    merit = judgements(study, {case.id: record})[case.experiment].figures_of_merit
    assert merit["claims.unexpected"] == {"rule": "bounded", "value": 0, "low": 0, "high": 0}
