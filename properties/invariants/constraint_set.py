"""The post-LN flow stays on its constraint set S1 at every layer boundary, as a claim
check within the projection's rounding, 8 (2 + kappa + log2 d) u (docs/rounding.md
section 3), kappa the worst conditioning of a row the solve projected."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from properties.claim_check import ClaimCheck, largest_magnitude
from properties.conditioning.rounding_bounds import ProjectionRecordingFlow
from solvers import Problem, backend, solve_layers
from solvers.backends import Backend
from solvers.errors import InvalidInputError
from solvers.methods.driver import integrate
from solvers.methods.stepping import SteppingMethod
from solvers.results.allowances import projection_allowance
from solvers.solving import resolve_method
from solvers.validation import positive_int


def check_flow_stays_on_s1(
    problem: Problem,
    method: str | SteppingMethod = "lie",
    steps_per_unit: int = 1,
    *,
    precision: str | Backend = "float64",
) -> ClaimCheck:
    """Every row of every post-LN layer-boundary state u(n), n >= 1, lies on S1(sigma1, sigma2).

    S1 = {rows with mean sigma1 and variance sigma2^2} (w^y-weighted with feature
    weights), (sigma2, sigma1) the gain and bias of the norm that ends layer n (norm2; the
    non-Lie methods need norm1 = norm2). Domain: problems with norm "post" and scalar
    gains. With eps > 0 the set is not S1 and the check fails by the measured amount.
    Defect max over boundaries and rows of max(|mean - sigma1|, |std - sigma2|) / size,
    size = |sigma1| + sigma2 sqrt(d); tolerance 8 (2 + kappa + log2 d) u, kappa the largest
    conditioning of a row the solve projected (replayed in float64).
    """
    if not isinstance(problem, Problem):
        raise InvalidInputError(f"problem must be a Problem, got {type(problem).__name__}")
    if not problem.norm.constrained:
        raise InvalidInputError(
            f"the flow stays on S1 only with post-LN; problem.norm is {problem.norm!r}"
        )
    bk = backend(precision)
    states = solve_layers(problem, method, steps_per_unit, bk)
    stepping = resolve_method(method)
    steps = positive_int("steps_per_unit", steps_per_unit)
    conditioning = _replay_conditioning(problem, stepping, steps)
    d = problem.controls.d_model
    t_final = Fraction(problem.t_final)
    worst, eps = 0.0, 0.0
    bk64 = backend("float64")
    with bk.active():
        weights = problem.feature_weights
        if weights is not None:
            weights = bk.asarray(weights)
            weights = weights / bk.sum(weights, -1)
        for n in range(1, len(states)):
            end = min(t_final, n)
            layer64 = problem.controls.layer_on(bk64, n - 1, bk64.asarray(end))
            gain, bias = (float(np.asarray(x)) if np.ndim(x) == 0 else None for x in layer64.norm2)
            if gain is None or bias is None:
                raise InvalidInputError(
                    f"layer {n - 1} has a per-feature norm2 gain or bias: S1 is not defined"
                )
            eps = max(eps, float(layer64.eps))
            size = abs(bias) + gain * math.sqrt(d)
            state = bk.asarray(states[n])
            mean, variance = bk.moments(state, weights)
            off = max(
                largest_magnitude(bk, mean - bk.asarray(bias)),
                largest_magnitude(bk, bk.sqrt(variance) - bk.asarray(gain)),
            )
            worst = max(worst, off / size)
    return ClaimCheck(
        "the post-LN flow stays on S1",
        {
            "precision": repr(bk),
            "method": stepping.name,
            "steps_per_unit": steps,
            "shape": list(problem.u0.shape),
            "layers": len(states) - 1,
            "eps": eps,
            "conditioning": conditioning,
        },
        worst,
        projection_allowance(bk.unit_roundoff, conditioning, d),
        "max over boundaries and rows of |mean - sigma1|, |std - sigma2|, / size of S1",
    )


def _replay_conditioning(problem: Problem, method: SteppingMethod, steps_per_unit: int) -> float:
    """The largest kappa of any row projected while solving `problem` (replayed in float64)."""
    bk64 = backend("float64")
    flow = ProjectionRecordingFlow.from_problem(problem, bk64)
    with bk64.active():
        integrate(problem, method, steps_per_unit, flow)
    return flow.conditioning
