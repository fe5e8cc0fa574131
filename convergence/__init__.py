"""Refinement studies (time step, grid, precision) and order estimation.

Every public function is exported here (`from convergence import time_step_study`); the
README's map of the library names the module that holds each.
"""

from convergence.grid import grid_study
from convergence.grid_2d import (
    cvt_flow_grid_study,
    cvt_grid_study,
    vit_flow_grid_study,
    vit_grid_study,
)
from convergence.layer_norm_eps import eps_limit_study, lie_limit
from convergence.limit import limit_check
from convergence.network_limit import network_limit
from convergence.order import OrderVerdict, estimate_order, richardson
from convergence.precision import precision_ladder
from convergence.rounding_by_depth import rounding_error_by_depth
from convergence.testing import assert_order
from convergence.time_step import splitting_table, time_step_study
from convergence.transformer_limit import transformer_limit_distance
from convergence.uniqueness import uniqueness_study

__all__ = [
    "OrderVerdict",
    "assert_order",
    "cvt_flow_grid_study",
    "cvt_grid_study",
    "eps_limit_study",
    "estimate_order",
    "grid_study",
    "lie_limit",
    "limit_check",
    "network_limit",
    "precision_ladder",
    "richardson",
    "rounding_error_by_depth",
    "splitting_table",
    "time_step_study",
    "transformer_limit_distance",
    "uniqueness_study",
    "vit_flow_grid_study",
    "vit_grid_study",
]
