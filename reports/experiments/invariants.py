"""Invariants of the operators and the flow (properties.invariants) as a study experiment.

kind "invariants": in each precision, on seeded data of size d x tokens: ReLU is a
projection (idempotent, non-expansive), the LN projection P is idempotent and scale
invariant, attention rows are probability vectors whose outputs lie in the values'
convex hull, every operator and a short solve are permutation equivariant, and the
post-LN flow stays on S1; one case per precision.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from properties.invariants import (
    check_attention_weights,
    check_flow_stays_on_s1,
    check_permutation_equivariance,
    check_projection_idempotence_and_scale,
    check_relu_projection,
)
from reports.experiments.base import Evidence, Experiment, Record, Section
from reports.problems import build_problem, problem_spec
from reports.schema import Field, array_of, integer, precision
from reports.tables import latex_table, markdown_table, number
from solvers import LayerWeights, backend
from solvers.records import to_json

FIELDS = {
    "d": Field(integer(2, 256), 16),
    "tokens": Field(integer(2, 256), 8),
    "precisions": Field(array_of(precision, distinct=True)),
}


def _cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (
            repr(backend(p["name"], p["digits"])),
            {"d": params["d"], "tokens": params["tokens"], "precision": p},
        )
        for p in params["precisions"]
    ]


def run(case: dict[str, Any], seed: int) -> dict[str, Any]:
    bk = backend(case["precision"]["name"], case["precision"]["digits"])
    d, tokens = case["d"], case["tokens"]
    rng = np.random.default_rng(seed)
    layer = LayerWeights.random(d, 2 if d % 2 == 0 else 1, 2 * d, rng)
    u = rng.standard_normal((tokens, d))
    checks = [
        *check_relu_projection(rng.standard_normal((tokens, d)), u, precision=bk),
        *check_projection_idempotence_and_scale(u, 0.0, 1.0, precision=bk),
        *check_attention_weights(layer, u, precision=bk),
        *check_permutation_equivariance(layer, u, rng.permutation(tokens), precision=bk),
    ]
    spec = problem_spec({"d": d, "tokens": tokens, "heads": 1, "d_ff": 2 * d, "layers": 2}, "")
    checks.append(check_flow_stays_on_s1(build_problem(spec, seed), "lie", 4, precision=bk))
    return {"precision": repr(bk), "checks": [to_json(c) for c in checks]}


def render(title: str, records: list[Record]) -> Section:
    rows = []
    for record in records:
        if record["status"] == "ok":
            for c in record["result"]["checks"]:
                rows.append(
                    [
                        c["claim"],
                        record["result"]["precision"],
                        c["verdict"],
                        number(c["defect"]),
                        number(c["tolerance"]),
                    ]
                )
    headers = ["invariant", "precision", "verdict", "defect", "tolerance"]
    relu = [r for r in rows if "relu" in r[0].lower()]
    evidence = []
    if relu:
        holds = sum(r[2] == "holds" for r in relu)
        evidence.append(
            Evidence(
                "ReLU is the projection onto the non-negative orthant",
                "verified" if holds == len(relu) else "refuted",
                f"{holds} of {len(relu)} checks (idempotent, non-expansive) hold",
            )
        )
    failing = [r for r in rows if r[2] != "holds"]
    markdown = (
        f"{len(rows)} checks, {len(failing)} failing; tolerances derived from each "
        "precision's unit roundoff (properties.invariants).\n\n" + markdown_table(headers, rows)
    )
    merit = {"failing": {"value": len(failing), "low": 0, "high": 0}}
    return Section(title, markdown, [], latex_table(title, headers, rows), evidence, merit)


INVARIANTS = Experiment(
    "invariants",
    "projections, probability rows, convex hull, permutation equivariance, the flow on S1",
    FIELDS,
    _cases,
    run,
    render,
)
