"""Claims about operators and flows, as checks that return a verdict and the measured defect.

Every public function is exported here (`from properties import gronwall_bound`); the
README's map of the library names the module that holds each.
"""

from properties.attention_weights import check_attention_weights
from properties.conditioning import attention_conditioning, layer_norm_conditioning
from properties.constraint_set import check_flow_stays_on_s1
from properties.continuous_dependence import continuous_dependence
from properties.dependence_sweep import continuous_dependence_sweep
from properties.equivariance import check_permutation_equivariance
from properties.gronwall import gronwall_bound
from properties.lyapunov import ftle_convergence, perturbation_growth
from properties.paper_substeps import check_six_substeps
from properties.projection_theorem import (
    check_layer_norm_idempotence,
    check_projection_idempotence_and_scale,
    check_projection_theorem,
)
from properties.projections import check_relu_projection, measure_projection_expansion
from properties.stability_map import stability_map
from properties.transformer_identity import check_lie_is_transformer

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
