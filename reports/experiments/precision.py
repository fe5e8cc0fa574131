"""Precision studies as study experiments.

kind "precision-ladder" (convergence.precision): one method at increasing steps in
several number systems, each one's rounding floor located; one case per precision.
kind "rounding-depth" (convergence.rounding): the error of float formats after 1..L
layers against 50 digits, with the documented 8 sqrt(n) u bound and the fitted power.
"""

from __future__ import annotations

from typing import Any

from convergence.precision import precision_ladder
from convergence.rounding import BOUND_CONSTANT, rounding_error_by_depth
from reports.experiments.base import Evidence, Experiment, Figure, Record, Section, slug
from reports.figures import lines_figure
from reports.problems import build_problem, problem_spec, with_default_problem
from reports.schema import Field, array_of, integer, one_of, precision
from reports.tables import latex_table, markdown_table, number
from solvers import backend
from solvers.methods import METHODS


def _backend(spec: dict[str, Any]):
    return backend(spec["name"], spec["digits"])


LADDER_FIELDS = {
    "problem": Field(problem_spec, None, "a problem table"),
    "method": Field(one_of(tuple(METHODS)), "projected-rk4"),
    "steps_per_unit": Field(array_of(integer(1, 1_000_000), minimum=3, distinct=True)),
    "precisions": Field(array_of(precision, distinct=True)),
}


def _ladder_cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    shared = {k: v for k, v in params.items() if k != "precisions"}
    shared = with_default_problem(shared)
    return [(repr(_backend(p)), shared | {"precision": p}) for p in params["precisions"]]


def _ladder_run(case: dict[str, Any], seed: int) -> dict[str, Any]:
    problem = build_problem(case["problem"], seed)
    ladder = precision_ladder(
        problem, case["method"], case["steps_per_unit"], [_backend(case["precision"])]
    )
    return ladder.to_json()


def _is_float(name: str) -> bool:
    """Whether a backend's repr names a binary float format (not mpmath or arb)."""
    return not name.startswith(("backend('mpmath'", "backend('arb'"))


def _ladder_render(title: str, records: list[Record]) -> Section:
    done = [r["result"] for r in records if r["status"] == "ok"]
    rows, series, merit = [], [], {}
    for result in done:
        for name, errors in result["errors"].items():
            floor = result["floors"][name]
            rows.append(
                [
                    name,
                    number(min(errors)),
                    number(floor) if floor else "none found",
                    result["estimates"][name]["verdict"],
                ]
            )
            series.append((name, result["steps_per_unit"], errors))
            merit[f"{name}.smallest_error"] = {"value": min(errors)}
    headers = ["precision", "smallest error", "floor", "verdict"]
    reference = done[0]["reference"] if done else "-"
    markdown = (
        f"Relative max-abs error of {done[0]['method'] if done else '-'} against the "
        f"{reference}; a floor is where the error stops decreasing.\n\n"
        + markdown_table(headers, rows)
    )
    figures = (
        [
            Figure(
                slug(title),
                f"{title}: error against steps per unit in each number system.",
                lines_figure(title, "steps per unit", "relative error", series),
            )
        ]
        if series
        else []
    )
    # MODEL.md section 4: float formats hit a floor, high precision moves it out of sight
    as_expected = [(r[2] != "none found") == _is_float(r[0]) for r in rows]
    evidence = (
        [
            Evidence(
                "High precision moves the rounding floor below the truncation error",
                "verified" if all(as_expected) else "qualified",
                "; ".join(f"{r[0]}: floor {r[2]}" for r in rows),
            )
        ]
        if rows
        else []
    )
    return Section(title, markdown, figures, latex_table(title, headers, rows), evidence, merit)


DEPTH_FIELDS = {
    "problem": Field(problem_spec, None, "a problem table"),
    "precisions": Field(array_of(precision, distinct=True)),
}


def _depth_cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    params = with_default_problem(params)
    return [(params["problem"]["norm"], params)]


def _depth_run(case: dict[str, Any], seed: int) -> dict[str, Any]:
    problem = build_problem(case["problem"], seed)
    study = rounding_error_by_depth(problem, [_backend(p) for p in case["precisions"]])
    return study.to_json()


def _depth_render(title: str, records: list[Record]) -> Section:
    done = [r["result"] for r in records if r["status"] == "ok"]
    rows, series, merit = [], [], {}
    for result in done:
        norm = result["configuration"].get("norm", "")
        for name, stored in result["errors"].items():
            errors = [float(e) for e in stored]
            u = result["unit_roundoff"][name]
            worst = max(e / (u * n**0.5) for e, n in zip(errors, result["depths"], strict=True))
            rows.append(
                [
                    f"{name} ({norm})",
                    number(max(errors) / u),
                    number(worst),
                    number(result["fitted_constant"][name]),
                    number(result["fitted_exponent"][name]),
                    "yes" if result["within_bound"][name] else "NO",
                ]
            )
            series.append((f"{name} {norm}", result["depths"], [e / u for e in errors]))
            merit[f"{name}.{norm}.worst_over_sqrt_depth"] = {
                "value": worst,
                "low": 0,
                "high": BOUND_CONSTANT,
            }
    headers = [
        "precision",
        "max error / u",
        "max error / (sqrt(n) u)",
        "fitted c",
        "fitted alpha",
        f"within {BOUND_CONSTANT:g} sqrt(n) u",
    ]
    markdown = (
        "Relative max-abs error after n layers against 50 digits, in units of each "
        "format's unit roundoff u; fit error = c n^alpha u.\n\n" + markdown_table(headers, rows)
    )
    figures = (
        [
            Figure(
                slug(title),
                f"{title}: rounding error / u against depth (log-log).",
                lines_figure(title, "layers n", "error / u", series),
            )
        ]
        if series
        else []
    )
    return Section(title, markdown, figures, latex_table(title, headers, rows), [], merit)


PRECISION_LADDER = Experiment(
    "precision-ladder",
    "each number system's rounding floor (one case per precision)",
    LADDER_FIELDS,
    _ladder_cases,
    _ladder_run,
    _ladder_render,
)
ROUNDING_DEPTH = Experiment(
    "rounding-depth",
    "rounding error of float formats against depth, against 50 digits",
    DEPTH_FIELDS,
    _depth_cases,
    _depth_run,
    _depth_render,
)
