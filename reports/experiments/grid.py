"""Grid refinement of the attention operator (convergence.grid) as a study experiment.

kind "grid": a kernel family ("fourier": periodic data, "legendre": not), quadrature
rules, sizes, the axis refined, and optional expected orders per rule; one case per
rule. A rule whose local order reaches 10 is reported as spectral.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from convergence.grid import AXES, GridStudy, grid_study
from convergence.order import OrderVerdict
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
from reports.figures import convergence_figure, named_figure
from reports.merit import growth_merit, order_merit
from reports.schema import Field, array_of, integer, one_of, orders_by
from reports.tables import ORDER_HEADERS, latex_table, markdown_table, order_cells
from reports.tables import number as cell
from solvers.space.grids import RULES
from solvers.space.kernels import ContinuousLayer, SeriesKernel

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


@dataclass(frozen=True)
class GridRun(GridStudy):
    """A grid study on the data of one kernel family."""

    family: str


def run(case: dict[str, Any], seed: int) -> GridRun:
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
    return extended(GridRun, study, family=case["family"])


def converges(study: GridStudy) -> bool:
    """Whether a grid study shows convergence: spectral (a local order reaches
    convergence.grid.SPECTRAL_ORDER), or an order estimate that PASSes (against the
    expected order when one is given)."""
    return study.spectral or study.estimate.verdict == OrderVerdict.PASS


def judge(records: list[Record[GridRun]]) -> Judgement:
    """Each rule's finest error (and order, unless spectral) as figures of merit; the grid
    limit is verified when every rule converges (`converges`), qualified otherwise."""
    done = results(records)
    if not done:
        return Judgement()
    merit = {}
    for result in done:
        merit[f"{result.rule}.finest_error"] = growth_merit(result.errors[-1])
        if not result.spectral:
            merit[f"{result.rule}.order"] = order_merit(result.estimate)
    found = "; ".join(
        f"{r.rule} on {r.family} data: "
        + ("spectral" if r.spectral else f"order {r.estimate.order:.2f} ({r.estimate.verdict})")
        for r in done
    )
    ok = all(converges(r) for r in done)
    return Judgement(
        [Evidence(Claim.GRID_LIMIT, verified_or(ok, ClaimVerdict.QUALIFIED), found)], merit
    )


def render(title: str, records: list[Record[GridRun]]) -> Section:
    done = results(records)
    rows, series = [], []
    for result in done:
        kind = "spectral" if result.spectral else "algebraic"
        rows.append(
            [
                result.rule,
                result.family,
                result.axis,
                *order_cells(result.estimate),
                kind,
                cell(result.errors[-1]),
            ]
        )
        series.append(
            (
                f"{result.rule}: spectral" if result.spectral else result.rule,
                [1 / n for n in result.sizes],
                result.errors,
                None if result.spectral else result.estimate,
            )
        )
    headers = ["rule", "data", "axis", *ORDER_HEADERS, "convergence", "finest error"]
    markdown = (
        "Discretised attention at fixed probe points against a fine Gauss-Legendre grid.\n\n"
        + markdown_table(headers, rows)
    )
    figures = named_figure(
        title,
        f"{title}: attention-operator error against the grid size h = 1/n.",
        series,
        lambda: convergence_figure(title, "h = 1/n", series),
    )
    return Section(title, markdown, figures, latex_table(f"{title}: orders", headers, rows))


GRID = Experiment(
    "grid",
    "quadrature error of the attention operator as the grid refines (one case per rule)",
    FIELDS,
    _cases,
    {"grid": CaseKind(run, GridRun)},
    render,
    judge,
)
