"""The Convolutional vision Transformer as a study experiment (kind "cvt").

Cases "<kernel> stride <s>" (case "grid"): the convolutional attention on the 2-D token
grid against its continuous operator, for a smooth periodic (Gaussian) kernel and the
tent kernel, with and without strided keys and values; "flow orders": time-step orders of
the CvT flow (pre-LN, GELU, strided tent convolutions as token maps); "flow grid": the
CvT network (Lie at dt = 1) as its token grid refines, for both kernels. The tent's radius
is a whole number of cells on every grid, so its order-2 constant does not jump.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from convergence.grid import GridStudy
from convergence.grid_2d import cvt_flow_grid_study, cvt_grid_study, in_constant_ratio
from convergence.time_step import TimeStepStudy, time_step_study
from reports.claims import Claim
from reports.experiments.base import (
    CaseKind,
    Experiment,
    Judgement,
    Section,
    extended,
    parts_judge,
    parts_render,
)
from reports.experiments.vision.data import (
    FLOW_PERTURBATION,
    SCHEMES,
    SPREAD_BASE,
    gelu_layers,
    periodic_data,
)
from reports.experiments.vision.parts import (
    grid_judgement,
    grid_part,
    orders_judgement,
    orders_part,
)
from reports.schema import Field, array_of, integer, reject
from solvers import LayerWeights, PiecewiseControls, Problem
from solvers.space.cvt import ConvProjection, gaussian_kernel, tent_kernel

FLOW_STRIDE = 2


def _flow_grid_size(value: Any, where: str) -> int:
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
    "flow_grid": Field(_flow_grid_size, 6),
    "flow_d": Field(integer(2, 64), 8),
    "steps_per_unit": Field(
        array_of(integer(1, 4096), minimum=3, distinct=True), [4, 8, 16, 32, 64, 128]
    ),
    "flow_sizes": Field(_flow_sizes, [8, 16, 32, 64]),
}
KERNELS = {"gaussian": (gaussian_kernel(0.07), None), "tent": (tent_kernel(0.25), 2.0)}
"""Each kernel with the order its grid studies expect (None: spectral). The tent's radius
1/4 is a whole number of cells on grids of size divisible by 4."""


@dataclass(frozen=True)
class KernelGrid(GridStudy):
    """A grid study of the convolutional attention with one kernel."""

    kernel: str


@dataclass(frozen=True)
class CvtGrid(KernelGrid):
    stride: int


@dataclass(frozen=True)
class CvtFlowOrders(TimeStepStudy):
    grid: int
    stride: int


@dataclass(frozen=True)
class CvtFlowGrids:
    grids: list[KernelGrid]


def _cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    grids = [
        (f"{kernel} stride {stride}", params | {"case": "grid", "kernel": kernel, "stride": stride})
        for kernel in KERNELS
        for stride in (1, 2)
    ]
    flows = [(case, params | {"case": case}) for case in ("flow orders", "flow grid")]
    return [*grids, *flows]


def _grid(case: dict[str, Any], seed: int) -> CvtGrid:
    rng = np.random.default_rng(seed)
    data = periodic_data(rng, case["d"])
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
    return extended(CvtGrid, study, kernel=case["kernel"], stride=case["stride"])


def _flow_orders(case: dict[str, Any], seed: int) -> CvtFlowOrders:
    # pre-LN, GELU, strided tent convolutions of radius 2h (the continuous analogue of a
    # 3 x 3 depth-wise convolution) on the flow_grid x flow_grid token grid
    rng = np.random.default_rng(seed)
    n = case["flow_grid"]
    projection = ConvProjection.shared(tent_kernel(min(0.5, 2 / n)), FLOW_STRIDE)
    layers = gelu_layers(rng, case["flow_d"], 2, 2, 0.8)
    problem = Problem(
        rng.standard_normal((n * n, case["flow_d"])),
        PiecewiseControls(layers),
        len(layers),
        norm="pre",
        token_maps=projection.matrices(n),
    )
    study = time_step_study(problem, SCHEMES, case["steps_per_unit"])
    return extended(CvtFlowOrders, study, grid=n, stride=FLOW_STRIDE)


def _flow_grid(case: dict[str, Any], seed: int) -> CvtFlowGrids:
    rng = np.random.default_rng(seed)
    d = len(SPREAD_BASE)
    layers = gelu_layers(rng, d, 2, 2, 0.8)
    data = periodic_data(rng, d)
    grids = [
        extended(
            KernelGrid,
            cvt_flow_grid_study(
                layers,
                ConvProjection.shared(kernel, FLOW_STRIDE),
                lambda x: SPREAD_BASE + FLOW_PERTURBATION * data(x),
                case["flow_sizes"],
                seed=seed,
                expected=order,
            ),
            kernel=name,
        )
        for name, (kernel, order) in KERNELS.items()
    ]
    return CvtFlowGrids(grids)


GRID_HEADING = "Convolutional attention on the n x n token grid of T^2"
FLOW_GRID_HEADING = (
    "The CvT network (2 GELU pre-LN layers, Lie at dt = 1) as its token grid refines"
)


def _grid_studies(grids: list[CvtGrid]) -> list[tuple[str, GridStudy]]:
    return [(f"{g.kernel}, stride {g.stride}", g) for g in grids]


def _grid_judge(grids: list[CvtGrid]) -> Judgement:
    return grid_judgement(
        "grid",
        _grid_studies(grids),
        Claim.CVT_COVERED,
        "the grid operator converges to the continuous one at the midpoint rule's rate: ",
    )


def _grid_render(title: str, grids: list[CvtGrid]) -> Section:
    return grid_part(title, "grid", GRID_HEADING, _grid_studies(grids))


def _flow(flow: CvtFlowOrders) -> str:
    return (
        f"CvT flow ({flow.grid} x {flow.grid} tokens, pre-LN, GELU, tent convolutions, keys "
        f"and values at stride {flow.stride})"
    )


def _flow_orders_judge(flows: list[CvtFlowOrders]) -> Judgement:
    return orders_judgement(Claim.CVT_TIME_STEP_LIMIT, _flow(flows[0]), flows[0], prefix="flow.")


def _flow_orders_render(title: str, flows: list[CvtFlowOrders]) -> Section:
    return orders_part(title, "CvT", _flow(flows[0]), flows[0])


def _flow_grid_studies(flows: list[CvtFlowGrids]) -> list[tuple[str, GridStudy]]:
    return [(f"{g.kernel}, stride {FLOW_STRIDE}", g) for g in flows[0].grids]


def _flow_grid_judge(flows: list[CvtFlowGrids]) -> Judgement:
    return grid_judgement(
        "flow-grid", _flow_grid_studies(flows), Claim.VISION_GRID_LIMIT, "CvT flow grid: "
    )


def _flow_grid_render(title: str, flows: list[CvtFlowGrids]) -> Section:
    return grid_part(title, "flow-grid", FLOW_GRID_HEADING, _flow_grid_studies(flows))


KINDS = {
    "grid": CaseKind(_grid, CvtGrid, _grid_render, _grid_judge),
    "flow orders": CaseKind(_flow_orders, CvtFlowOrders, _flow_orders_render, _flow_orders_judge),
    "flow grid": CaseKind(_flow_grid, CvtFlowGrids, _flow_grid_render, _flow_grid_judge),
}
CVT = Experiment(
    "cvt",
    "the CvT: convolutional attention on a 2-D token grid (grid convergence), time-step "
    "orders of its flow and grid convergence of the network",
    CVT_FIELDS,
    _cases,
    KINDS,
    parts_render(KINDS, "\n\n"),
    parts_judge(KINDS),
)
