"""Claims about operators and flows, as checks that return a verdict and the measured defect,
by concern: exactness/, invariants/, stability/, well_posedness/, conditioning/
(docs/architecture.md section 2).

Every public function is exported here (`from properties import gronwall_bound`); the
README's map of the library names the module that holds each.
"""

from properties.conditioning.attention_conditioning import attention_conditioning
from properties.conditioning.projection_conditioning import layer_norm_conditioning
from properties.exactness.paper_substeps import check_six_substeps
from properties.exactness.projection_theorem import (
    check_layer_norm_idempotence,
    check_projection_idempotence_and_scale,
    check_projection_theorem,
)
from properties.exactness.transformer_identity import check_lie_is_transformer
from properties.invariants.attention_weights import check_attention_weights
from properties.invariants.constraint_set import check_flow_stays_on_s1
from properties.invariants.equivariance import check_permutation_equivariance
from properties.invariants.projections import check_relu_projection, measure_projection_expansion
from properties.stability.lyapunov import ftle_convergence, perturbation_growth
from properties.stability.stability_map import stability_map
from properties.well_posedness.continuous_dependence import continuous_dependence
from properties.well_posedness.dependence_sweep import continuous_dependence_sweep
from properties.well_posedness.gronwall import gronwall_bound

__all__ = [
    "attention_conditioning",
    "check_attention_weights",
    "check_flow_stays_on_s1",
    "check_layer_norm_idempotence",
    "check_lie_is_transformer",
    "check_permutation_equivariance",
    "check_projection_idempotence_and_scale",
    "check_projection_theorem",
    "check_relu_projection",
    "check_six_substeps",
    "continuous_dependence",
    "continuous_dependence_sweep",
    "ftle_convergence",
    "gronwall_bound",
    "layer_norm_conditioning",
    "measure_projection_expansion",
    "perturbation_growth",
    "stability_map",
]
