"""Judge a study's stored records without drawing: each experiment's Judgement (its
evidence on the claims and its figures of merit), by experiment name.

The report joins these judgements to what each experiment draws (reports.render);
`tide check` and baselines (reports.baseline) need the numbers alone, so they come here
and never draw a figure or import matplotlib (tests/reports/test_judging.py checks it).
"""

from __future__ import annotations

from typing import Any

from reports.experiments import EXPERIMENTS
from reports.experiments.base import Experiment, Judgement, Record
from reports.study import ExperimentSpec, Study


def experiment_records(
    study: Study, records: dict[str, dict[str, Any]]
) -> list[tuple[ExperimentSpec, Experiment, list[Record]]]:
    """Each experiment of the study, its kind, and its stored records (plain JSON) read
    back into typed records, in the study's case order (cases it no longer has last)."""
    order = {case.id: k for k, case in enumerate(study.cases())}
    ordered = sorted(records.values(), key=lambda r: order.get(r["id"], len(order)))
    found = []
    for spec in study.experiments:
        experiment = EXPERIMENTS[spec.kind]
        found.append(
            (
                spec,
                experiment,
                [experiment.read(r) for r in ordered if r["experiment"] == spec.name],
            )
        )
    return found


def judgements(study: Study, records: dict[str, dict[str, Any]]) -> dict[str, Judgement]:
    """Each experiment's judgement of its stored records, by experiment name, in study order."""
    return {
        spec.name: experiment.judge(mine)
        for spec, experiment, mine in experiment_records(study, records)
    }
