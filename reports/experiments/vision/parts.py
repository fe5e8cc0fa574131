"""Report parts both vision experiments share: a time-step orders table and a 2-D grid
convergence table, each drawn with its figure (`orders_part`, `grid_part`) and judged
apart, with its claim evidence and figures of merit (`orders_judgement`, `grid_judgement`)."""

from __future__ import annotations

from convergence.grid import GridStudy
from convergence.order import OrderVerdict
from convergence.time_step import TimeStepStudy
from reports.claims import Claim, ClaimVerdict, Evidence, verified_or
from reports.experiments.base import Judgement, Section
from reports.figures import Figure, convergence_figure, time_step_series
from reports.merit import order_merit
from reports.tables import ORDER_HEADERS, markdown_table, order_cells, slug
from reports.tables import number as cell


def orders_part(title: str, variant: str, flow: str, study: TimeStepStudy) -> Section:
    """The orders of a variant's flow: a table and the error against dt."""
    rows = [[m.method, *order_cells(m.estimate)] for m in study.methods]
    markdown = f"**Time-step orders of the {flow}.**\n\n" + markdown_table(
        ["method", *ORDER_HEADERS], rows
    )
    series = [time_step_series(m.method, m) for m in study.methods]
    figure = Figure(
        slug(f"{title} orders"),
        f"{flow}: error against dt.",
        convergence_figure(f"{variant} flow: error against dt", "dt", series),
    )
    return Section(title, markdown, [figure])


def orders_judgement(claim: Claim, flow: str, study: TimeStepStudy, prefix: str = "") -> Judgement:
    """The claim is verified when every scheme PASSes at its expected order (qualified
    otherwise); each scheme's order is a figure of merit named `prefix`<method>.order."""
    passed = all(m.estimate.verdict == OrderVerdict.PASS for m in study.methods)
    evidence = Evidence(
        claim,
        verified_or(passed, ClaimVerdict.QUALIFIED),
        f"{flow}: "
        + "; ".join(
            f"{m.method} {cell(m.estimate.order, 4)} ({m.estimate.verdict})" for m in study.methods
        ),
    )
    merit = {f"{prefix}{m.method}.order": order_merit(m.estimate) for m in study.methods}
    return Judgement([evidence], merit)


def at_expected_rate(study: GridStudy) -> bool:
    """Whether a grid study converges as expected: PASS at its expected order, or
    spectral (a local order reaches convergence.grid.SPECTRAL_ORDER) where none is."""
    if study.estimate.expected is None:
        return study.spectral
    return study.estimate.verdict == OrderVerdict.PASS


def grid_part(title: str, key: str, heading: str, studies: list[tuple[str, GridStudy]]) -> Section:
    """Labelled 2-D grid studies: a table and the error against 1/n."""
    rows = [
        [
            label,
            *(["-", "-", "-", "-", "-"] if g.spectral else order_cells(g.estimate)),
            "spectral" if g.spectral else "algebraic",
            cell(g.errors[-1]),
        ]
        for label, g in studies
    ]  # no power law fits a spectral series: its order cells would mislead
    markdown = f"**{heading}** (against {studies[0][1].reference}).\n\n" + markdown_table(
        ["grid", *ORDER_HEADERS, "convergence", "finest error"], rows
    )
    series = [
        (
            f"{label}: spectral" if g.spectral else label,
            [1 / n for n in g.sizes],
            g.errors,
            None if g.spectral else g.estimate,
        )
        for label, g in studies
    ]
    figure = Figure(
        slug(f"{title} {key}"),
        f"{heading}: error against 1/n.",
        convergence_figure(f"{title}: {key.replace('-', ' ')}", "h = 1/n", series),
    )
    return Section(title, markdown, [figure])


def grid_judgement(
    key: str, studies: list[tuple[str, GridStudy]], claim: Claim, describe: str
) -> Judgement:
    """The claim is verified when every study converges at its expected rate (qualified
    otherwise); each algebraic study's order is a figure of merit named
    `key`.<label>.order."""
    ok = all(at_expected_rate(g) for _, g in studies)
    summary = "; ".join(
        f"{label}: {'spectral' if g.spectral else cell(g.estimate.order, 4)}"
        for label, g in studies
    )
    evidence = Evidence(claim, verified_or(ok, ClaimVerdict.QUALIFIED), f"{describe}{summary}")
    merit = {
        f"{key}.{slug(label)}.order": order_merit(g.estimate)
        for label, g in studies
        if not g.spectral
    }
    return Judgement([evidence], merit)
