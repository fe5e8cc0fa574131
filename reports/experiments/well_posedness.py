"""Continuous dependence against Gronwall bounds (properties.well_posedness): an experiment.

kind "well-posedness": the first `configurations` of the seeded default sweep
(properties.well_posedness.dependence_sweep.DEFAULT_CONFIGURATIONS: post, pre and none
norms, d 4 and 8, two weight scales, one and two layers), one case per configuration;
each measures the Lipschitz constants of u0 -> u(T) and theta -> u(T) and their ratios to
the bounds.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from properties.claim_check import CheckVerdict
from properties.well_posedness.continuous_dependence import (
    ContinuousDependence,
    continuous_dependence,
)
from properties.well_posedness.dependence_sweep import DEFAULT_CONFIGURATIONS, Configuration
from reports.claims import Claim, ClaimVerdict, Evidence, verified_or
from reports.experiments.base import (
    CaseKind,
    Experiment,
    Judgement,
    Record,
    Section,
    extended,
    results,
)
from reports.figures import Figure, lines_figure
from reports.merit import bounded_merit
from reports.schema import Field, integer
from reports.tables import latex_table, markdown_table, number, slug

FIELDS = {
    "configurations": Field(integer(1, len(DEFAULT_CONFIGURATIONS)), len(DEFAULT_CONFIGURATIONS)),
    "directions": Field(integer(1, 64), 3),
}


def _cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"configuration {k}", {"index": k, "directions": params["directions"]})
        for k in range(params["configurations"])
    ]


@dataclass(frozen=True)
class ConfiguredDependence(ContinuousDependence):
    """Continuous dependence measured on one configuration of the sweep."""

    configuration: Configuration = field(kw_only=True)


def run(case: dict[str, Any], seed: int) -> ConfiguredDependence:
    configuration = DEFAULT_CONFIGURATIONS[case["index"]]
    result = continuous_dependence(
        configuration.problem(), directions=case["directions"], seed=configuration.seed
    )
    return extended(ConfiguredDependence, result, configuration=configuration)


def _holding(done: list[ConfiguredDependence]) -> int:
    """How many configurations are within their bounds (up to rounding: verdict holds)."""
    return sum(r.verdict == CheckVerdict.HOLDS for r in done)


def well_posedness_evidence(done: list[ConfiguredDependence]) -> Evidence:
    """Verified when every configuration's measured Lipschitz constants are within their
    Gronwall bounds (up to rounding; each result's verdict holds), refuted otherwise."""
    holds = _holding(done)
    return Evidence(
        Claim.WELL_POSED,
        verified_or(holds == len(done), ClaimVerdict.REFUTED),
        f"measured Lipschitz constants within their Gronwall bounds in {holds} of "
        f"{len(done)} configurations",
    )


def _ratios(done: list[ConfiguredDependence]) -> tuple[list[float], list[float]]:
    """Measured Lipschitz constant / Gronwall bound per configuration: initial data, controls."""
    return [r.initial.ratio for r in done], [r.controls.ratio for r in done]


def render(title: str, records: list[Record[ConfiguredDependence]]) -> Section:
    done = results(records)
    initial, control = _ratios(done)
    rows = []
    for result, initial_ratio, control_ratio in zip(done, initial, control, strict=True):
        c = result.configuration
        rows.append(
            [
                f"{c.norm} d={c.d} N={c.tokens} L={c.layers} scale={c.weight_scale}",
                number(result.initial.measured),
                number(result.initial.bound),
                number(initial_ratio),
                number(result.controls.measured),
                number(result.controls.bound),
                number(control_ratio),
                str(result.verdict),
            ]
        )
    headers = [
        "configuration",
        "u0 Lipschitz",
        "u0 bound",
        "ratio",
        "theta Lipschitz",
        "theta bound",
        "ratio",
        "verdict",
    ]
    holds = _holding(done)
    summary = ""
    if rows:
        summary = (
            f"Measured / bound, initial data: min {min(initial):.3g}, median "
            f"{statistics.median(initial):.3g}, max {max(initial):.3g}; controls: min "
            f"{min(control):.3g}, median {statistics.median(control):.3g}, max "
            f"{max(control):.3g}. {holds} of {len(rows)} configurations within their bounds.\n\n"
        )
    markdown = summary + markdown_table(headers, rows)
    figures = []
    if rows:
        figures.append(
            Figure(
                slug(title),
                "Measured Lipschitz constant / Gronwall bound per configuration.",
                lines_figure(
                    title,
                    "configuration",
                    "measured / bound",
                    [
                        ("initial data", list(range(len(initial))), initial),
                        ("controls", list(range(len(control))), control),
                    ],
                    logx=False,
                ),
            )
        )
    return Section(title, markdown, figures, latex_table(title, headers, rows))


def judge(records: list[Record[ConfiguredDependence]]) -> Judgement:
    """The largest measured / bound ratios (initial data, controls) as figures of merit,
    within [0, 1], and `well_posedness_evidence`."""
    done = results(records)
    initial, control = _ratios(done)
    merit = {
        "max_initial_ratio": bounded_merit(max(initial, default=0.0), 0, 1),
        "max_control_ratio": bounded_merit(max(control, default=0.0), 0, 1),
    }
    return Judgement([well_posedness_evidence(done)] if done else [], merit)


WELL_POSEDNESS = Experiment(
    "well-posedness",
    "Lipschitz constants of u0 -> u(T) and theta -> u(T) against Gronwall bounds",
    FIELDS,
    _cases,
    {"well-posedness": CaseKind(run, ConfiguredDependence)},
    render,
    judge,
)
