"""Invariants of the operators and the flow (properties) as a study experiment.

kind "invariants": in each precision, on seeded data of size d x tokens: ReLU and the LN
projection as projections, attention rows as probability vectors in the values' convex
hull, permutation equivariance, the post-LN flow on S1; one case per precision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from properties.claim_check import CheckVerdict, ClaimCheck
from properties.exactness.projection_theorem import check_projection_idempotence_and_scale
from properties.invariants.attention_weights import check_attention_weights
from properties.invariants.constraint_set import check_flow_stays_on_s1
from properties.invariants.equivariance import check_permutation_equivariance
from properties.invariants.projections import check_relu_projection
from reports.claims import Claim, ClaimVerdict, Evidence, verified_or
from reports.experiments.base import CaseKind, Experiment, Judgement, Record, Section, results
from reports.merit import bounded_merit
from reports.problems import build_problem, problem_spec
from reports.schema import Field, array_of, integer, precision
from reports.tables import latex_table, markdown_table, number
from solvers import LayerWeights, backend

FIELDS = {
    "d": Field(integer(2, 256), 16),
    "tokens": Field(integer(2, 256), 8),
    "precisions": Field(array_of(precision, distinct=True)),
}


@dataclass(frozen=True)
class InvariantChecks:
    """Every invariant's check in one precision."""

    precision: str
    checks: list[ClaimCheck]


def _cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (
            repr(backend(p["name"], p["digits"])),
            {"d": params["d"], "tokens": params["tokens"], "precision": p},
        )
        for p in params["precisions"]
    ]


def run(case: dict[str, Any], seed: int) -> InvariantChecks:
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
    return InvariantChecks(repr(bk), checks)


def _checks(records: list[Record[InvariantChecks]]) -> list[tuple[ClaimCheck, str]]:
    """Every check of the finished records, with the precision it ran in."""
    return [(c, result.precision) for result in results(records) for c in result.checks]


def _failing(records: list[Record[InvariantChecks]]) -> int:
    """How many checks fail (their defect above their tolerance)."""
    return sum(c.verdict != CheckVerdict.HOLDS for c, _ in _checks(records))


def judge(records: list[Record[InvariantChecks]]) -> Judgement:
    """The failing checks as a figure of merit (none allowed); the ReLU claim is verified
    when every ReLU check holds, refuted otherwise."""
    relu = [c for c, _ in _checks(records) if "relu" in c.claim.lower()]
    evidence = []
    if relu:
        holds = sum(c.verdict == CheckVerdict.HOLDS for c in relu)
        evidence.append(
            Evidence(
                Claim.RELU_PROJECTION,
                verified_or(holds == len(relu), ClaimVerdict.REFUTED),
                f"{holds} of {len(relu)} checks (idempotent, non-expansive) hold within "
                "their rounding tolerances",
            )
        )
    return Judgement(evidence, {"failing": bounded_merit(_failing(records), 0, 0)})


def render(title: str, records: list[Record[InvariantChecks]]) -> Section:
    rows = [
        [c.claim, name, str(c.verdict), number(c.defect), number(c.tolerance)]
        for c, name in _checks(records)
    ]
    headers = ["invariant", "precision", "verdict", "defect", "tolerance"]
    markdown = (
        f"{len(rows)} checks, {_failing(records)} failing; tolerances derived from each "
        "precision's unit roundoff (docs/rounding.md).\n\n" + markdown_table(headers, rows)
    )
    return Section(title, markdown, [], latex_table(title, headers, rows))


INVARIANTS = Experiment(
    "invariants",
    "projections, probability rows, convex hull, permutation equivariance, the flow on S1",
    FIELDS,
    _cases,
    {"invariants": CaseKind(run, InvariantChecks)},
    render,
    judge,
)
