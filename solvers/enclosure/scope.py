"""What an enclosure can prove (docs/enclosures.md section 5): flows whose field is smooth
(analytic) in the state on each layer, so that the Taylor remainder exists."""

from __future__ import annotations

from solvers.equation.problem import Problem
from solvers.errors import OutOfScopeError


def check_scope(problem: Problem) -> None:
    """Refuse, with the reason, a problem whose flow the Taylor method cannot enclose:
    ReLU (its field has kinks where a pre-activation crosses 0, events the method does not
    locate), post-LN (a flow on the constraint set, whose projection the Taylor series
    would have to follow) and manufactured forcing (a test device, not a network's flow)."""
    if problem.manufactured is not None:
        raise OutOfScopeError(
            "enclosures take the flow of a network; a manufactured solution's forcing is "
            "not supported (docs/enclosures.md section 5)"
        )
    if problem.norm.constrained:
        raise OutOfScopeError(
            "post-LN flows live on the layer norm's constraint set and are not enclosed yet; "
            "pre-LN, pre-RMSNorm and flows without a norm are (docs/enclosures.md section 5)"
        )
    for n, layer in enumerate(problem.controls.all_layers()):
        if layer.activation == "relu":
            raise OutOfScopeError(
                f"layer {n} uses ReLU, whose field is not smooth where a pre-activation "
                "crosses 0; enclosures take GELU, GELU-tanh and SiLU (docs/enclosures.md "
                "section 5)"
            )
