"""Precision studies as study experiments.

kind "precision-ladder" (convergence.precision): one method at increasing steps in
several number systems, each one's rounding floor located; one case per precision.
kind "rounding-depth" (convergence.rounding_by_depth): the error of float formats after 1..L
layers against 50 digits, with the documented 8 sqrt(n) u bound and the fitted power.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from convergence.precision import PrecisionLadder, precision_ladder
from convergence.rounding_by_depth import BOUND_CONSTANT, RoundingByDepth, rounding_error_by_depth
from reports.claims import Claim, ClaimVerdict, Evidence, verified_or
from reports.experiments.base import CaseKind, Experiment, Judgement, Record, Section, results
from reports.figures import named_lines_figure
from reports.merit import bounded_merit, growth_merit
from reports.problems import build_problem, problem_spec, with_default_problem
from reports.schema import Field, array_of, integer, one_of, precision
from reports.tables import latex_table, markdown_table, number
from solvers import backend
from solvers.backends import REGISTRY
from solvers.solving import METHODS


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


def _ladder_run(case: dict[str, Any], seed: int) -> PrecisionLadder:
    problem = build_problem(case["problem"], seed)
    return precision_ladder(
        problem, case["method"], case["steps_per_unit"], [_backend(case["precision"])]
    )


@cache
def fixed_formats() -> frozenset[str]:
    """The binary float formats (by repr): fixed precision, so they must show a floor."""
    return frozenset(repr(backend(name)) for name, f in REGISTRY.items() if f.digits is None)


def floor_evidence(ladders: list[PrecisionLadder]) -> Evidence:
    """Verified when every fixed float format shows a floor and every high-precision
    system (mpmath, arb at the study's digits) none within the steps studied."""
    floors = {name: ladder.floors[name] for ladder in ladders for name in ladder.floors}
    as_expected = all(bool(floor) == (name in fixed_formats()) for name, floor in floors.items())
    return Evidence(
        Claim.PRECISION_FLOOR,
        verified_or(as_expected, ClaimVerdict.QUALIFIED),
        "; ".join(
            f"{name}: floor {number(floor) if floor else 'none found'}"
            for name, floor in floors.items()
        ),
    )


def _ladder_judge(records: list[Record[PrecisionLadder]]) -> Judgement:
    """Each number system's smallest error as a figure of merit, and `floor_evidence`."""
    done = results(records)
    merit = {
        f"{name}.smallest_error": growth_merit(min(errors))
        for result in done
        for name, errors in result.errors.items()
    }
    return Judgement([floor_evidence(done)] if merit else [], merit)


def _ladder_render(title: str, records: list[Record[PrecisionLadder]]) -> Section:
    done = results(records)
    rows, series = [], []
    for result in done:
        for name, errors in result.errors.items():
            floor = result.floors[name]
            rows.append(
                [
                    name,
                    number(min(errors)),
                    number(floor) if floor else "none found",
                    str(result.estimates[name].verdict),
                ]
            )
            series.append((name, result.steps_per_unit, errors))
    headers = ["precision", "smallest error", "floor", "verdict"]
    reference = done[0].reference if done else "-"
    markdown = (
        f"Relative max-abs error of {done[0].method if done else '-'} against the "
        f"{reference}; a floor is where the error stops decreasing.\n\n"
        + markdown_table(headers, rows)
    )
    caption = f"{title}: error against steps per unit in each number system."
    figures = named_lines_figure(title, caption, "steps per unit", "relative error", series)
    return Section(title, markdown, figures, latex_table(title, headers, rows))


DEPTH_FIELDS = {
    "problem": Field(problem_spec, None, "a problem table"),
    "precisions": Field(array_of(precision, distinct=True)),
}


def _depth_cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    params = with_default_problem(params)
    return [(params["problem"]["norm"], params)]


def _depth_run(case: dict[str, Any], seed: int) -> RoundingByDepth:
    problem = build_problem(case["problem"], seed)
    return rounding_error_by_depth(problem, [_backend(p) for p in case["precisions"]])


def _worst_over_sqrt_depth(result: RoundingByDepth, name: str) -> float:
    """The largest error / (sqrt(n) u) over the depths n: at most BOUND_CONSTANT within
    the documented bound."""
    u = result.unit_roundoff[name]
    return max(e / (u * n**0.5) for e, n in zip(result.errors[name], result.depths, strict=True))


def _depth_judge(records: list[Record[RoundingByDepth]]) -> Judgement:
    """Each format's worst error / (sqrt(n) u) as a figure of merit, within [0,
    BOUND_CONSTANT]; it speaks to no claim."""
    merit = {}
    for result in results(records):
        norm = result.configuration.get("norm", "")
        for name in result.errors:
            merit[f"{name}.{norm}.worst_over_sqrt_depth"] = bounded_merit(
                _worst_over_sqrt_depth(result, name), 0, BOUND_CONSTANT
            )
    return Judgement([], merit)


def _depth_render(title: str, records: list[Record[RoundingByDepth]]) -> Section:
    rows, series = [], []
    for result in results(records):
        norm = result.configuration.get("norm", "")
        for name, errors in result.errors.items():
            u = result.unit_roundoff[name]
            rows.append(
                [
                    f"{name} ({norm})",
                    number(max(errors) / u),
                    number(_worst_over_sqrt_depth(result, name)),
                    number(result.fitted_constant[name]),
                    number(result.fitted_exponent[name]),
                    "yes" if result.within_bound[name] else "NO",
                ]
            )
            series.append((f"{name} {norm}", result.depths, [e / u for e in errors]))
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
    caption = f"{title}: rounding error / u against depth (log-log)."
    figures = named_lines_figure(title, caption, "layers n", "error / u", series)
    return Section(title, markdown, figures, latex_table(title, headers, rows))


PRECISION_LADDER = Experiment(
    "precision-ladder",
    "each number system's rounding floor (one case per precision)",
    LADDER_FIELDS,
    _ladder_cases,
    {"precision-ladder": CaseKind(_ladder_run, PrecisionLadder)},
    _ladder_render,
    _ladder_judge,
)
ROUNDING_DEPTH = Experiment(
    "rounding-depth",
    "rounding error of float formats against depth, against 50 digits",
    DEPTH_FIELDS,
    _depth_cases,
    {"rounding-depth": CaseKind(_depth_run, RoundingByDepth)},
    _depth_render,
    _depth_judge,
)
