"""Time-step refinement (convergence.time_step) as study experiments.

kind "time-step": a problem, methods, steps_per_unit, a reference ("exact", "reference"
or "richardson"), its steps, a precision and optional expected orders; one case per
method. kind "splitting-table": the same for every Lie and Strang variant
(convergence.time_step.SPLITTING_METHODS). For post-LN problems the expected order of a
method defaults to the one MODEL.md section 4 predicts (METHODS[name].order).
"""

from __future__ import annotations

from typing import Any

from convergence.time_step import REFERENCES, SPLITTING_METHODS, time_step_study
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
from reports.problems import build_problem, problem_spec, with_default_problem
from reports.schema import Field, array_of, integer, one_of, orders_by, precision
from reports.tables import ORDER_HEADERS, latex_table, markdown_table, order_cells
from reports.tables import number as cell
from solvers import backend
from solvers.methods import METHODS

METHOD_NAMES = tuple(METHODS)


COMMON = {
    "problem": Field(problem_spec, None, "a problem table"),
    "steps_per_unit": Field(array_of(integer(1, 1_000_000), minimum=3, distinct=True)),
    "reference": Field(one_of(REFERENCES), "reference"),
    "reference_steps": Field(integer(1, 4096), 8),
    "precision": Field(precision, {"name": "float64", "digits": None}),
    "expected": Field(orders_by(METHOD_NAMES, "method"), {}),
}
FIELDS = {"methods": Field(array_of(one_of(METHOD_NAMES), distinct=True)), **COMMON}


def _cases(params: dict[str, Any], methods: tuple[str, ...] | list[str]) -> list:
    params = with_default_problem(params)
    cases = []
    for method in methods:
        expected = params["expected"].get(method)
        if expected is None and params["problem"]["norm"] == "post":
            expected = float(METHODS[method].order)
        case = {k: v for k, v in params.items() if k not in ("methods", "expected")}
        cases.append((method, case | {"method": method, "expected": expected}))
    return cases


def run(case: dict[str, Any], seed: int) -> dict[str, Any]:
    problem = build_problem(case["problem"], seed)
    bk = backend(case["precision"]["name"], case["precision"]["digits"])
    expected = None if case["expected"] is None else {case["method"]: case["expected"]}
    study = time_step_study(
        problem,
        [case["method"]],
        case["steps_per_unit"],
        reference=case["reference"],
        precision=bk,
        reference_steps=case["reference_steps"],
        expected=expected,
    )
    record = study.to_json()
    return record["methods"][0] | {
        "reference": record["reference"],
        "precision": record["precision"],
    }


def render(title: str, records: list[Record]) -> Section:
    done = [r for r in records if r["status"] == "ok"]
    rows, series, merit = [], [], {}
    for record in done:
        result = record["result"]
        estimate = result["estimate"]
        rows.append([result["method"], *order_cells(estimate), cell(result["max_abs"][-1])])
        hs = [1 / m for m in result["steps_per_unit"]]
        series.append((result["method"], hs, result["max_abs"], estimate))
        merit[f"{record['label']}.order"] = order_merit(estimate)
        merit[f"{record['label']}.finest_error"] = {"value": result["max_abs"][-1]}
    headers = ["method", *ORDER_HEADERS, "finest max-abs error"]
    reference = done[0]["result"]["reference"] if done else "-"
    markdown = (
        f"Errors at t = T against the {reference} reference, in "
        f"{done[0]['result']['precision'] if done else '-'}; orders from `estimate_order`.\n\n"
        + markdown_table(headers, rows)
    )
    figures = []
    if series:
        figures.append(
            Figure(
                slug(title),
                f"{title}: max-abs error at t = T against the step size dt = 1/m, with the "
                "fitted order, its 95% band and the dropped levels (crosses).",
                convergence_figure(title, "dt", series),
            )
        )
    evidence = []
    verdicts = {r["result"]["method"]: r["result"]["estimate"]["verdict"] for r in done}
    if "lie" in verdicts:
        lie = next(r["result"]["estimate"] for r in done if r["result"]["method"] == "lie")
        evidence.append(
            Evidence(
                "The Lie scheme (the Transformer) is a first-order discretisation of the flow",
                "verified" if verdicts["lie"] == "PASS" else "refuted",
                f"order {lie['order']:.3f} [{lie['interval'][0]:.3f}, "
                f"{lie['interval'][1]:.3f}], {verdicts['lie']}",
            )
        )
    if verdicts:
        passed = sum(v == "PASS" for v in verdicts.values())
        evidence.append(
            Evidence(
                "The time-step limit exists (continuous limit in time)",
                "verified" if passed == len(verdicts) else "qualified",
                f"{passed} of {len(verdicts)} methods converge at their predicted order",
            )
        )
    return Section(
        title,
        markdown,
        figures,
        latex_table(f"{title}: observed orders", headers, rows),
        evidence,
        merit,
    )


TIME_STEP = Experiment(
    "time-step",
    "errors and orders of time-stepping methods as dt -> 0 (one case per method)",
    FIELDS,
    lambda params: _cases(params, params["methods"]),
    run,
    render,
)
SPLITTING_TABLE = Experiment(
    "splitting-table",
    "Lie and every Strang variant {Euler, RK2, RK4, exact} x {ambient, tangent}",
    COMMON,
    lambda params: _cases(params, SPLITTING_METHODS),
    run,
    render,
)
