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

from properties.claim_check import CheckVerdict
from properties.conditioning.attention_conditioning import (
    AttentionConditioning,
    attention_conditioning,
)
from properties.conditioning.projection_conditioning import (
    LayerNormConditioning,
    layer_norm_conditioning,
)
from reports.claims import Claim, ClaimVerdict, Evidence, verified_or
from reports.experiments.base import CaseKind, Judgement, Section, by_case_kind, no_judgement
from reports.figures import Figure, lines_figure
from reports.merit import bounded_merit
from reports.schema import Field, array_of, integer, number
from reports.tables import markdown_table, number_rows, slug
from solvers import LayerWeights

FIELDS = {
    "stds": Field(array_of(number(positive=True), minimum=3, distinct=True)),
    "betas": Field(array_of(number(positive=True), minimum=3, distinct=True)),
    "d": Field(integer(2, 256), 8),
    "tokens": Field(integer(2, 256), 6),
}


def _layer_norm(case: dict[str, Any], seed: int) -> LayerNormConditioning:
    return layer_norm_conditioning(case["stds"], d=case["d"], seed=seed)


def _attention(case: dict[str, Any], seed: int) -> AttentionConditioning:
    rng = np.random.default_rng(seed)
    layer = LayerWeights.random(case["d"], 2 if case["d"] % 2 == 0 else 1, 2 * case["d"], rng)
    u = rng.standard_normal((case["tokens"], case["d"]))
    return attention_conditioning(layer, u, case["betas"])


def layer_norm_evidence(ln: LayerNormConditioning) -> Evidence:
    """Verified when log L against log std has slope -1 and constant sigma2 (each inside
    its 95% interval or within the study's tolerance: its verdict holds), else refuted."""
    return Evidence(
        Claim.LAYER_NORM_CONDITIONING,
        verified_or(ln.verdict == CheckVerdict.HOLDS, ClaimVerdict.REFUTED),
        f"slope {ln.slope:.4f} over {ln.decades:.1f} decades, {ln.verdict} (slope -1 and "
        f"constant sigma2 within {ln.inputs['tolerance']:g})",
    )


def _layer_norm_judge(cases: list[LayerNormConditioning]) -> Judgement:
    """The slope of log L against log std as a figure of merit (within 0.05 of -1)."""
    ln = cases[0]
    merit = {"layer_norm.slope": bounded_merit(ln.slope, -1.05, -0.95)}
    return Judgement([layer_norm_evidence(ln)], merit)


def _layer_norm_render(title: str, cases: list[LayerNormConditioning]) -> Section:
    ln = cases[0]
    markdown = (
        f"**Layer-norm projection near constant rows.** log L against log std: slope "
        f"{ln.slope:.6f} [{ln.slope_interval[0]:.6f}, {ln.slope_interval[1]:.6f}], constant "
        f"{ln.constant:.6g} (expected sigma2 = {ln.expected_constant:g}) over "
        f"{ln.decades:.1f} decades: {ln.verdict}.\n\n"
        + markdown_table(
            ["std", "Lipschitz constant", "L x std"],
            number_rows(ln.stds, ln.lipschitz, ln.scaled),
        )
    )
    figure = Figure(
        slug(f"{title} layer norm"),
        "P's Lipschitz constant against std.",
        lines_figure(
            f"{title}: layer norm",
            "row std",
            "Lipschitz constant",
            [("measured", ln.stds, ln.lipschitz)],
        ),
    )
    return Section(title, markdown, [figure])


def _attention_render(title: str, cases: list[AttentionConditioning]) -> Section:
    attention = cases[0]
    rows = number_rows(
        attention.betas, attention.lipschitz, attention.saturation, attention.distance_to_hard
    )
    markdown = (
        f"**Attention against the inverse temperature beta.** Growth exponent of the "
        f"Lipschitz constant on the large-beta tail {attention.growth.slope:.3f}; hard "
        f"attention's constant {attention.hard_lipschitz:.4g}; distance to hard "
        f"attention decays at rate {-attention.decay.slope:.4g} against the "
        f"score gap {attention.score_gap:.4g}.\n\n"
        + markdown_table(["beta", "Lipschitz constant", "saturation", "distance to hard"], rows)
    )
    figure = Figure(
        slug(f"{title} attention"),
        "Attention against beta.",
        lines_figure(
            f"{title}: attention",
            "beta",
            "size",
            [
                ("Lipschitz constant", attention.betas, attention.lipschitz),
                (
                    "distance to hard attention",
                    attention.betas,
                    [max(x, 1e-18) for x in attention.distance_to_hard],
                ),
            ],
        ),
    )
    return Section(title, markdown, figures=[figure])


CONDITIONING = by_case_kind(
    "conditioning",
    "conditioning of the LN projection near constant rows and of attention against beta",
    FIELDS,
    {
        "layer-norm": CaseKind(
            _layer_norm, LayerNormConditioning, _layer_norm_render, _layer_norm_judge
        ),
        "attention": CaseKind(_attention, AttentionConditioning, _attention_render, no_judgement),
    },
)
