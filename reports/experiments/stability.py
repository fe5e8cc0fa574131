"""Stability (properties.stability: stability_map, lyapunov) as a study experiment.

kind "stability": case "map" measures the largest stable dt of each method over weight
scales x attention temperatures on the damped-attention family (random attention plus an
exactly linear damping -U K of the given stiffness, norm "none", an analytic field)
against the linear-stability prediction from the field's Jacobian spectrum; case
"lyapunov" measures per-layer amplification and finite-time Lyapunov exponents over
depth for each method on a post-LN problem.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from properties.claim_check import CheckVerdict
from properties.stability.damped_attention import damped_attention_layer
from properties.stability.lyapunov import PerturbationGrowth, perturbation_growth
from properties.stability.stability_map import StabilityMap, stability_map
from properties.stability.stability_point import PointVerdict
from reports.claims import Claim, ClaimVerdict, Evidence
from reports.experiments.base import CaseKind, Judgement, Section, by_case_kind, no_judgement
from reports.figures import Figure, lines_figure, map_figure
from reports.merit import bounded_merit
from reports.problems import build_problem, problem_spec, with_default_problem
from reports.schema import Field, array_of, integer, number, one_of
from reports.tables import markdown_table, slug
from reports.tables import number as cell
from solvers import PiecewiseControls, Problem
from solvers.methods.extrapolation import Extrapolation
from solvers.solving import METHODS

ANALYTIC_REFERENCE = Extrapolation(name="extrapolation-order-12", levels=6, events=False)
"""Order-12 extrapolation without event location: the damped family's field is analytic."""

FIELDS = {
    "methods": Field(array_of(one_of(("lie", "projected-rk4", "projected-rk2")), distinct=True)),
    "scales": Field(array_of(number(positive=True), distinct=True)),
    "temperatures": Field(array_of(number(positive=True), distinct=True)),
    "stiffness": Field(number(positive=True, low=1.0), 20.0),
    "attention_scale": Field(number(positive=True), 2.0),
    "d": Field(integer(1, 64), 4),
    "tokens": Field(integer(1, 64), 2),
    "max_steps_per_unit": Field(integer(2, 4096), 128),
    "lyapunov_methods": Field(
        array_of(one_of(tuple(METHODS)), distinct=True), ["lie", "strang-rk2", "projected-rk4"]
    ),
    "lyapunov_steps_per_unit": Field(integer(1, 1024), 4),
    "problem": Field(problem_spec, None, "the post-LN problem of the Lyapunov exponents"),
}


@dataclass(frozen=True)
class Lyapunov:
    """Perturbation growth and finite-time Lyapunov exponents per method."""

    growth: list[PerturbationGrowth]


def _map(case: dict[str, Any], seed: int) -> StabilityMap:
    rng = np.random.default_rng(seed)
    layer = damped_attention_layer(
        case["d"], 1, case["stiffness"], rng, attention_scale=case["attention_scale"]
    )
    problem = Problem(
        rng.standard_normal((case["tokens"], case["d"])),
        PiecewiseControls([layer]),
        1,
        norm="none",
    )
    return stability_map(
        problem,
        case["methods"],
        scales=case["scales"],
        temperatures=case["temperatures"],
        reference=ANALYTIC_REFERENCE,
        reference_steps_per_unit=32,
        max_steps_per_unit=case["max_steps_per_unit"],
        samples_per_unit=2,
    )


def _lyapunov(case: dict[str, Any], seed: int) -> Lyapunov:
    problem = build_problem(case["problem"], seed)
    return Lyapunov(
        [
            perturbation_growth(
                problem, method, case["lyapunov_steps_per_unit"], precision="float64"
            )
            for method in case["lyapunov_methods"]
        ]
    )


MAP_VERDICTS = {
    CheckVerdict.HOLDS: ClaimVerdict.VERIFIED,
    CheckVerdict.FAILS: ClaimVerdict.REFUTED,
    PointVerdict.NOT_APPLICABLE: ClaimVerdict.QUALIFIED,
}
"""The claim's verdict from the map's: every applicable point agrees with the linear
prediction within the map's tolerance (verified), one disagrees (refuted), no point is
applicable (qualified)."""


def _worst_disagreement(stability: StabilityMap) -> float | None:
    """The largest relative disagreement with the linear prediction over the points where
    the linearisation applies (None where it applies nowhere)."""
    applicable = [p for p in stability.points if p.applies]
    return max((abs(p.relative_disagreement) for p in applicable), default=None)


def map_evidence(stability: StabilityMap) -> Evidence:
    applicable = sum(p.applies for p in stability.points)
    worst = _worst_disagreement(stability)
    return Evidence(
        Claim.STEP_SIZE_STABILITY,
        MAP_VERDICTS[stability.verdict],
        f"{applicable} of {len(stability.points)} points applicable; "
        + (
            f"largest disagreement {worst:.1%} (agreement: within {stability.tolerance:.0%})"
            if worst is not None
            else "none compared"
        ),
    )


def _map_judge(maps: list[StabilityMap]) -> Judgement:
    """The worst disagreement with the linear prediction as a figure of merit (at most
    20%, where the linearisation applies anywhere), and `map_evidence`."""
    stability = maps[0]
    worst = _worst_disagreement(stability)
    merit = {}
    if worst is not None:
        merit["map.worst_disagreement"] = bounded_merit(worst, 0.0, 0.2)
    return Judgement([map_evidence(stability)], merit)


def _map_render(title: str, maps: list[StabilityMap]) -> Section:
    stability = maps[0]
    rows = []
    for p in stability.points:
        rows.append(
            [
                p.method,
                cell(p.scale),
                cell(p.temperature),
                cell(p.measured_dt),
                cell(p.prediction.predicted_dt if p.prediction else None),
                cell(p.relative_disagreement),
                "yes" if p.applies else "no: " + "; ".join(p.reasons),
            ]
        )
    markdown = (
        f"**Step-size stability map** (damped-attention family; a dt is stable when the "
        f"perturbation growth stays within {stability.factor:g}x the flow's). Verdict: "
        f"{stability.verdict}.\n\n"
        + markdown_table(
            [
                "method",
                "weight scale",
                "temperature",
                "measured dt",
                "linear prediction",
                "relative disagreement",
                "linearisation applies",
            ],
            rows,
        )
    )
    figures = []
    for method in dict.fromkeys(p.method for p in stability.points):
        points = [p for p in stability.points if p.method == method]
        scales = sorted({p.scale for p in points})
        temperatures = sorted({p.temperature for p in points})
        grid = np.full((len(scales), len(temperatures)), np.nan)
        for p in points:
            if p.measured_dt is not None:
                grid[scales.index(p.scale), temperatures.index(p.temperature)] = p.measured_dt
        figures.append(
            Figure(
                slug(f"{title} map {method}"),
                f"Largest stable dt of {method} over weight scale and temperature.",
                map_figure(
                    f"{title}: {method}",
                    "temperature",
                    "weight scale",
                    temperatures,
                    scales,
                    grid,
                    "largest stable dt",
                ),
            )
        )
    return Section(title, markdown, figures)


def _lyapunov_render(title: str, cases: list[Lyapunov]) -> Section:
    growth = cases[0].growth
    series = [(g.method, g.times, g.ftle) for g in growth]
    rows = [
        [
            g.method,
            ", ".join(f"{a:.4g}" for a in g.amplification),
            ", ".join(f"{x:.4g}" for x in g.ftle),
        ]
        for g in growth
    ]
    markdown = "**Perturbation growth over depth.**\n\n" + markdown_table(
        ["method", "amplification per layer", "FTLE at each layer boundary"], rows
    )
    figure = Figure(
        slug(f"{title} lyapunov"),
        "Finite-time Lyapunov exponents.",
        lines_figure(
            f"{title}: FTLE over depth", "t (layers)", "FTLE", series, logx=False, logy=False
        ),
    )
    return Section(title, markdown, [figure])


STABILITY = by_case_kind(
    "stability",
    "step-size stability maps against the linear prediction, and Lyapunov exponents over depth",
    FIELDS,
    {
        "map": CaseKind(_map, StabilityMap, _map_render, _map_judge),
        "lyapunov": CaseKind(_lyapunov, Lyapunov, _lyapunov_render, no_judgement),
    },
    with_default_problem,
)
