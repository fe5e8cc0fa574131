"""Continuous dependence measured: difference quotients of u0 -> u(T) and theta -> u(T).

`continuous_dependence` solves the problem perturbed along unit directions and checks the
largest quotient against its Gronwall bound (properties.well_posedness.gronwall), and
that the quotients converged in the step (docs/well-posedness.md section 4).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import properties.well_posedness.perturbations as perturbations
from properties.claim_check import CheckVerdict, ClaimCheck
from properties.well_posedness.gronwall import GronwallBound, checked_problem, gronwall_bound
from properties.well_posedness.perturbations import PERTURBED_ARRAYS, ControlDirection
from solvers import Problem, backend, solve
from solvers.backends import Backend
from solvers.errors import InvalidInputError
from solvers.methods.driver import layer_lengths
from solvers.methods.stepping import SteppingMethod
from solvers.results.allowances import solve_allowance
from solvers.results.provenance import Provenance, timed
from solvers.solving import METHODS
from solvers.validation import choice, positive_int, positive_sweep

DEFAULT_RELATIVE_STEPS = (1e-4, 1e-5, 1e-6)
QUOTIENT_AGREEMENT = 1e-2
"""Relative agreement of the difference quotients at the two finest steps."""


@dataclass(frozen=True)
class LipschitzEstimate:
    """Difference quotients of one map (initial data or controls) against its bound.

    quotients[i][j] is |u(T; x + a_i D_j) - u(T; x)| / a_i for step a_i = relative_steps[i]
    |x|; `measured` their maximum; `ratio` = measured / bound; `quotient_change` the largest
    change of a direction's quotient between the two finest steps, relative to `measured`
    (nan with one step). `checks`: measured <= bound, and the quotients converged.
    """

    map: str
    relative_steps: list[float]
    step_sizes: list[float]
    quotients: list[list[float]]
    measured: float
    bound: float
    ratio: float
    quotient_change: float
    checks: list[ClaimCheck]
    verdict: CheckVerdict


@dataclass(frozen=True)
class ContinuousDependence(Provenance):
    """Measured Lipschitz constants of u0 -> u(T) (theta fixed) and theta -> u(T) (u0 fixed),
    and their bounds: `initial_bound` on the ball of the largest initial-data step,
    `control_bound` on the ball of the largest weight step."""

    initial: LipschitzEstimate
    controls: LipschitzEstimate
    initial_bound: GronwallBound
    control_bound: GronwallBound
    verdict: CheckVerdict
    inputs: dict[str, Any]


def _distance(a: np.ndarray, b: np.ndarray) -> float:
    """|a - b| (Frobenius), the difference taken in the arrays' own number system."""
    return float(np.linalg.norm(np.asarray(a - b, dtype=np.float64)))


def _all_hold(checks: Sequence[ClaimCheck | LipschitzEstimate]) -> CheckVerdict:
    holds = all(c.verdict == CheckVerdict.HOLDS for c in checks)
    return CheckVerdict.HOLDS if holds else CheckVerdict.FAILS


def _estimate(
    name: str,
    relative: list[float],
    sizes: list[float],
    quotients: np.ndarray,
    bound: float,
    allowance: float,
    configuration: dict[str, Any],
) -> LipschitzEstimate:
    """The estimate and its two checks; `allowance` is the rounding of one solve."""
    measured = float(np.max(quotients))
    ratio = measured / bound if bound > 0 else math.inf
    if len(relative) >= 2:  # relative to the measured constant: a direction in the kernel
        change = float(np.max(np.abs(quotients[-1] - quotients[-2])))  # has q ~ rounding / a
        change /= max(measured, np.finfo(float).tiny)
    else:
        change = math.nan
    rounding = 2 * allowance / min(sizes)
    checks = [
        ClaimCheck(
            claim=f"Lipschitz constant of the {name} map <= Gronwall bound",
            configuration=configuration,
            defect=max(0.0, ratio - 1) if math.isfinite(bound) else 0.0,
            tolerance=rounding / bound if bound > 0 else math.inf,
            note=f"measured {measured:.6g}, bound {bound:.6g}, ratio {ratio:.3g}",
        )
    ]
    if math.isfinite(change):
        checks.append(
            ClaimCheck(
                claim=f"difference quotients of the {name} map converged in the step",
                configuration=configuration,
                defect=change,
                tolerance=QUOTIENT_AGREEMENT + rounding / max(measured, np.finfo(float).tiny),
                note=f"relative change between steps {relative[-2]:g} and {relative[-1]:g}",
            )
        )
    return LipschitzEstimate(
        map=name,
        relative_steps=relative,
        step_sizes=sizes,
        quotients=quotients.tolist(),
        measured=measured,
        bound=bound,
        ratio=ratio,
        quotient_change=change,
        checks=checks,
        verdict=_all_hold(checks),
    )


@timed
def continuous_dependence(
    problem: Problem,
    *,
    directions: int = 3,
    relative_steps: Sequence[float] = DEFAULT_RELATIVE_STEPS,
    method: str | SteppingMethod = "projected-rk4",
    steps_per_unit: int = 32,
    precision: str | Backend = "float64",
    seed: int = 0,
    arrays: Sequence[str] = PERTURBED_ARRAYS,
    initial_directions: Sequence[np.ndarray] | None = None,
    control_directions: Sequence[ControlDirection] | None = None,
) -> ContinuousDependence:
    """Measured Lipschitz constants of u0 -> u(T) and theta -> u(T) against their Gronwall
    bounds (docs/well-posedness.md section 4), T = problem.t_final.

    `directions` random unit directions per map (Gaussian, default_rng(seed)), unless
    `initial_directions` (arrays of u0's shape) or `control_directions` (per layer, a
    mapping from weight names to changes) are given. The weights in `arrays` are perturbed
    (default: every map and bias). Step sizes a = h |u0| and h |theta| for h in
    `relative_steps` (> 0); the bounds hold on the balls of the largest a. Solves use
    `method` with `steps_per_unit` in `precision`; a method that is not the flow's (the
    Lie scheme of post-LN) measures its own map, not the flow's. Raises InvalidInputError
    for a step or count that is not positive, an empty list of directions or arrays, and
    non-finite weights or directions.
    """
    problem = checked_problem(problem)
    count = positive_int("directions", directions)
    relative = sorted(positive_sweep("relative_steps", relative_steps).tolist(), reverse=True)
    steps_per_unit = positive_int("steps_per_unit", steps_per_unit)
    method_name = method.name if isinstance(method, SteppingMethod) else method
    if not isinstance(method, SteppingMethod):
        choice("method", method, tuple(METHODS))
    names = tuple(arrays)
    if not names:
        raise InvalidInputError("arrays must name at least one weight to perturb, got none")
    for name in names:
        choice("perturbed array", name, PERTURBED_ARRAYS)
    bk = backend(precision)
    rng = np.random.default_rng(seed)
    layers = problem.controls.layers
    initial = perturbations.initial_directions(initial_directions, count, problem.u0.shape, rng)
    control = perturbations.control_directions(control_directions, count, layers, names, rng)

    initial_sizes = [h * float(np.linalg.norm(problem.u0)) for h in relative]
    theta_size = perturbations.weights_size(layers, names)
    if not theta_size > 0:
        raise InvalidInputError(f"the perturbed weights {list(names)} are all zero: no scale")
    control_sizes = [h * theta_size for h in relative]
    initial_bound = gronwall_bound(problem, initial_radius=max(initial_sizes))
    control_bound = gronwall_bound(problem, control_radius=max(control_sizes))

    def solved(**changes: Any) -> np.ndarray:
        return solve(dataclasses.replace(problem, **changes), method, steps_per_unit, bk)

    batch = [problem.u0] + [problem.u0 + a * x for a in initial_sizes for x in initial]
    states = solved(u0=np.stack(batch))
    base = solve(problem, method, steps_per_unit, bk)
    initial_quotients = np.array(
        [
            [
                _distance(states[1 + i * len(initial) + j], states[0]) / a
                for j in range(len(initial))
            ]
            for i, a in enumerate(initial_sizes)
        ]
    )

    def control_quotient(a: float, direction: list[dict[str, np.ndarray]]) -> float:
        moved = perturbations.perturbed_controls(problem.controls, direction, a)
        return _distance(solved(controls=moved), base) / a

    control_quotients = np.array([[control_quotient(a, d) for d in control] for a in control_sizes])
    steps = sum(math.ceil(length * steps_per_unit) for length in layer_lengths(problem.t_final))
    size = float(np.linalg.norm(np.asarray(base, dtype=np.float64)))
    allowance = solve_allowance(bk.unit_roundoff, steps, size)
    configuration = {
        "norm": problem.norm,
        "tokens": problem.tokens,
        "d": problem.controls.d_model,
        "t_final": problem.t_final,
    }
    initial_estimate = _estimate(
        "initial-data",
        relative,
        initial_sizes,
        initial_quotients,
        initial_bound.initial_data,
        allowance,
        configuration,
    )
    control_estimate = _estimate(
        "controls",
        relative,
        control_sizes,
        control_quotients,
        control_bound.controls,
        allowance,
        configuration,
    )
    return ContinuousDependence(
        initial=initial_estimate,
        controls=control_estimate,
        initial_bound=initial_bound,
        control_bound=control_bound,
        verdict=_all_hold([initial_estimate, control_estimate]),
        inputs={
            **configuration,
            "heads": layers[0].heads,
            "layers": len(layers),
            "causal": bool(problem.causal),
            "method": method_name,
            "steps_per_unit": steps_per_unit,
            "precision": repr(bk),
            "seed": seed,
            "directions": len(initial),
            "control_directions": len(control),
            "arrays": list(names),
            "initial_size": float(np.linalg.norm(problem.u0)),
            "weights_size": theta_size,
        },
    )
