"""The Vision Transformer as a study experiment (kind "vit").

Cases: "twin" (the ViT encoder, pre-LN and GELU, on the initial condition of seeded
images is the Lie step at dt = 1, against the textbook encoder and torch when installed),
"orders" (time-step orders of its flow), "grid" (the attention integral over the 2-D
token domain, one rule per axis, non-periodic data) and "flow grid" (the network, Lie at
dt = 1, as its token grid refines).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from convergence.grid import GridStudy
from convergence.grid_2d import vit_flow_grid_study, vit_grid_study
from convergence.time_step import TimeStepStudy, time_step_study
from properties.claim_check import CheckVerdict, ClaimCheck
from properties.exactness.transformer_identity import check_lie_is_transformer
from reports.claims import Claim, ClaimVerdict, Evidence, verified_or
from reports.experiments.base import CaseKind, Judgement, Section, by_case_kind, extended
from reports.experiments.vision.data import SCHEMES, gelu_layers, smooth_2d, spread_2d
from reports.experiments.vision.parts import (
    grid_judgement,
    grid_part,
    orders_judgement,
    orders_part,
)
from reports.schema import Field, array_of, integer
from reports.tables import markdown_table, slug
from reports.tables import number as cell
from solvers import LayerWeights, PiecewiseControls, Problem
from solvers.io.torch_modules import torch_available
from solvers.space.vit import vit_initial_condition

VIT_FIELDS = {
    "image": Field(integer(2, 64), 8),
    "patch": Field(integer(1, 16), 4),
    "channels": Field(integer(1, 4), 3),
    "d": Field(integer(2, 128), 16),
    "heads": Field(integer(1, 16), 2),
    "layers": Field(integer(1, 12), 2),
    "steps_per_unit": Field(
        array_of(integer(1, 4096), minimum=3, distinct=True), [4, 8, 16, 32, 64]
    ),
}
GRID_RULES = (
    ("midpoint", 2.0, [4, 8, 16, 32]),
    ("trapezoid", 1.0, [4, 8, 16, 32]),
    ("gauss-legendre", None, [4, 8, 16]),
)
FLOW_GRID_RULES = (("midpoint", 2.0, [4, 8, 16, 32]), ("gauss-legendre", None, [2, 4, 8, 16]))
"""(The rectangle rule's order 1 shows at the operator level; on the network its h^2 term
keeps it pre-asymptotic up to n = 64: 0.93 [0.86, 1.00].)"""


@dataclass(frozen=True)
class VitTwin:
    """The ViT block against the pre-LN GELU Lie step, per reference encoder."""

    checks: list[ClaimCheck]
    tokens: int


@dataclass(frozen=True)
class VitOrders(TimeStepStudy):
    tokens: int


@dataclass(frozen=True)
class VitGrids:
    """One grid study per quadrature rule."""

    grids: list[GridStudy]


def _initial_condition(rng: np.random.Generator, case: dict[str, Any], batch: int) -> np.ndarray:
    """The ViT's initial condition of `batch` seeded images: (batch, 1 + P, d)."""
    d, patch, channels = case["d"], case["patch"], case["channels"]
    count = (case["image"] // patch) ** 2
    images = rng.standard_normal((batch, channels, case["image"], case["image"]))
    return vit_initial_condition(
        images,
        patch,
        rng.standard_normal((d, channels, patch, patch)) / patch,
        rng.standard_normal(d),
        rng.standard_normal(d),
        rng.standard_normal((count + 1, d)),
    )


def _twin(case: dict[str, Any], seed: int) -> VitTwin:
    rng = np.random.default_rng(seed)
    u0 = _initial_condition(rng, case, 2)
    layers = gelu_layers(rng, case["d"], case["heads"], case["layers"], 1.0)
    references = ["textbook", *(["torch"] if torch_available() else [])]
    checks = [check_lie_is_transformer(layers, u0, reference=r, norm="pre") for r in references]
    return VitTwin(checks, u0.shape[1])


def _orders(case: dict[str, Any], seed: int) -> VitOrders:
    rng = np.random.default_rng(seed)
    u0 = _initial_condition(rng, case, 1)[0]
    layers = gelu_layers(rng, case["d"], case["heads"], case["layers"], 0.8)
    problem = Problem(u0, PiecewiseControls(layers), len(layers), norm="pre")
    study = time_step_study(problem, SCHEMES, case["steps_per_unit"])
    return extended(VitOrders, study, tokens=len(u0))


def _grid(case: dict[str, Any], seed: int) -> VitGrids:
    layer = LayerWeights.random(4, 2, 8, np.random.default_rng(seed))
    grids = [
        vit_grid_study(layer, smooth_2d, rule, sizes, reference_size=160, seed=seed, expected=order)
        for rule, order, sizes in GRID_RULES
    ]
    return VitGrids(grids)


def _flow_grid(case: dict[str, Any], seed: int) -> VitGrids:
    layers = gelu_layers(np.random.default_rng(seed), 4, 2, 2, 0.8)
    grids = [
        vit_flow_grid_study(layers, spread_2d, rule, sizes, seed=seed, expected=order)
        for rule, order, sizes in FLOW_GRID_RULES
    ]
    return VitGrids(grids)


def twin_evidence(twin: VitTwin) -> Evidence:
    """Verified when the block equals the Lie step within rounding (each check's defect
    at most its tolerance) against every reference encoder, refuted otherwise."""
    holds = all(c.verdict == CheckVerdict.HOLDS for c in twin.checks)
    return Evidence(
        Claim.VIT_COVERED,
        verified_or(holds, ClaimVerdict.REFUTED),
        "the ViT block is the pre-LN Lie step with GELU against "
        + ", ".join(c.configuration.get("reference", "") for c in twin.checks)
        + " (defects "
        + ", ".join(f"{cell(c.defect)} <= {cell(c.tolerance)}" for c in twin.checks)
        + ")",
    )


def _twin_judge(twins: list[VitTwin]) -> Judgement:
    return Judgement([twin_evidence(twins[0])])


def _twin_render(title: str, twins: list[VitTwin]) -> Section:
    twin = twins[0]
    rows = [
        [c.configuration.get("reference", ""), str(c.verdict), cell(c.defect), cell(c.tolerance)]
        for c in twin.checks
    ]
    markdown = (
        f"**ViT encoder = pre-LN GELU Lie step** ({twin.tokens} tokens, class token "
        "included).\n\n" + markdown_table(["reference", "verdict", "defect", "tolerance"], rows)
    )
    return Section(title, markdown)


def _flow(study: VitOrders) -> str:
    return f"GELU pre-LN flow ({study.tokens} tokens)"


def _orders_judge(studies: list[VitOrders]) -> Judgement:
    return orders_judgement(Claim.VIT_TIME_STEP_LIMIT, _flow(studies[0]), studies[0])


def _orders_render(title: str, studies: list[VitOrders]) -> Section:
    return orders_part(title, "ViT", _flow(studies[0]), studies[0])


def _rules(series: list[VitGrids]) -> list[tuple[str, GridStudy]]:
    """The grid studies of a case, labelled by their rule."""
    return [(g.rule, g) for g in series[0].grids]


def _grids_judge(case: str, claim: Claim, series: list[VitGrids]) -> Judgement:
    return grid_judgement(slug(case), _rules(series), claim, f"ViT {case}: ")


def _grids_render(case: str, heading: str, title: str, series: list[VitGrids]) -> Section:
    return grid_part(title, slug(case), heading, _rules(series))


GRID_HEADING = "Attention integral over the 2-D token domain (non-periodic data, one rule per axis)"
FLOW_GRID_HEADING = (
    "The ViT network (2 GELU pre-LN layers, Lie at dt = 1) as its token grid refines"
)
VIT = by_case_kind(
    "vit",
    "the Vision Transformer: encoder twin, time-step orders of its flow, grid convergence of "
    "its attention integral and of the network",
    VIT_FIELDS,
    {
        "twin": CaseKind(_twin, VitTwin, _twin_render, _twin_judge),
        "orders": CaseKind(_orders, VitOrders, _orders_render, _orders_judge),
        "grid": CaseKind(
            _grid,
            VitGrids,
            partial(_grids_render, "grid", GRID_HEADING),
            partial(_grids_judge, "grid", Claim.GRID_LIMIT),
        ),
        "flow grid": CaseKind(
            _flow_grid,
            VitGrids,
            partial(_grids_render, "flow grid", FLOW_GRID_HEADING),
            partial(_grids_judge, "flow grid", Claim.VISION_GRID_LIMIT),
        ),
    },
    separator="\n\n",
)
