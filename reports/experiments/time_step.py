"""Time-step refinement (convergence.time_step) as study experiments.

kind "time-step": a problem, methods, steps_per_unit, a reference ("exact", "reference"
or "richardson"), its steps, a precision and optional expected orders; one case per
method. kind "splitting-table": the same for every Lie and Strang variant
(convergence.time_step.SPLITTING_METHODS). A method's expected order defaults to the one
docs/orders.md section 1 predicts on the problem's norm placement (SteppingMethod.order).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from convergence.order import OrderVerdict
from convergence.time_step import (
    REFERENCES,
    SPLITTING_METHODS,
    MethodConvergence,
    time_step_study,
)
from reports.claims import Claim, ClaimVerdict, Evidence, verified_or
from reports.experiments.base import CaseKind, Experiment, Judgement, Record, Section, extended
from reports.figures import convergence_figure, named_figure, time_step_series
from reports.merit import growth_merit, order_merit
from reports.problems import build_problem, problem_spec, with_default_problem
from reports.schema import Field, array_of, integer, one_of, orders_by, precision
from reports.tables import ORDER_HEADERS, latex_table, markdown_table, order_cells
from reports.tables import number as cell
from solvers import backend
from solvers.solving import METHODS

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
        expected = params["expected"].get(method)  # None: the method's order (the study's)
        case = {k: v for k, v in params.items() if k not in ("methods", "expected")}
        cases.append((method, case | {"method": method, "expected": expected}))
    return cases


@dataclass(frozen=True)
class MethodRun(MethodConvergence):
    """One method's convergence, with the reference and precision it was measured in."""

    reference: str
    precision: str


def run(case: dict[str, Any], seed: int) -> MethodRun:
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
    return extended(
        MethodRun, study.methods[0], reference=study.reference, precision=study.precision
    )


LIE_ORDER = 1.0
"""The Lie scheme's order: its estimate must PASS against it (the expected order inside
the 95% interval or within estimate_order's tolerance, 0.1)."""


def evidence(runs: list[MethodRun]) -> list[Evidence]:
    """The claims' verdicts from the methods' order estimates."""
    found = []
    lie = next((r.estimate for r in runs if r.method == "lie"), None)
    if lie is not None and lie.expected == LIE_ORDER:
        lo, hi = lie.interval
        found.append(
            Evidence(
                Claim.LIE_FIRST_ORDER,
                verified_or(lie.verdict == OrderVerdict.PASS, ClaimVerdict.REFUTED),
                f"order {lie.order:.3f} [{lo:.3f}, {hi:.3f}], {lie.verdict} against {LIE_ORDER:g}",
            )
        )
    if runs:
        passed = sum(r.estimate.verdict == OrderVerdict.PASS for r in runs)
        found.append(
            Evidence(
                Claim.TIME_STEP_LIMIT,
                verified_or(passed == len(runs), ClaimVerdict.QUALIFIED),
                f"{passed} of {len(runs)} methods converge at their predicted order (PASS)",
            )
        )
    return found


def judge(records: list[Record[MethodRun]]) -> Judgement:
    """Each method's order (with its 95% interval and verdict) and finest error as figures
    of merit, and the claims' verdicts from the orders."""
    done = [r for r in records if r.ok]
    merit = {}
    for record in done:
        merit[f"{record.label}.order"] = order_merit(record.result.estimate, record.label)
        merit[f"{record.label}.finest_error"] = growth_merit(
            record.result.max_abs[-1], record.label
        )
    return Judgement(evidence([r.result for r in done]), merit)


def render(title: str, records: list[Record[MethodRun]]) -> Section:
    done = [r for r in records if r.ok]
    rows, series = [], []
    for record in done:
        result = record.result
        own = "-" if result.reference_error is None else cell(result.reference_error[-1])
        rows.append([result.method, *order_cells(result.estimate), cell(result.max_abs[-1]), own])
        series.append(time_step_series(result.method, result))
    headers = ["method", *ORDER_HEADERS, "finest max-abs error", "reference's error"]
    first = done[0].result if done else None
    markdown = (
        f"Errors at t = T against the {first.reference if first else '-'} reference, in "
        f"{first.precision if first else '-'}; orders from `estimate_order`. The error-"
        "controlled reference reports its error at T, assessed against a second run at a "
        "hundredth of its tolerance (docs/schemes.md section 7); levels within 10x of it are "
        "at the reference floor and not fitted (docs/orders.md section 4).\n\n"
        + markdown_table(headers, rows)
    )
    figures = named_figure(
        title,
        f"{title}: max-abs error at t = T against the step size dt = 1/m, with the fitted "
        "order, its 95% band and the dropped levels (crosses).",
        series,
        lambda: convergence_figure(title, "dt", series),
    )
    return Section(
        title, markdown, figures, latex_table(f"{title}: observed orders", headers, rows)
    )


TIME_STEP = Experiment(
    "time-step",
    "errors and orders of time-stepping methods as dt -> 0 (one case per method)",
    FIELDS,
    lambda params: _cases(params, params["methods"]),
    {"time-step": CaseKind(run, MethodRun)},
    render,
    judge,
)
SPLITTING_TABLE = Experiment(
    "splitting-table",
    "Lie and every Strang variant {Euler, RK2, RK4, exact} x {ambient, tangent}",
    COMMON,
    lambda params: _cases(params, SPLITTING_METHODS),
    {"splitting-table": CaseKind(run, MethodRun)},
    render,
    judge,
)
