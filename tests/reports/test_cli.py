"""The `tide` command: report, render, list, baseline and check, --help, --version."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from reports.claims import Claim
from reports.cli import build_parser, main
from solvers.backends import REGISTRY
from solvers.integrators.tableaux import EULER
from solvers.methods.splitting import Splitting
from solvers.methods.terms import AMBIENT
from solvers.solving import METHODS
from tests.reports.studies import write_study


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("report")
    study = write_study(folder)
    assert main(["report", str(study), "--out", str(folder / "out")]) == 0
    return study, folder / "out"


def test_report_writes_every_file(report):
    _, out = report
    for name in ("report.md", "report.html", "results.json", "tables.tex"):
        assert (out / name).stat().st_size > 0, name
    figures = sorted(p.name for p in (out / "figures").iterdir())
    assert {"orders.png", "orders.svg", "grid.png", "grid.svg"} <= set(figures)
    markdown = (out / "report.md").read_text()
    assert "## Claims of the paper" in markdown and "| claim | verdict | evidence |" in markdown
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(figures) // 2  # self-contained
    assert r"\begin{tabular}" in (out / "tables.tex").read_text()
    results = json.loads((out / "results.json").read_text())
    claims = {c["claim"]: c["verdict"] for c in results["claims"]}
    assert {claim.text for claim in Claim} <= set(claims)
    first_order = "The Lie scheme (the Transformer) is a first-order discretisation of the flow"
    assert claims[first_order] == "verified"
    assert results["figures_of_merit"]["orders"]["lie.order"]["verdict"] == "PASS"


def test_render_needs_no_recomputation(report, capsys, monkeypatch):
    study, out = report
    before = (out / "report.md").read_text()
    (out / "report.md").unlink()
    monkeypatch.setattr("reports.runner.run_case", None)  # any computation would fail
    assert main(["render", "--study", str(study), "--out", str(out)]) == 0
    assert (out / "report.md").read_text() == before
    assert "rendered" in capsys.readouterr().err


def test_render_without_study_renders_the_study_that_ran(report, capsys):
    """Not the built-in study's empty sections over the user's report (issue 43, item 2)."""
    _, out = report
    before = (out / "report.md").read_text()
    (out / "report.md").unlink()
    assert main(["render", "--out", str(out)]) == 0
    assert (out / "report.md").read_text() == before
    assert "(small)" in capsys.readouterr().err


def test_render_refuses_results_of_no_study_found(report, tmp_path, capsys):
    study, out = report
    copied = tmp_path / "copied"
    shutil.copytree(out, copied)
    before = (copied / "report.md").read_text()
    (copied / "study.json").unlink()  # stored before studies were recorded: not the built-in's
    assert main(["render", "--out", str(copied)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "none of its 10 stored cases belongs" in error, error
    assert (copied / "report.md").read_text() == before  # nothing overwritten
    other = tmp_path / "other.toml"
    other.write_text(study.read_text().replace('name = "small"', 'name = "other"'))
    assert main(["render", "--study", str(other), "--out", str(out)]) == 2
    assert "belong to study 'small', not 'other'" in capsys.readouterr().err
    moved = tmp_path / "moved.toml"
    shutil.copy(study, moved)
    assert main(["report", str(moved), "--out", str(tmp_path / "m"), "--resume"]) == 0
    moved.unlink()
    capsys.readouterr()
    assert main(["render", "--out", str(tmp_path / "m")]) == 2
    assert "is gone; give it with --study" in capsys.readouterr().err


def test_baseline_passes_unchanged_and_catches_an_order_drop(report, tmp_path, capsys, monkeypatch):
    study, out = report
    baseline = tmp_path / "baseline"
    assert main(["baseline", "save", str(baseline), str(study), "--results", str(out)]) == 0
    assert (
        main(["check", "--baseline", str(baseline), str(study), "--out", str(tmp_path / "a")]) == 0
    )
    assert "within its baseline tolerance" in capsys.readouterr().out

    class HalfOrderLie(Splitting):
        """The Lie step plus a sqrt(dt) error: order 0.5."""

        def advance(self, flow, span, u, on_step=None):
            u = super().advance(flow, span, u, on_step)
            return u + (span.length / span.steps) ** 0.5

    lie = METHODS["lie"]
    broken = HalfOrderLie("lie", 1, lie.sequence, EULER, AMBIENT, enters_constraint_set=False)
    monkeypatch.setitem(METHODS, "lie", broken)
    assert (
        main(["check", "--baseline", str(baseline), str(study), "--out", str(tmp_path / "b")]) == 1
    )
    diff = capsys.readouterr().out
    line = next(x for x in diff.splitlines() if "lie.order" in x)
    assert line.startswith("  orders | lie | lie.order: ") and "difference(s)" in diff
    assert "(PASS) -> " in line and line.endswith("verdict PASS)") and "(FAIL)" in line


@pytest.mark.parametrize("stored", ["missing", "empty", "partial"])
def test_a_baseline_from_results_without_the_studys_cases_fails(report, tmp_path, capsys, stored):
    study, out = report
    results = tmp_path / "results"
    if stored != "missing":
        (results / "cases").mkdir(parents=True)
    if stored == "partial":  # one case of the study only
        shutil.copy(next((out / "cases").glob("*.json")), results / "cases")
    baseline = tmp_path / "baseline"
    assert main(["baseline", "save", str(baseline), str(study), "--results", str(results)]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith(f"tide: error: {results}: "), error
    assert not (baseline / "baseline.json").exists()
    assert stored != "missing" or not results.exists()  # reading does not create the folder


def test_list_names_kinds_methods_and_backends(capsys):
    assert main(["list"]) == 0
    listing = capsys.readouterr().out
    for word in (
        "time-step",
        "splitting-table",
        "grid",
        "precision-ladder",
        "well-posedness",
        "projected-rk4",
        "mpmath",
        "relu_shift",
    ):
        assert word in listing, word
    for name, factory in REGISTRY.items():  # the solvers' own names and digit ranges
        low, high = factory.digits or (None, None)
        assert (f"{name} (digits {low} to {high})" if factory.digits else name) in listing


def test_every_option_is_documented():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    assert set(commands) == {"report", "render", "list", "baseline", "check"}
    for command in commands.values():
        for action in command._actions:
            assert action.help, (command.prog, action.dest)


def test_version_and_usage_errors():
    version = subprocess.run(
        [sys.executable, "-m", "reports.cli", "--version"], capture_output=True, text=True
    )
    assert version.returncode == 0 and version.stdout.startswith("tide 0.")
    usage = subprocess.run(
        [sys.executable, "-m", "reports.cli", "report", "--bogus"], capture_output=True, text=True
    )
    assert usage.returncode == 2 and "unrecognized arguments: --bogus" in usage.stderr
