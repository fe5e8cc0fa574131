"""Grid refinement of the attention operator (convergence.grid) as a study experiment.

kind "grid": a kernel family ("fourier": periodic data, "legendre": not), quadrature
rules, sizes, the axis refined, and optional expected orders per rule; one case per
rule. A rule whose local order reaches 10 is reported as spectral.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from convergence.grid import AXES, grid_study
from reports.experiments.base import (
    Evidence,
    Experiment,
    Figure,
    Record,
    Section,
    order_merit,
    slug,
)
from reports.figures import convergence_figure
from reports.schema import Field, array_of, integer, one_of, orders_by
from reports.tables import ORDER_HEADERS, latex_table, markdown_table, order_cells
from reports.tables import number as cell
from solvers.grids import RULES
from solvers.kernels import ContinuousLayer, SeriesKernel

FAMILIES = ("fourier", "legendre")


FIELDS = {
    "family": Field(one_of(FAMILIES), "legendre"),
    "rules": Field(array_of(one_of(RULES), distinct=True)),
    "sizes": Field(array_of(integer(2, 4096), minimum=3, distinct=True)),
    "axis": Field(one_of(AXES), "all"),
    "reference_size": Field(integer(8, 4096), 128),
    "expected": Field(orders_by(RULES, "rule"), {}),
}


def _cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    shared = {k: v for k, v in params.items() if k not in ("rules", "expected")}
    return [
        (rule, shared | {"rule": rule, "expected": params["expected"].get(rule)})
        for rule in params["rules"]
    ]


def run(case: dict[str, Any], seed: int) -> dict[str, Any]:
    layer = ContinuousLayer.random(seed, heads=2, family=case["family"])
    f = SeriesKernel.random(np.random.default_rng(seed + 1), case["family"])
    study = grid_study(
        layer,
        f,
        case["rule"],
        case["sizes"],
        axis=case["axis"],
        reference_size=case["reference_size"],
        seed=seed,
        expected=case["expected"],
    )
    return study.to_json() | {"family": case["family"]}


def render(title: str, records: list[Record]) -> Section:
    done = [r["result"] for r in records if r["status"] == "ok"]
    rows, series, merit = [], [], {}
    for result in done:
        estimate = result["estimate"]
        kind = "spectral" if result["spectral"] else "algebraic"
        rows.append(
            [
                result["rule"],
                result["family"],
                result["axis"],
                *order_cells(estimate),
                kind,
                cell(result["errors"][-1]),
            ]
        )
        series.append(
            (
                f"{result['rule']}: spectral" if result["spectral"] else result["rule"],
                [1 / n for n in result["sizes"]],
                result["errors"],
                None if result["spectral"] else estimate,
            )
        )
        merit[f"{result['rule']}.finest_error"] = {"value": result["errors"][-1]}
        if not result["spectral"]:
            merit[f"{result['rule']}.order"] = order_merit(estimate)
    headers = ["rule", "data", "axis", *ORDER_HEADERS, "convergence", "finest error"]
    markdown = (
        "Discretised attention at fixed probe points against a fine Gauss-Legendre grid.\n\n"
        + markdown_table(headers, rows)
    )
    figures = []
    if series:
        figures.append(
            Figure(
                slug(title),
                f"{title}: attention-operator error against the grid size h = 1/n.",
                convergence_figure(title, "h = 1/n", series),
            )
        )
    evidence = []
    if done:
        ok = all(r["spectral"] or r["estimate"]["verdict"] == "PASS" for r in done)
        evidence.append(
            Evidence(
                "The grid discretisation converges to the continuous attention operator",
                "verified" if ok else "qualified",
                "; ".join(
                    f"{r['rule']} on {r['family']} data: "
                    + ("spectral" if r["spectral"] else f"order {r['estimate']['order']:.2f}")
                    for r in done
                ),
            )
        )
    return Section(
        title, markdown, figures, latex_table(f"{title}: orders", headers, rows), evidence, merit
    )


GRID = Experiment(
    "grid",
    "quadrature error of the attention operator as the grid refines (one case per rule)",
    FIELDS,
    _cases,
    run,
    render,
)
