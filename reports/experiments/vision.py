"""The paper's vision variants as study experiments.

kind "vit": case "twin" checks that the ViT encoder (pre-LN, GELU) on the initial
condition of seeded images (patch embedding, class token, position embeddings;
solvers.vit) is the Lie step at dt = 1, against the textbook encoder and, when installed,
torch; case "orders" runs the time-step study of the GELU pre-LN flow from that initial
condition (Lie 1, Strang-RK2 2, projected RK4 4); case "grid" the attention integral
over the 2-D token domain with a rule per axis on non-periodic data (midpoint 2,
rectangle 1, Gauss-Legendre spectral); case "flow grid" the midpoint and Gauss-Legendre
rules for the whole network (two GELU pre-LN layers, Lie at dt = 1) as its token grid
refines.

kind "cvt": cases "<kernel> stride <s>" the convolutional attention on the 2-D token
grid against its continuous operator, for a smooth periodic (Gaussian) kernel and for
the tent kernel, with and without strided keys and values (convergence.grid_2d); case
"flow orders" the time-step study of the CvT flow (pre-LN, GELU, strided tent
convolutions as the problem's token maps; Lie 1, Strang-RK2 2, projected RK4 4); case
"flow grid" the CvT network (Lie at dt = 1) as its token grid refines, for both kernels.

The flow grid studies start from token fields whose spread over the features stays away
from zero (pre-LN is steep near constant rows, convergence.grid_2d), and the tent's
radius is a whole number of cells on every grid (its kinks then fall at the same place
in the cells, so the order-2 constant does not jump between grids).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from convergence.grid_2d import (
    cvt_flow_grid_study,
    cvt_grid_study,
    in_constant_ratio,
    vit_flow_grid_study,
    vit_grid_study,
)
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
from solvers.records import to_json
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
FLOW_GRID_RULES = (("midpoint", 2.0, [4, 8, 16, 32]), ("gauss-legendre", None, [2, 4, 8, 16]))
"""(The rectangle rule's order 1 shows at the operator level; on the network its h^2 term
keeps it pre-asymptotic up to n = 64: 0.93 [0.86, 1.00].)"""
SPREAD_BASE = np.array([1.0, -1.0, 0.5, -0.5])
FLOW_PERTURBATION = 0.1
"""The flow grid data are SPREAD_BASE (feature spread sqrt(5/8) = 0.79) plus 0.1 times a
field of size <= e (<= 1 for the CvT's): the spread is a seminorm, so every row's spread
stays above 0.79 - 0.28 = 0.51 at t = 0."""


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


def _spread_2d(x: np.ndarray) -> np.ndarray:
    """_smooth_2d around rows of feature spread away from zero: the flow grid data."""
    return SPREAD_BASE + FLOW_PERTURBATION * _smooth_2d(x)


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


def _vit_cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(case, params | {"case": case}) for case in ("twin", "orders", "grid", "flow grid")]


def _vit_run(case: dict[str, Any], seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    if case["case"] == "twin":
        u0 = _vit_u0(rng, case, 2)
        layers = _gelu_layers(rng, case["d"], case["heads"], case["layers"], 1.0)
        references = ["textbook", *(["torch"] if torch_available() else [])]
        checks = [
            to_json(check_lie_is_transformer(layers, u0, reference=r, norm="pre"))
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
    if case["case"] == "flow grid":
        layers = _gelu_layers(rng, 4, 2, 2, 0.8)
        grids = [
            vit_flow_grid_study(layers, _spread_2d, rule, sizes, seed=seed, expected=order)
            .to_json()
            for rule, order, sizes in FLOW_GRID_RULES
        ]  # fmt: skip
        return {"case": "flow grid", "grids": grids}
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


def _grid_part(
    title: str, key: str, heading: str, studies: list[tuple[str, dict]]
) -> tuple[str, Figure, bool, str, dict]:
    """The table, figure, verdict (every study at its expected order, or spectral where
    none is expected), one-line summary and merits of labelled 2-D grid studies."""
    rows = [
        [
            label,
            *(["-", "-", "-", "-", "-"] if g["spectral"] else order_cells(g["estimate"])),
            "spectral" if g["spectral"] else "algebraic",
            cell(g["errors"][-1]),
        ]
        for label, g in studies
    ]  # no power law fits a spectral series: its order cells would mislead
    markdown = f"**{heading}** (against {studies[0][1]['reference']}).\n\n" + markdown_table(
        ["grid", *ORDER_HEADERS, "convergence", "finest error"], rows
    )
    series = [
        (
            f"{label}: spectral" if g["spectral"] else label,
            [1 / n for n in g["sizes"]],
            g["errors"],
            None if g["spectral"] else g["estimate"],
        )
        for label, g in studies
    ]
    figure = Figure(
        slug(f"{title} {key}"),
        f"{heading}: error against 1/n.",
        convergence_figure(f"{title}: {key.replace('-', ' ')}", "h = 1/n", series),
    )
    ok = all(
        g["spectral"] if g["estimate"]["expected"] is None else g["estimate"]["verdict"] == "PASS"
        for _, g in studies
    )
    summary = "; ".join(f"{r[0]}: {r[1] if r[-2] == 'algebraic' else 'spectral'}" for r in rows)
    merit = {
        f"{key}.{slug(label)}.order": order_merit(g["estimate"])
        for label, g in studies
        if not g["spectral"]
    }
    return markdown, figure, ok, summary, merit


FLOW_GRID_CLAIM = (
    "The vision flows have a token-grid limit (the network converges as its grid refines)"
)


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
    for case, claim, heading in (
        (
            "grid",
            "The grid discretisation converges to the continuous attention operator",
            "Attention integral over the 2-D token domain (non-periodic data, one rule per axis)",
        ),
        (
            "flow grid",
            FLOW_GRID_CLAIM,
            "The ViT network (2 GELU pre-LN layers, Lie at dt = 1) as its token grid refines",
        ),
    ):
        if case not in by_case:
            continue
        studies = [(g["rule"], g) for g in by_case[case]["grids"]]
        markdown, figure, ok, summary, grid_merit = _grid_part(title, slug(case), heading, studies)
        parts.append(markdown)
        figures.append(figure)
        evidence.append(
            Evidence(claim, "verified" if ok else "qualified", f"ViT {case}: {summary}")
        )
        merit |= grid_merit
    return Section(title, "\n\n".join(parts), figures, "", evidence, merit)


FLOW_STRIDE = 2


def _flow_grid(value: Any, where: str) -> int:
    """An even grid size (the flow's keys and values sit at stride 2)."""
    n = integer(2, 16)(value, where)
    if n % FLOW_STRIDE:
        raise reject(where, f"must be divisible by the key stride {FLOW_STRIDE}, got {n}")
    return n


def _flow_sizes(value: Any, where: str) -> list[int]:
    """At least 4 grid sizes in a constant ratio (successive differences), multiples of 4
    (the tent's radius 1/4 a whole number of cells, the stride 2 a divisor), at most 64
    (the probed maps are dense: (64^2 + 16)^2 entries each)."""
    sizes = sorted(array_of(integer(4, 64), minimum=4, distinct=True)(value, where))
    if any(n % 4 for n in sizes):
        raise reject(where, f"sizes must be multiples of 4, got {sizes}")
    if not in_constant_ratio(sizes):
        raise reject(where, f"sizes must grow by a constant ratio, got {sizes}")
    return sizes


CVT_FIELDS = {
    "sizes": Field(array_of(integer(2, 1024), minimum=3, distinct=True), [12, 24, 48, 96]),
    "reference_size": Field(integer(8, 2048), 768),
    "d": Field(integer(1, 32), 4),
    "flow_grid": Field(_flow_grid, 6),
    "flow_d": Field(integer(2, 64), 8),
    "steps_per_unit": Field(
        array_of(integer(1, 4096), minimum=3, distinct=True), [4, 8, 16, 32, 64]
    ),
    "flow_sizes": Field(_flow_sizes, [8, 16, 32, 64]),
}
KERNELS = {"gaussian": (gaussian_kernel(0.07), None), "tent": (tent_kernel(0.25), 2.0)}
"""Each kernel with the order its grid studies expect (None: spectral). The tent's radius
1/4 is a whole number of cells on grids of size divisible by 4."""


def _cvt_cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    grids = [
        (f"{kernel} stride {stride}", params | {"case": "grid", "kernel": kernel, "stride": stride})
        for kernel in KERNELS
        for stride in (1, 2)
    ]
    flows = [(case, params | {"case": case}) for case in ("flow orders", "flow grid")]
    return [*grids, *flows]


def _periodic_data(rng: np.random.Generator, d: int):
    """A seeded trigonometric polynomial T^2 -> R^d, each channel at most 1 in size."""
    waves = np.array([[1, 0], [0, 1], [1, 2]])
    amplitude, phase = rng.standard_normal((d, 3)), rng.uniform(0, 2 * np.pi, (d, 3))
    amplitude /= np.abs(amplitude).sum(axis=1, keepdims=True)

    def data(x: np.ndarray) -> np.ndarray:
        angle = 2 * np.pi * (x @ waves.T)
        return np.stack(
            [(amplitude[c] * np.cos(angle + phase[c])).sum(axis=1) for c in range(d)], 1
        )

    return data


def _cvt_run(case: dict[str, Any], seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    if case["case"] == "flow orders":
        # pre-LN, GELU, strided tent convolutions of radius 2h (the continuous analogue of
        # a 3 x 3 depth-wise convolution) on the flow_grid x flow_grid token grid
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
        return {"case": "flow orders", "grid": n, "stride": FLOW_STRIDE} | study.to_json()
    if case["case"] == "flow grid":
        d = len(SPREAD_BASE)
        layers = _gelu_layers(rng, d, 2, 2, 0.8)
        data = _periodic_data(rng, d)
        grids = [
            {"kernel": name}
            | cvt_flow_grid_study(
                layers, ConvProjection.shared(kernel, FLOW_STRIDE),
                lambda x: SPREAD_BASE + FLOW_PERTURBATION * data(x),
                case["flow_sizes"], seed=seed, expected=order,
            ).to_json()
            for name, (kernel, order) in KERNELS.items()
        ]  # fmt: skip
        return {"case": "flow grid", "grids": grids}
    data = _periodic_data(rng, case["d"])
    layer = LayerWeights.random(case["d"], 1, case["d"], rng)
    kernel, order = KERNELS[case["kernel"]]
    study = cvt_grid_study(
        layer,
        ConvProjection.shared(kernel, case["stride"]),
        data,
        case["sizes"],
        reference_size=case["reference_size"],
        seed=seed,
        expected=order,
    )
    return {"case": "grid", "kernel": case["kernel"], "stride": case["stride"]} | study.to_json()


def _cvt_render(title: str, records: list[Record]) -> Section:
    results = [r["result"] for r in records if r["status"] == "ok"]
    parts, figures, evidence, merit = [], [], [], {}
    grids = [(f"{r['kernel']}, stride {r['stride']}", r) for r in results if r["case"] == "grid"]
    if grids:
        markdown, figure, ok, summary, grid_merit = _grid_part(
            title, "grid", "Convolutional attention on the n x n token grid of T^2", grids
        )
        parts.append(markdown)
        figures.append(figure)
        evidence.append(
            Evidence(
                "The framework covers the Convolutional vision Transformer (CvT)",
                "verified" if ok else "qualified",
                f"the grid operator converges to the continuous one at the midpoint rule's rate: "
                f"{summary}",
            )
        )
        merit |= grid_merit
    for flow in (r for r in results if r["case"] == "flow orders"):
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
    for flow in (r for r in results if r["case"] == "flow grid"):
        studies = [(f"{g['kernel']}, stride {FLOW_STRIDE}", g) for g in flow["grids"]]
        markdown, figure, ok, summary, grid_merit = _grid_part(
            title, "flow-grid",
            "The CvT network (2 GELU pre-LN layers, Lie at dt = 1) as its token grid refines",
            studies,
        )  # fmt: skip
        parts.append(markdown)
        figures.append(figure)
        evidence.append(
            Evidence(
                FLOW_GRID_CLAIM, "verified" if ok else "qualified", f"CvT flow grid: {summary}"
            )
        )
        merit |= grid_merit
    return Section(title, "\n\n".join(parts), figures, "", evidence, merit)


VIT = Experiment(
    "vit",
    "the Vision Transformer: encoder twin, time-step orders of its flow, grid convergence of "
    "its attention integral and of the network",
    VIT_FIELDS,
    _vit_cases,
    _vit_run,
    _vit_render,
)
CVT = Experiment(
    "cvt",
    "the CvT: convolutional attention on a 2-D token grid (grid convergence), time-step "
    "orders of its flow and grid convergence of the network",
    CVT_FIELDS,
    _cvt_cases,
    _cvt_run,
    _cvt_render,
)
