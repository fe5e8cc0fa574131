"""The paper's vision variants as study experiments.

kind "vit": case "twin" checks that the ViT encoder (pre-LN, GELU) on the initial
condition of seeded images (patch embedding, class token, position embeddings;
solvers.vit) is the Lie step at dt = 1, against the textbook encoder and, when installed,
torch; case "orders" runs the time-step study of the GELU pre-LN flow (Lie 1,
Strang-RK2 2, projected RK4 4); case "grid" the attention integral over the 2-D token
domain with a rule per axis on non-periodic data (midpoint 2, rectangle 1,
Gauss-Legendre spectral). kind "cvt": the convolutional attention on the 2-D token
grid against its continuous operator, for a smooth periodic (Gaussian) kernel and for
the tent kernel, with and without strided keys and values (convergence.grid_2d), and
case "flow orders" the time-step study of the CvT flow (pre-LN, GELU, strided tent
convolutions as the problem's token maps; Lie 1, Strang-RK2 2, projected RK4 4).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from convergence.grid_2d import cvt_grid_study, vit_grid_study
from convergence.time_step import time_step_study
from properties.transformer_identity import check_lie_is_transformer
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
from reports.schema import Field, array_of, integer, reject
from reports.tables import ORDER_HEADERS, markdown_table, order_cells
from reports.tables import number as cell
from solvers import LayerWeights, PiecewiseControls, Problem
from solvers.cvt import ConvProjection, gaussian_kernel, tent_kernel
from solvers.torch_io import torch_available
from solvers.vit import vit_initial_condition

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
ORDERS = {"lie": 1.0, "strang-rk2": 2.0, "projected-rk4": 4.0}
GRID_RULES = (
    ("midpoint", 2.0, [4, 8, 16, 32]),
    ("trapezoid", 1.0, [4, 8, 16, 32]),
    ("gauss-legendre", None, [4, 8, 16]),
)


def _smooth_2d(x: np.ndarray) -> np.ndarray:
    """A smooth, non-periodic state of the 2-D token variable (4 channels)."""
    return np.stack(
        [
            np.exp(x[:, 0]) * np.cos(1.3 * x[:, 1]),
            x[:, 0] * x[:, 1],
            np.sin(2.1 * x[:, 0] + 0.4),
            np.cos(x[:, 1] ** 2),
        ],
        1,
    )


def _vit_cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(case, params | {"case": case}) for case in ("twin", "orders", "grid")]


def _gelu_layers(rng: np.random.Generator, d: int, heads: int, count: int, weight_scale: float):
    """Pre-LN GELU layers with torch-style norms (eps 1e-6), d_ff = 4d."""
    return [
        dataclasses.replace(
            LayerWeights.random(
                d, heads, 4 * d, rng, weight_scale=weight_scale, affine=True, eps=1e-6
            ),
            activation="gelu",
        )
        for _ in range(count)
    ]


def _vit_u0(rng: np.random.Generator, case: dict[str, Any], batch: int) -> np.ndarray:
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


def _vit_run(case: dict[str, Any], seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    if case["case"] == "twin":
        u0 = _vit_u0(rng, case, 2)
        layers = _gelu_layers(rng, case["d"], case["heads"], case["layers"], 1.0)
        references = ["textbook", *(["torch"] if torch_available() else [])]
        checks = [
            check_lie_is_transformer(layers, u0, reference=r, norm="pre").to_json()
            for r in references
        ]
        return {"case": "twin", "checks": checks, "tokens": u0.shape[1]}
    if case["case"] == "grid":
        layer = LayerWeights.random(4, 2, 8, rng)
        grids = [
            vit_grid_study(
                layer, _smooth_2d, rule, sizes, reference_size=160, seed=seed, expected=order
            ).to_json()
            for rule, order, sizes in GRID_RULES
        ]
        return {"case": "grid", "grids": grids}
    u0 = _vit_u0(rng, case, 1)[0]
    layers = _gelu_layers(rng, case["d"], case["heads"], case["layers"], 0.8)
    problem = Problem(u0, PiecewiseControls(layers), len(layers), norm="pre")
    study = time_step_study(problem, list(ORDERS), case["steps_per_unit"], expected=ORDERS)
    return {"case": "orders", "tokens": len(u0)} | study.to_json()


def _orders_part(
    title: str, variant: str, flow: str, result: dict
) -> tuple[str, Figure, Evidence, dict]:
    """The table, figure, claim and merits of a time-step study of a variant's flow."""
    rows = [[m["method"], *order_cells(m["estimate"])] for m in result["methods"]]
    markdown = f"**Time-step orders of the {flow}.**\n\n" + markdown_table(
        ["method", *ORDER_HEADERS], rows
    )
    series = [
        (m["method"], [1 / s for s in m["steps_per_unit"]], m["max_abs"], m["estimate"])
        for m in result["methods"]
    ]
    figure = Figure(
        slug(f"{title} orders"),
        f"{flow}: error against dt.",
        convergence_figure(f"{variant} flow: error against dt", "dt", series),
    )
    passed = all(m["estimate"]["verdict"] == "PASS" for m in result["methods"])
    evidence = Evidence(
        f"The {variant}'s time-step limit exists, with the schemes' orders",
        "verified" if passed else "qualified",
        f"{flow}: " + "; ".join(f"{r[0]} {r[1]} ({r[3]})" for r in rows),
    )
    merit = {f"{m['method']}.order": order_merit(m["estimate"]) for m in result["methods"]}
    return markdown, figure, evidence, merit


def _vit_render(title: str, records: list[Record]) -> Section:
    by_case = {r["result"]["case"]: r["result"] for r in records if r["status"] == "ok"}
    parts, figures, evidence, merit = [], [], [], {}
    twin = by_case.get("twin")
    if twin:
        rows = [
            [
                c["configuration"].get("reference", ""),
                c["verdict"],
                cell(c["defect"]),
                cell(c["tolerance"]),
            ]
            for c in twin["checks"]
        ]
        parts.append(
            f"**ViT encoder = pre-LN GELU Lie step** ({twin['tokens']} tokens, class "
            "token included).\n\n"
            + markdown_table(["reference", "verdict", "defect", "tolerance"], rows)
        )
        holds = all(c["verdict"] == "holds" for c in twin["checks"])
        evidence.append(
            Evidence(
                "The framework covers the Vision Transformer (pre-LN, GELU)",
                "verified" if holds else "refuted",
                "the ViT block is the pre-LN Lie step with GELU against "
                + ", ".join(r[0] for r in rows)
                + " (defects "
                + ", ".join(r[2] for r in rows)
                + ")",
            )
        )
    orders = by_case.get("orders")
    if orders:
        markdown, figure, claim, orders_merit = _orders_part(
            title, "ViT", f"GELU pre-LN flow ({orders['tokens']} tokens)", orders
        )
        parts.append(markdown)
        figures.append(figure)
        evidence.append(claim)
        merit |= orders_merit
    grid = by_case.get("grid")
    if grid:
        rows = [
            [
                g["rule"],
                *order_cells(g["estimate"]),
                "spectral" if g["spectral"] else "algebraic",
                cell(g["errors"][-1]),
            ]
            for g in grid["grids"]
        ]
        parts.append(
            "**Attention integral over the 2-D token domain** (non-periodic data, "
            "one rule per axis).\n\n"
            + markdown_table(["rule", *ORDER_HEADERS, "convergence", "finest error"], rows)
        )
        series = [
            (g["rule"], [1 / n for n in g["sizes"]], g["errors"], g["estimate"])
            for g in grid["grids"]
        ]
        figures.append(
            Figure(
                slug(f"{title} grid"),
                "ViT attention: error against 1/n.",
                convergence_figure(f"{title}: 2-D token grid", "h = 1/n", series),
            )
        )
        ok = all(
            g["spectral"]
            if g["estimate"]["expected"] is None
            else g["estimate"]["verdict"] == "PASS"
            for g in grid["grids"]
        )
        evidence.append(
            Evidence(
                "The grid discretisation converges to the continuous attention operator",
                "verified" if ok else "qualified",
                "2-D token domain: "
                + "; ".join(f"{r[0]} {'spectral' if r[-2] == 'spectral' else r[1]}" for r in rows),
            )
        )
    return Section(title, "\n".join(parts), figures, "", evidence, merit)


FLOW_STRIDE = 2


def _flow_grid(value: Any, where: str) -> int:
    """An even grid size (the flow's keys and values sit at stride 2)."""
    n = integer(2, 16)(value, where)
    if n % FLOW_STRIDE:
        raise reject(where, f"must be divisible by the key stride {FLOW_STRIDE}, got {n}")
    return n


CVT_FIELDS = {
    "sizes": Field(array_of(integer(2, 1024), minimum=3, distinct=True), [12, 24, 48, 96]),
    "reference_size": Field(integer(8, 2048), 768),
    "d": Field(integer(1, 32), 4),
    "flow_grid": Field(_flow_grid, 6),
    "flow_d": Field(integer(2, 64), 8),
    "steps_per_unit": Field(
        array_of(integer(1, 4096), minimum=3, distinct=True), [4, 8, 16, 32, 64]
    ),
}
KERNELS = {"gaussian": lambda: gaussian_kernel(0.07), "tent": lambda: tent_kernel(0.15)}


def _cvt_cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    grids = [
        (f"{kernel} stride {stride}", params | {"kernel": kernel, "stride": stride})
        for kernel in KERNELS
        for stride in (1, 2)
    ]
    return [*grids, ("flow orders", params | {"kernel": "flow"})]


def _cvt_flow_run(case: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """The CvT flow (pre-LN, GELU, strided convolutional projections with the tent of
    radius 2h, the continuous analogue of a 3 x 3 depth-wise convolution) on the
    flow_grid x flow_grid token grid: time-step orders."""
    n = case["flow_grid"]
    projection = ConvProjection.shared(tent_kernel(min(0.5, 2 / n)), FLOW_STRIDE)
    layers = _gelu_layers(rng, case["flow_d"], 2, 2, 0.8)
    problem = Problem(
        rng.standard_normal((n * n, case["flow_d"])),
        PiecewiseControls(layers),
        len(layers),
        norm="pre",
        token_maps=projection.matrices(n),
    )
    study = time_step_study(problem, list(ORDERS), case["steps_per_unit"], expected=ORDERS)
    return {"kernel": "flow", "grid": n, "stride": FLOW_STRIDE} | study.to_json()


def _cvt_run(case: dict[str, Any], seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    if case["kernel"] == "flow":
        return _cvt_flow_run(case, rng)
    d = case["d"]
    waves = np.array([[1, 0], [0, 1], [1, 2]])
    amplitude, phase = rng.standard_normal((d, 3)), rng.uniform(0, 2 * np.pi, (d, 3))

    def data(x: np.ndarray) -> np.ndarray:
        angle = 2 * np.pi * (x @ waves.T)
        return np.stack(
            [(amplitude[c] * np.cos(angle + phase[c])).sum(axis=1) for c in range(d)], 1
        )

    layer = LayerWeights.random(d, 1, d, rng)
    projection = ConvProjection.shared(KERNELS[case["kernel"]](), case["stride"])
    expected = 2.0 if case["kernel"] == "tent" else None
    study = cvt_grid_study(
        layer,
        projection,
        data,
        case["sizes"],
        reference_size=case["reference_size"],
        seed=seed,
        expected=expected,
    )
    return {"kernel": case["kernel"], "stride": case["stride"]} | study.to_json()


def _cvt_render(title: str, records: list[Record]) -> Section:
    results = [r["result"] for r in records if r["status"] == "ok"]
    done = [r for r in results if r["kernel"] != "flow"]
    rows, series, merit, figures, evidence = [], [], {}, [], []
    for r in done:
        label = f"{r['kernel']}, stride {r['stride']}"
        rows.append(
            [
                label,
                *order_cells(r["estimate"]),
                "spectral" if r["spectral"] else "algebraic",
                cell(r["errors"][-1]),
            ]
        )
        series.append((label, [1 / n for n in r["sizes"]], r["errors"], r["estimate"]))
        if not r["spectral"]:
            e = r["estimate"]
            merit[f"{r['kernel']}.stride{r['stride']}.order"] = order_merit(e)
    parts = [
        "Convolutional attention on the n x n token grid of T^2 against a "
        f"{done[0]['reference'] if done else '-'} reference.\n\n"
        + markdown_table(["kernel", *ORDER_HEADERS, "convergence", "finest error"], rows)
    ]
    if series:
        figures.append(
            Figure(
                slug(title),
                "CvT attention: error against the token grid size.",
                convergence_figure(title, "h = 1/n", series),
            )
        )
    ok = all(
        r["spectral"] if r["kernel"] == "gaussian" else r["estimate"]["verdict"] == "PASS"
        for r in done
    )
    if done:
        evidence.append(
            Evidence(
                "The framework covers the Convolutional vision Transformer (CvT)",
                "verified" if ok else "qualified",
                "the grid operator converges to the continuous one at the midpoint rule's "
                "rate: "
                + "; ".join(
                    f"{r[0]}: {r[1] if r[-2] == 'algebraic' else 'spectral'}" for r in rows
                ),
            )
        )
    for flow in (r for r in results if r["kernel"] == "flow"):
        markdown, figure, claim, flow_merit = _orders_part(
            title,
            "CvT",
            f"CvT flow ({flow['grid']} x {flow['grid']} tokens, pre-LN, GELU, tent "
            f"convolutions, keys and values at stride {flow['stride']})",
            flow,
        )
        parts.append(markdown)
        figures.append(figure)
        evidence.append(claim)
        merit |= {f"flow.{key}": value for key, value in flow_merit.items()}
    return Section(title, "\n\n".join(parts), figures, "", evidence, merit)


VIT = Experiment(
    "vit",
    "the Vision Transformer: encoder twin and time-step orders of its flow",
    VIT_FIELDS,
    _vit_cases,
    _vit_run,
    _vit_render,
)
CVT = Experiment(
    "cvt",
    "the CvT: convolutional attention on a 2-D token grid (grid convergence) and its flow "
    "(time-step orders)",
    CVT_FIELDS,
    _cvt_cases,
    _cvt_run,
    _cvt_render,
)
