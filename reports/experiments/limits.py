"""What the time-step limit is, as study experiments.

kind "layer-norm-limit": case "eps" runs convergence.layer_norm_eps.eps_limit_study (Lie
with LN_eps converges at order 1 to the shrunken-set flow, O(eps) from the eps = 0 flow);
case "affine" runs convergence.limit.limit_check on the same problem with per-feature
gains and biases (degenerate: NO-LIMIT). kind "transformer-limit": the dt = 1
Transformer's distance from its limit against the weight scale
(convergence.transformer_limit).
"""

from __future__ import annotations

from typing import Any

from convergence.layer_norm_eps import eps_limit_study
from convergence.limit import limit_check
from convergence.transformer_limit import transformer_limit_distance
from reports.experiments.base import (
    Evidence,
    Experiment,
    Figure,
    Record,
    Section,
    order_merit,
    slug,
)
from reports.figures import convergence_figure, lines_figure
from reports.problems import build_problem, problem_spec, with_default_problem
from reports.schema import Field, array_of, integer, number
from reports.tables import latex_table, markdown_table
from reports.tables import number as cell

LN_FIELDS = {
    "problem": Field(problem_spec, None, "a post-LN problem table with scalar norms"),
    "eps_values": Field(array_of(number(positive=True), minimum=3, distinct=True)),
    "steps_per_unit": Field(array_of(integer(1, 1_000_000), minimum=3, distinct=True)),
    "affine_steps_per_unit": Field(array_of(integer(1, 1_000_000), minimum=4, distinct=True)),
}


def _ln_cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    params = with_default_problem(params)
    return [("eps", params | {"case": "eps"}), ("affine", params | {"case": "affine"})]


def _ln_run(case: dict[str, Any], seed: int) -> dict[str, Any]:
    if case["case"] == "eps":
        spec = case["problem"] | {"eps": 0.0, "affine": False}
        study = eps_limit_study(
            build_problem(spec, seed), case["eps_values"], case["steps_per_unit"]
        )
        return {"case": "eps"} | study.to_json()
    problem = build_problem(case["problem"] | {"affine": True, "relu_shift": 0.0}, seed)
    return {"case": "affine"} | limit_check(problem, case["affine_steps_per_unit"]).to_json()


def _ln_render(title: str, records: list[Record]) -> Section:
    by_case = {r["result"]["case"]: r["result"] for r in records if r["status"] == "ok"}
    parts, figures, evidence, merit, latex = [], [], [], {}, ""
    eps = by_case.get("eps")
    if eps:
        rows = [
            [cell(e), cell(c["estimate"]["order"], 4), c["estimate"]["verdict"], cell(d)]
            for e, c, d in zip(eps["eps"], eps["convergence"], eps["distance"], strict=True)
        ]
        fit = eps["distance_fit"]
        headers = [
            "eps",
            "Lie order towards the shrunken-set flow",
            "verdict",
            "distance from the eps = 0 flow",
        ]
        parts.append(
            "**eps > 0, scalar gain.** "
            + markdown_table(headers, rows)
            + f"\nDistance fitted as C eps^q: q = {fit['order']:.4f} [{fit['interval'][0]:.4f},"
            f" {fit['interval'][1]:.4f}], C = {fit['constant']:.3g} ({fit['verdict']}).\n"
        )
        latex += latex_table(f"{title}: eps > 0", headers, rows)
        series = [
            (f"eps={e:g}", [1 / m for m in c["steps_per_unit"]], c["max_abs"], c["estimate"])
            for e, c in zip(eps["eps"], eps["convergence"], strict=True)
        ]
        figures.append(
            Figure(
                slug(f"{title} eps"),
                "Lie with LN_eps against the flow on the shrunken sphere.",
                convergence_figure(f"{title}: Lie with LN_eps", "dt", series),
            )
        )
        ok = all(c["estimate"]["verdict"] == "PASS" for c in eps["convergence"])
        evidence.append(
            Evidence(
                "The time-step limit exists with torch-style LN (eps > 0, scalar gain)",
                "qualified" if ok else "refuted",
                f"order 1 towards the flow on the shrunken sphere var = sigma2^2 - eps, not the "
                f"eps = 0 flow; distance ~ eps^{fit['order']:.3f}",
            )
        )
        merit["eps.distance_power"] = order_merit(fit)
    affine = by_case.get("affine")
    if affine:
        spread = affine["spread"]
        rows = [
            [m, cell(s), cell(c) if c is not None else "-"]
            for m, s, c in zip(
                affine["steps_per_unit"],
                affine["spread"],
                [*affine["cauchy_differences"], None],
                strict=True,
            )
        ]
        parts.append(
            f"**Per-feature gain and bias.** Verdict {affine['verdict']}: {affine['reason']}.\n\n"
            + markdown_table(["steps per unit", "token spread", "Cauchy difference to next"], rows)
        )
        figures.append(
            Figure(
                slug(f"{title} affine"),
                "Token spread and Cauchy differences under refinement.",
                lines_figure(
                    f"{title}: per-feature LN",
                    "steps per unit",
                    "size",
                    [
                        ("token spread", affine["steps_per_unit"], [max(s, 1e-18) for s in spread]),
                        (
                            "Cauchy difference",
                            affine["steps_per_unit"][:-1],
                            affine["cauchy_differences"],
                        ),
                    ],
                ),
            )
        )
        evidence.append(
            Evidence(
                "The time-step limit exists with per-feature LN gain and bias",
                "refuted" if affine["verdict"] == "NO-LIMIT" else "verified",
                affine["reason"],
            )
        )
        merit["affine.verdict"] = {"value": affine["verdict"]}
    return Section(title, "\n".join(parts), figures, latex, evidence, merit)


TRANSFORMER_FIELDS = {
    "problem": Field(problem_spec, None, "a problem table (its weights are scaled)"),
    "scales": Field(array_of(number(positive=True), minimum=3, distinct=True)),
    "reference_steps": Field(integer(1, 4096), 4),
}


def _transformer_run(case: dict[str, Any], seed: int) -> dict[str, Any]:
    problem = build_problem(case["problem"], seed)
    result = transformer_limit_distance(
        problem.controls.layers,
        problem.u0,
        case["scales"],
        norm=problem.norm,
        reference_steps=case["reference_steps"],
    )
    return result.to_json()


def _transformer_render(title: str, records: list[Record]) -> Section:
    done = [r["result"] for r in records if r["status"] == "ok"]
    if not done:
        return Section(title, "No finished case.\n")
    result = done[0]
    rows = [
        [cell(s), cell(d), cell(f), cell(e)]
        for s, d, f, e in zip(
            result["scales"],
            result["distance"],
            result["relative_frobenius"],
            result["reference_error"],
            strict=True,
        )
    ]
    headers = ["weight scale s", "max-abs distance", "relative Frobenius", "limit's own error"]
    growth = result["growth"]
    markdown = (
        "Distance of the dt = 1 Transformer from its time-step limit at t = T.\n\n"
        + markdown_table(headers, rows)
        + f"\nGrowth fitted as C s^q on the asymptotic window: q = {growth['order']:.3f} "
        f"[{growth['interval'][0]:.3f}, {growth['interval'][1]:.3f}] ({growth['verdict']}).\n"
    )
    figure = Figure(
        slug(title),
        "Distance of the Transformer from its limit against s.",
        lines_figure(
            title,
            "weight scale s",
            "distance",
            [
                ("max-abs", result["scales"], result["distance"]),
                ("limit's own error", result["scales"], result["reference_error"]),
            ],
        ),
    )
    evidence = [
        Evidence(
            "A trained-size Transformer is close to its continuous (time-step) limit",
            "qualified",
            f"the distance grows like s^{growth['order']:.2f} at small weight scale and reaches "
            f"{result['relative_frobenius'][-1]:.2g} (relative) at s = {result['scales'][-1]:g}",
        )
    ]
    merit = {"growth": order_merit(growth)}
    return Section(title, markdown, [figure], latex_table(title, headers, rows), evidence, merit)


LAYER_NORM_LIMIT = Experiment(
    "layer-norm-limit",
    "what eps > 0 and per-feature LN gain and bias do to the time-step limit",
    LN_FIELDS,
    _ln_cases,
    _ln_run,
    _ln_render,
)
TRANSFORMER_LIMIT = Experiment(
    "transformer-limit",
    "distance of the dt = 1 Transformer from its time-step limit against the weight scale",
    TRANSFORMER_FIELDS,
    lambda params: [("scales", with_default_problem(params))],
    _transformer_run,
    _transformer_render,
)
