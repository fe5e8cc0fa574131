"""Baselines for regression tests: the figures of merit of a study, with tolerances.

Every experiment's judge names its figures of merit (reports.judging: judged from the
stored records, no figure drawn), each with the rule and the tolerance a recomputation
must keep (reports.merit: exact counts and verdicts, numbers within a tolerance derived
from their own error, bounded quantities, orders in their interval, errors at a floor).
A baseline stores them as they are, so baseline.json states every tolerance; `tide check`
recomputes the study and lists each figure that broke its rule by experiment, case,
figure, old and new value, and tolerance.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reports.judging import judgements
from reports.merit import Merit, kept, tolerance_text
from reports.store import write_atomically
from reports.study import Study
from solvers.errors import TideError

BASELINE_FILE = "baseline.json"


def figures_of_merit(study: Study, records: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each experiment's figures of merit, by name: judged from the records, never drawn."""
    return {name: judged.figures_of_merit for name, judged in judgements(study, records).items()}


def save_baseline(
    study: Study,
    records: dict[str, dict[str, Any]],
    directory: str | Path,
    source: str = "the results",
) -> Path:
    """Write the study's figures of merit to `directory`/baseline.json; every case of the
    study must be among `records` (from `source`) and have finished."""
    cases = study.cases()
    missing = [case.id for case in cases if case.id not in records]
    if missing:
        raise TideError(
            f"{source}: no stored result for {len(missing)} of the study's {len(cases)} "
            f"cases (first: {missing[0]!r}); a baseline needs every case"
        )
    failed = [r["id"] for r in records.values() if r["status"] != "ok"]
    if failed:
        raise TideError(f"cannot save a baseline with failed cases: {', '.join(failed)}")
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / BASELINE_FILE
    baseline = {
        "study": study.name,
        "source": study.source,
        "figures": figures_of_merit(study, records),
    }
    write_atomically(path, json.dumps(baseline, indent=1) + "\n")
    return path


def load_baseline(directory: str | Path) -> dict[str, Any]:
    path = Path(directory) / BASELINE_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise TideError(f"{path}: not a readable baseline ({exc})") from None


def difference(experiment: str, name: str, old: Merit, new: Merit | None) -> str | None:
    """A one-line difference (experiment, case, figure, old, new, tolerance), or None when
    `new` keeps `old`'s rule."""
    where = f"{experiment} | {old.get('case', '-')} | {name}"
    if new is None:
        return f"{where}: missing from the new results (was {old.get('value')!r})"
    if kept(old, new):
        return None
    return f"{where}: {_shown(old)} -> {_shown(new)} (tolerance: {tolerance_text(old)})"


def _shown(merit: Merit) -> str:
    value = repr(merit.get("value"))
    return f"{value} ({merit['verdict']})" if "verdict" in merit else value


def check_against(
    baseline: dict[str, Any], study: Study, records: dict[str, dict[str, Any]]
) -> list[str]:
    """Every difference between the baseline and the study's new figures of merit."""
    if baseline.get("study") != study.name:
        raise TideError(f"the baseline is of study {baseline.get('study')!r}, not {study.name!r}")
    new = figures_of_merit(study, records)
    differences = [
        f"{r['id']}: failed: {r['error']}" for r in records.values() if r["status"] != "ok"
    ]
    for section, figures in baseline["figures"].items():
        for name, old in figures.items():
            line = difference(section, name, old, new.get(section, {}).get(name))
            if line:
                differences.append(line)
    return differences
