"""Conditioning of the LN projection and of attention (properties.conditioning) as an
experiment.

kind "conditioning": case "layer-norm" measures P's Lipschitz constant at rows of
standard deviation `stds` (expected sigma2 / std: slope -1 in log-log); case "attention"
measures attention's Lipschitz constant and its distance to hard attention as the
inverse temperature beta grows over `betas`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from properties.conditioning import attention_conditioning, layer_norm_conditioning
from reports.experiments.base import Evidence, Experiment, Figure, Record, Section, slug
from reports.figures import lines_figure
from reports.schema import Field, array_of, integer, number
from reports.tables import markdown_table
from reports.tables import number as cell
from solvers import LayerWeights

FIELDS = {
    "stds": Field(array_of(number(positive=True), minimum=3, distinct=True)),
    "betas": Field(array_of(number(positive=True), minimum=3, distinct=True)),
    "d": Field(integer(2, 256), 8),
    "tokens": Field(integer(2, 256), 6),
}


def _cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("layer-norm", params | {"case": "layer-norm"}),
        ("attention", params | {"case": "attention"}),
    ]


def run(case: dict[str, Any], seed: int) -> dict[str, Any]:
    if case["case"] == "layer-norm":
        result = layer_norm_conditioning(case["stds"], d=case["d"], seed=seed)
    else:
        rng = np.random.default_rng(seed)
        layer = LayerWeights.random(case["d"], 2 if case["d"] % 2 == 0 else 1, 2 * case["d"], rng)
        u = rng.standard_normal((case["tokens"], case["d"]))
        result = attention_conditioning(layer, u, case["betas"])
    return {"case": case["case"]} | result.to_json()


def render(title: str, records: list[Record]) -> Section:
    by_case = {r["result"]["case"]: r["result"] for r in records if r["status"] == "ok"}
    parts, figures, evidence, merit = [], [], [], {}
    ln = by_case.get("layer-norm")
    if ln:
        parts.append(
            f"**Layer-norm projection near constant rows.** log L against log std: slope "
            f"{float(ln['slope']):.6f} [{float(ln['slope_interval'][0]):.6f}, "
            f"{float(ln['slope_interval'][1]):.6f}], constant {float(ln['constant']):.6g} "
            f"(expected sigma2 = {float(ln['expected_constant']):g}) over "
            f"{float(ln['decades']):.1f} decades: {ln['verdict']}.\n\n"
            + markdown_table(
                ["std", "Lipschitz constant", "L x std"],
                [
                    [cell(s), cell(x), cell(y)]
                    for s, x, y in zip(ln["stds"], ln["lipschitz"], ln["scaled"], strict=True)
                ],
            )
        )
        figures.append(
            Figure(
                slug(f"{title} layer norm"),
                "P's Lipschitz constant against std.",
                lines_figure(
                    f"{title}: layer norm",
                    "row std",
                    "Lipschitz constant",
                    [("measured", ln["stds"], [float(x) for x in ln["lipschitz"]])],
                ),
            )
        )
        evidence.append(
            Evidence(
                "Near constant rows the LN projection is ill-conditioned: Lipschitz ~ sigma2 / std",
                "verified" if ln["verdict"] == "holds" else "refuted",
                f"slope {float(ln['slope']):.4f} over {float(ln['decades']):.1f} decades "
                "(MODEL.md section 4)",
            )
        )
        merit["layer_norm.slope"] = {"value": float(ln["slope"]), "low": -1.05, "high": -0.95}
    attention = by_case.get("attention")
    if attention:
        rows = [
            [cell(b), cell(x), cell(s), cell(h)]
            for b, x, s, h in zip(
                attention["betas"],
                attention["lipschitz"],
                attention["saturation"],
                attention["distance_to_hard"],
                strict=True,
            )
        ]
        growth = attention["growth"]
        parts.append(
            f"**Attention against the inverse temperature beta.** Growth exponent of the "
            f"Lipschitz constant on the large-beta tail {float(growth['slope']):.3f}; hard "
            f"attention's constant {float(attention['hard_lipschitz']):.4g}; distance to hard "
            f"attention decays at rate {-float(attention['decay']['slope']):.4g} against the "
            f"score gap {float(attention['score_gap']):.4g}.\n\n"
            + markdown_table(["beta", "Lipschitz constant", "saturation", "distance to hard"], rows)
        )
        figures.append(
            Figure(
                slug(f"{title} attention"),
                "Attention against beta.",
                lines_figure(
                    f"{title}: attention",
                    "beta",
                    "size",
                    [
                        (
                            "Lipschitz constant",
                            attention["betas"],
                            [float(x) for x in attention["lipschitz"]],
                        ),
                        (
                            "distance to hard attention",
                            attention["betas"],
                            [max(float(x), 1e-18) for x in attention["distance_to_hard"]],
                        ),
                    ],
                ),
            )
        )
    return Section(title, "\n".join(parts), figures, "", evidence, merit)


CONDITIONING = Experiment(
    "conditioning",
    "conditioning of the LN projection near constant rows and of attention against beta",
    FIELDS,
    _cases,
    run,
    render,
)
