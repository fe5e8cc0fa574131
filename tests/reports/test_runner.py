"""The runner: serial, local processes and Dask give identical records; an interrupted
run resumes without losing finished cases; a failing case is recorded and the rest go on."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from reports.experiments import EXPERIMENTS
from reports.experiments.base import Case
from reports.runner import EXPECTED_SECONDS, Eta, run_study
from reports.store import ResultStore
from reports.study import default_study, load_study
from solvers import InvalidInputError
from tests.reports.studies import comparable, write_study


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serial")
    study = load_study(write_study(folder))
    return study, run_study(study, ResultStore(folder / "out"), progress=None)


def test_serial_run_stores_one_record_per_case(serial):
    study, records = serial
    assert list(records) == [case.id for case in study.cases()]
    assert all(r["status"] == "ok" for r in records.values())


def test_two_local_processes_give_identical_records(serial, tmp_path):
    study, records = serial
    parallel = run_study(study, ResultStore(tmp_path), jobs=2, progress=None)
    assert comparable(parallel) == comparable(records)


def test_a_local_dask_cluster_gives_identical_records(serial, tmp_path):
    pytest.importorskip("distributed")
    study, records = serial
    on_dask = run_study(study, ResultStore(tmp_path), dask_local=2, progress=None)
    assert comparable(on_dask) == comparable(records)


def test_kill_minus_nine_then_resume_equals_an_uninterrupted_run(serial, tmp_path):
    _, records = serial
    path = write_study(tmp_path)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "reports.cli", "report", str(path), "--out", str(out)]
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL, start_new_session=True)
    cases = out / "cases"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(cases.glob("*.json"))) < 3:
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    finished = list(cases.glob("*.json"))
    assert 3 <= len(finished) < len(records), "the kill came too late to test anything"
    for record in finished:  # every stored record is whole
        json.loads(record.read_text())
    resumed = subprocess.run([*command, "--resume"], capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(finished)} already stored" in resumed.stderr
    final = ResultStore(out).records()
    assert comparable(final) == comparable(records)
    assert not list(cases.glob("*.tmp"))


def test_a_resumed_run_discards_the_partial_writes_of_a_killed_one(serial, tmp_path):
    """A kill during a write leaves its temporary file (the record itself is never
    partial); the resumed run removes it before it starts."""
    study, records = serial
    store = ResultStore(tmp_path)
    for record in list(records.values())[:2]:
        store.write(record)
    stale = store.folder / "tmpkilled.tmp"
    stale.write_text('{"id": "half a rec', encoding="utf-8")
    resumed = run_study(study, store, resume=True, progress=None)
    assert comparable(resumed) == comparable(records)
    assert not stale.exists()


def test_a_failing_case_is_recorded_and_the_others_go_on(tmp_path, monkeypatch):
    study = load_study(write_study(tmp_path))

    def broken(case, seed):
        raise ValueError("the quadrature exploded")

    grid = EXPERIMENTS["grid"]
    kinds = {"grid": dataclasses.replace(grid.case_kinds["grid"], run=broken)}
    monkeypatch.setitem(EXPERIMENTS, "grid", dataclasses.replace(grid, case_kinds=kinds))
    records = run_study(study, ResultStore(tmp_path / "out"), progress=None)
    failed = [r for r in records.values() if r["status"] == "error"]
    assert [r["id"] for r in failed] == ["grid/midpoint"]
    assert failed[0]["error"] == "ValueError: the quadrature exploded"
    assert sum(r["status"] == "ok" for r in records.values()) == len(records) - 1
    # a resumed run tries the failed case again, and only it
    monkeypatch.undo()
    again = run_study(study, ResultStore(tmp_path / "out"), resume=True, progress=None)
    assert all(r["status"] == "ok" for r in again.values())


def test_progress_shows_cases_done_running_and_eta(tmp_path):
    stream = io.StringIO()
    study = load_study(write_study(tmp_path))
    run_study(study, ResultStore(tmp_path / "out"), progress=stream)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("small: 10 cases, 0 already stored, 10 to run on 1 worker")
    assert lines[1].startswith("[1/10] running 1, ETA ") and lines[-1].startswith("[10/10]")


def test_bad_runner_options(serial, tmp_path):
    study, _ = serial
    with pytest.raises(InvalidInputError, match="jobs must be >= 1"):
        run_study(study, ResultStore(tmp_path), jobs=0)


def test_resume_reruns_a_result_stored_in_an_older_shape(serial, tmp_path):
    """A stored case whose result no longer reads as this version's result type (written
    by a version with another result shape) is run again, not trusted and then unreadable."""
    study, records = serial
    store = ResultStore(tmp_path)
    run_study(study, store, progress=None)
    stale = next(iter(store.records().values()))
    path = next(
        p
        for p in (tmp_path / "cases").glob("*.json")
        if json.loads(p.read_text())["id"] == stale["id"]
    )
    old = json.loads(path.read_text())
    old["result"] = {"a field this version never had": 1.0}
    path.write_text(json.dumps(old))
    messages = io.StringIO()
    resumed = run_study(study, store, resume=True, progress=messages)
    assert f"{len(records) - 1} already stored" in messages.getvalue()
    assert comparable(resumed) == comparable(records)


def _cases(*kinds: tuple[str, str]) -> list[Case]:
    """One case per (experiment, kind), numbered."""
    return [Case(f"{e}/{n}", e, kind, str(n), {}, 0) for n, (e, kind) in enumerate(kinds)]


def _finish(eta: Eta, case: Case, seconds: float) -> None:
    eta.finished({"id": case.id, "wall_time": seconds})


def test_the_eta_expects_a_long_kind_before_any_of_its_cases_ran():
    """Ten claims cases that took twice what their kind expects, then a network: the ETA is
    the network's expectation at the run's pace (twice), where the mean time per case so
    far said 2 x 0.14 s."""
    cases = _cases(*[("claims", "claims")] * 10, ("net", "network-limit"))
    eta = Eta(cases, workers=1)
    for case in cases[:10]:
        _finish(eta, case, 2 * EXPECTED_SECONDS["claims"])
    assert eta.seconds() == pytest.approx(2 * EXPECTED_SECONDS["network-limit"])


def test_the_eta_expects_an_experiments_cases_to_take_their_finished_siblings_mean():
    cases = _cases(("a", "cvt"), ("a", "cvt"), ("a", "cvt"), ("b", "grid"))
    eta = Eta(cases, workers=1)
    _finish(eta, cases[0], 3.0)
    _finish(eta, cases[1], 1.0)
    pace = 4.0 / (2 * EXPECTED_SECONDS["cvt"])
    assert eta.seconds() == pytest.approx(2.0 + EXPECTED_SECONDS["grid"] * pace)


def test_the_eta_shares_the_work_among_workers_but_waits_for_the_longest_case():
    cases = _cases(("a", "claims"), ("b", "network-limit"), ("c", "network-limit"))
    eta = Eta(cases, workers=4)
    _finish(eta, cases[0], EXPECTED_SECONDS["claims"])
    assert eta.seconds() == pytest.approx(EXPECTED_SECONDS["network-limit"])
    claims, network = EXPECTED_SECONDS["claims"], EXPECTED_SECONDS["network-limit"]
    two = Eta(cases, workers=2)
    assert two.seconds() == pytest.approx((claims + 2 * network) / 2)
    _finish(two, cases[1], 10 * network)  # the pace is now 10: the other network takes 10x
    assert two.seconds() == pytest.approx(10 * network)


def test_every_kind_of_the_built_in_study_has_an_expected_time():
    assert {case.kind for case in default_study().cases()} <= set(EXPECTED_SECONDS)
