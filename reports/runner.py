"""Run a study's cases serially, in local processes (joblib/loky) or on a Dask cluster.

Every case is independent and deterministic (its parameters and seed are plain data),
so the three ways give identical records. Each finished case is written to the result
store at once (atomically); with `resume` the cases already stored are skipped, so an
interrupted run (Ctrl-C, kill -9) loses only the cases that were running; a stored case
whose parameters or seed no longer match the study, or that failed, runs again. A case
that raises is recorded with its error and the others go on. Every case runs its linear
algebra on one thread (threadpoolctl), a serial run too, so N workers use N cores: the
studies' matrices are small, and OpenBLAS's second thread, spinning while it waits for
work, costs CPU for no shorter wall time. Progress (cases done, running, and the time
left as `Eta` estimates it, knowing that cases differ) goes to `progress`.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any, TextIO

import numpy as np
from threadpoolctl import threadpool_limits

from reports.experiments import EXPERIMENTS
from reports.store import ResultStore
from reports.study import Case, Study
from solvers.errors import InvalidInputError, TideError
from solvers.results.provenance import versions

EXPECTED_SECONDS = {
    "claims": 0.17,
    "conditioning": 0.01,
    "depth-family": 3.4,
    "cvt": 1.2,
    "grid": 0.02,
    "invariants": 0.1,
    "layer-norm-limit": 1.1,
    "network-limit": 6.0,
    "precision-ladder": 2.5,
    "rounding-depth": 1.2,
    "splitting-table": 0.79,
    "stability": 1.6,
    "time-step": 0.41,
    "transformer-limit": 0.6,
    "vit": 0.2,
    "well-posedness": 0.16,
}
"""Seconds a case of each kind takes, the mean over the built-in study's cases of that
kind (the pace of the machine the README names; a run scales them by its own pace): what
the ETA expects of a kind before its first case finishes; a kind missing here is
expected to take their mean."""


class Eta:
    """The time left of a run: each unfinished case is expected to take the mean wall time
    of its experiment's finished cases or, before one has finished, its kind's
    EXPECTED_SECONDS times this run's pace (the finished cases' seconds over what their
    kinds expected: a slower machine or a loaded one); the remaining seconds are shared
    among the workers, but no run ends before its longest remaining case (a mean time
    per case alone would promise seconds before a case of minutes)."""

    def __init__(self, cases: list[Case], workers: int) -> None:
        self.pending = {case.id: case for case in cases}
        self.workers = workers
        self.taken: dict[str, list[float]] = {}
        self.seconds_taken = 0.0
        self.seconds_expected = 0.0

    def finished(self, record: dict[str, Any]) -> None:
        """Count a finished case (its record's id and wall time)."""
        case = self.pending.pop(record["id"])
        self.taken.setdefault(case.experiment, []).append(record["wall_time"])
        self.seconds_taken += record["wall_time"]
        self.seconds_expected += _expected(case.kind)

    def seconds(self) -> float:
        """The estimated wall time until the last pending case finishes."""
        pace = self.seconds_taken / self.seconds_expected if self.seconds_expected > 0 else 1.0
        left = [
            statistics.fmean(self.taken[case.experiment])
            if case.experiment in self.taken
            else _expected(case.kind) * pace
            for case in self.pending.values()
        ]
        return max([sum(left) / self.workers, *left], default=0.0)


def _expected(kind: str) -> float:
    return EXPECTED_SECONDS.get(kind, statistics.fmean(EXPECTED_SECONDS.values()))


def run_case(case: Case) -> dict[str, Any]:
    """The record of one case: its inputs, status "ok" with the result or "error" with the
    message (and the traceback's last lines), wall time and versions. Its linear algebra
    runs on one thread."""
    record = asdict(case) | {"versions": versions()}
    started = time.perf_counter()
    try:
        with threadpool_limits(1), np.errstate(all="ignore"):
            experiment = EXPERIMENTS[case.kind]
            result = experiment.stored(case.params, experiment.run(case.params, case.seed))
        record |= {"status": "ok", "result": result, "error": None}
    except Exception as exc:  # a failing case is recorded; the study goes on
        lines = traceback.format_exception(exc)
        record |= {
            "status": "error",
            "result": None,
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": "".join(lines[-3:]),
        }
    record["wall_time"] = time.perf_counter() - started
    return record


def _serial(cases: list[Case]) -> Iterator[dict[str, Any]]:
    for case in cases:
        yield run_case(case)


def _joblib(cases: list[Case], jobs: int) -> Iterator[dict[str, Any]]:
    from joblib import Parallel, delayed

    parallel = Parallel(n_jobs=jobs, backend="loky", return_as="generator_unordered")
    yield from parallel(delayed(run_case)(case) for case in cases)


@contextlib.contextmanager
def _dask(
    cases: list[Case], scheduler: str | None, local_workers: int | None
) -> Iterator[tuple[int, Iterator[dict[str, Any]]]]:
    """(number of workers, finished records) on the cluster at `scheduler`, or on a local
    cluster of `local_workers` processes bound to 127.0.0.1 without a dashboard."""
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise InvalidInputError(
            "the Dask runner needs dask.distributed: pip install 'tide-suite[dask]'"
        ) from None
    with contextlib.ExitStack() as stack:
        if scheduler is None:
            cluster = stack.enter_context(
                LocalCluster(
                    n_workers=local_workers,
                    threads_per_worker=1,
                    processes=True,
                    host="127.0.0.1",
                    dashboard_address=None,
                )
            )
            client = stack.enter_context(Client(cluster))
        else:
            try:
                client = stack.enter_context(Client(scheduler, timeout="30s"))
            except OSError as exc:
                raise InvalidInputError(
                    f"cannot reach the Dask scheduler at {scheduler!r}: {exc}"
                ) from None
        workers = max(1, len(client.scheduler_info()["workers"]))
        futures = client.map(run_case, cases, pure=False)
        yield workers, (future.result() for future in as_completed(futures))


def run_study(
    study: Study,
    store: ResultStore,
    *,
    jobs: int = 1,
    scheduler: str | None = None,
    dask_local: int | None = None,
    resume: bool = False,
    progress: TextIO | None = sys.stderr,
) -> dict[str, dict[str, Any]]:
    """Run every case not yet stored (all of them unless `resume`); return all records."""
    if jobs < 1:
        raise InvalidInputError(f"jobs must be >= 1, got {jobs}")
    if dask_local is not None and dask_local < 1:
        raise InvalidInputError(f"dask_local must be >= 1 worker, got {dask_local}")
    cases = study.cases()
    if resume:
        store.discard_partial()
    else:
        store.clear()
    found = store.records()
    stored = {c.id: found[c.id] for c in cases if c.id in found and _same_case(found[c.id], c)}
    todo = [case for case in cases if case.id not in stored]
    with contextlib.ExitStack() as stack:
        if scheduler is not None or dask_local is not None:
            workers, finished = stack.enter_context(_dask(todo, scheduler, dask_local))
        elif jobs > 1:
            workers, finished = jobs, _joblib(todo, jobs)
        else:
            workers, finished = 1, _serial(todo)
        _store_as_finished(study, store, finished, len(cases), len(stored), todo, workers, progress)
    records = store.records()
    return {case.id: records[case.id] for case in cases if case.id in records}


def _store_as_finished(
    study: Study,
    store: ResultStore,
    finished: Iterator[dict[str, Any]],
    total: int,
    stored: int,
    todo: list[Case],
    workers: int,
    progress: TextIO | None,
) -> None:
    """Write each record as it arrives, with a progress line."""
    _say(
        progress,
        f"{study.name}: {total} cases, {stored} already stored, "
        f"{len(todo)} to run on {workers} worker(s)",
    )
    eta = Eta(todo, workers)
    for done, record in enumerate(finished, start=1):
        store.write(record)
        eta.finished(record)
        remaining = len(todo) - done
        status = "ok" if record["status"] == "ok" else f"ERROR {record['error']}"
        _say(
            progress,
            f"[{stored + done}/{total}] running {min(workers, remaining)}, "
            f"ETA {eta.seconds():.0f} s: {record['id']} {status} "
            f"({record['wall_time']:.1f} s)",
        )


def _same_case(record: dict[str, Any], case: Case) -> bool:
    """Whether a stored record finished this very case (same parameters and seed, no error)
    and reads back into the result type of this version; a record of an edited study, a
    failed case, or a result stored by a version with another result shape is run again."""
    inputs = json.loads(json.dumps({"params": case.params, "seed": case.seed}))
    same = (
        record["status"] == "ok" and {"params": record["params"], "seed": record["seed"]} == inputs
    )
    if not same:
        return False
    try:
        EXPERIMENTS[case.kind].read(record)
    except TideError:
        return False
    return True


def _say(stream: TextIO | None, message: str) -> None:
    if stream is not None:
        print(message, file=stream, flush=True)
