"""The registry of experiment kinds a study file may name (see reports.experiments.base)."""

from __future__ import annotations

from reports.experiments.base import Experiment
from reports.experiments.claims import CLAIMS
from reports.experiments.conditioning import CONDITIONING
from reports.experiments.depth_family.experiment import DEPTH_FAMILY
from reports.experiments.grid import GRID
from reports.experiments.invariants import INVARIANTS
from reports.experiments.limits import LAYER_NORM_LIMIT, TRANSFORMER_LIMIT
from reports.experiments.network.experiment import NETWORK_LIMIT
from reports.experiments.precision import PRECISION_LADDER, ROUNDING_DEPTH
from reports.experiments.stability import STABILITY
from reports.experiments.time_step import SPLITTING_TABLE, TIME_STEP
from reports.experiments.vision import CVT, VIT
from reports.experiments.well_posedness import WELL_POSEDNESS

EXPERIMENTS: dict[str, Experiment] = {
    experiment.kind: experiment
    for experiment in (
        CLAIMS,
        INVARIANTS,
        TIME_STEP,
        SPLITTING_TABLE,
        GRID,
        PRECISION_LADDER,
        ROUNDING_DEPTH,
        LAYER_NORM_LIMIT,
        TRANSFORMER_LIMIT,
        NETWORK_LIMIT,
        DEPTH_FAMILY,
        WELL_POSEDNESS,
        CONDITIONING,
        STABILITY,
        VIT,
        CVT,
    )
}
