"""Baselines for regression tests: the figures of merit of a study, with tolerances.

Every experiment's judge names its figures of merit (reports.judging: judged from the
stored records, no figure drawn). A baseline stores them with the rule each must keep
when the study is recomputed:

- an order (value, 95% interval, verdict): the new order lies in the stored interval
  widened by ORDER_SLACK, and the verdict is unchanged;
- an error (value only): the new one is at most ERROR_GROWTH times the stored one (errors
  at the rounding floor move between machines by small factors; a real regression of the
  scheme moves them by orders of magnitude);
- a bounded quantity (value with low and high, no verdict): it stays within [low, high];
- a verdict alone: unchanged.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from reports.judging import judgements
from reports.store import write_atomically
from reports.study import Study
from solvers.errors import TideError

ORDER_SLACK = 0.1
ERROR_GROWTH = 2.0
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
        "rules": {"order_slack": ORDER_SLACK, "error_growth": ERROR_GROWTH},
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


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def compare(name: str, old: dict[str, Any], new: dict[str, Any] | None) -> str | None:
    """A one-line difference, or None when `new` keeps `old`'s rule."""
    if new is None:
        return f"{name}: missing from the new results"
    value = new.get("value")
    if "verdict" in old and old["verdict"] != new.get("verdict"):
        return f"{name}: verdict {old['verdict']} -> {new.get('verdict')} (value {value})"
    if "low" in old and "high" in old and "verdict" in old:  # an order with its interval
        low, high = old["low"] - ORDER_SLACK, old["high"] + ORDER_SLACK
        if not (_finite(value) and low <= value <= high):
            return f"{name}: order {value} outside the baseline's [{low:.4g}, {high:.4g}]"
    elif "low" in old and "high" in old:
        if not (_finite(value) and old["low"] <= value <= old["high"]):
            return f"{name}: {value} outside [{old['low']}, {old['high']}]"
    elif _finite(old.get("value")):
        if not (_finite(value) and value <= ERROR_GROWTH * old["value"] + 1e-300):
            return f"{name}: {value} grew past {ERROR_GROWTH:g} x the baseline's {old['value']:.4g}"
    elif old.get("value") != value:
        return f"{name}: {old.get('value')!r} -> {value!r}"
    return None


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
            line = compare(f"{section} / {name}", old, new.get(section, {}).get(name))
            if line:
                differences.append(line)
    return differences
