"""Wall time of the built-in study, serial against two local worker processes.

Target: with 2 workers the default study runs at least 1.6x faster than serially. Both
runs happen in the same session on the same machine (the ratio is the measurement).

    python -m pytest benchmarks/test_runner.py --benchmark-only -s -n 0
"""

from __future__ import annotations

import pytest

from reports.runner import run_study
from reports.store import ResultStore
from reports.study import default_study

SPEEDUP_TARGET = 1.6
medians: dict[int, float] = {}


@pytest.mark.parametrize("jobs", [1, 2])
def test_default_study(benchmark, tmp_path, jobs):
    benchmark.group = "default study"
    study = default_study()

    def run():
        return run_study(study, ResultStore(tmp_path / f"jobs{jobs}"), jobs=jobs, progress=None)

    records = benchmark.pedantic(run, rounds=1, warmup_rounds=0)
    assert all(record["status"] == "ok" for record in records.values())
    medians[jobs] = benchmark.stats.stats.median


@pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")
def test_targets(benchmark):
    if set(medians) != {1, 2}:
        pytest.fail(f"run the whole module with --benchmark-only; measured {sorted(medians)}")
    speedup = medians[1] / medians[2]
    print(
        f"\ndefault study: serial {medians[1]:.1f} s, 2 workers {medians[2]:.1f} s, "
        f"speedup {speedup:.2f}x (target {SPEEDUP_TARGET}x)"
    )
    assert speedup >= SPEEDUP_TARGET
