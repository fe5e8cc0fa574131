"""The step-size stability map: per method, weight scale and attention temperature, the
largest dt whose perturbation growth stays within a factor of the flow's, against the
linear prediction (docs/stability.md section 4).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from properties.claim_check import CheckVerdict
from properties.stability.linear_prediction import (
    linear_prediction,
    prediction_tableau,
    trajectory_samples,
)
from properties.stability.linearisation import perturbation_size
from properties.stability.lyapunov import final_growth
from properties.stability.stability_point import (
    Criterion,
    MeasuredBoundary,
    PointVerdict,
    StabilityPoint,
    judge,
)
from solvers import PiecewiseControls, Problem, backend
from solvers.backends import Backend
from solvers.errors import IntegrationError, InvalidInputError
from solvers.methods.stepping import SteppingMethod
from solvers.results.provenance import Provenance, timed
from solvers.solving import checked_method, resolve_method
from solvers.validation import positive_int, positive_number, positive_sweep

REFERENCE_AGREEMENT = 1e-4
"""Relative agreement of G(T) at two successive reference resolutions that makes it the
flow's growth (a factor criterion needs a few digits)."""


@dataclass(frozen=True)
class StabilityMap(Provenance):
    """Stability points over methods x weight scales x temperatures.

    `verdict` holds when at least one point is applicable and every applicable point
    agrees (within `tolerance`), fails when an applicable point disagrees, and is
    "not applicable" when no point is.
    """

    points: list[StabilityPoint]
    factor: float
    tolerance: float
    verdict: CheckVerdict | PointVerdict
    inputs: dict[str, Any]


def varied_problem(problem: Problem, scale: float, temperature: float) -> Problem:
    """`problem` with every layer's weights scaled by `scale` (LayerWeights.scaled) and its
    attention scale divided by `temperature` (both > 0; PiecewiseControls)."""
    if not isinstance(problem.controls, PiecewiseControls):
        raise InvalidInputError("stability maps need PiecewiseControls")
    scale = positive_number("scale", scale)
    temperature = positive_number("temperature", temperature)
    layers = [
        dataclasses.replace(layer.scaled(scale), scale=layer.attention_scale / temperature)
        for layer in problem.controls.layers
    ]
    return dataclasses.replace(problem, controls=PiecewiseControls(layers))


def _scan(
    growth_ratio: Callable[[int], float], factor: float, largest: int
) -> tuple[int | None, int | None, bool]:
    """Scan m = 1, 2, 4, ... up to `largest` (and `largest`), then bisect the last failure.

    Returns (stable m or None, unstable m or None, monotone).
    """
    grid = sorted({min(2**k, largest) for k in range(largest.bit_length() + 1)})
    passes = {m: growth_ratio(m) <= factor for m in grid}
    if not passes[largest]:
        return None, None, True
    failing = [m for m in grid if not passes[m]]
    if not failing:
        return 1, None, True
    low = failing[-1]
    monotone = all(not passes[m] for m in grid if m < low)
    high = grid[grid.index(low) + 1]
    while high - low > 1:
        middle = (low + high) // 2
        if growth_ratio(middle) <= factor:
            high = middle
        else:
            low = middle
    return high, low, monotone


def _converged_flow_growth(
    problem: Problem, method: SteppingMethod, steps: int, largest: int, bk: Backend, step: float
) -> tuple[float, int]:
    """G(T) of `method`, doubling its steps per unit from `steps` until two successive
    resolutions agree to REFERENCE_AGREEMENT (relative); (nan, steps) if none do by
    `largest`. An extrapolation step longer than the field's stiffness allows is unstable:
    the extrapolation refuses it (IntegrationError), which counts as no agreement."""

    def growth(m: int) -> float:
        try:
            return final_growth(problem, method, m, bk, step)[0]
        except IntegrationError:
            return math.nan

    previous = growth(steps)
    while 2 * steps <= largest:
        steps *= 2
        current = growth(steps)
        if math.isfinite(current) and abs(current - previous) <= REFERENCE_AGREEMENT * current:
            return current, steps
        previous = current
    return math.nan, steps


def _measure(
    problem: Problem,
    method: SteppingMethod,
    flow: tuple[float, int],
    criterion: Criterion,
    bk: Backend,
    step: float,
) -> MeasuredBoundary:
    """The scan of `method` against the flow's growth G(T) (flow = (G(T), its steps))."""
    flow_growth, steps = flow
    cache: dict[int, float] = {}

    def ratio(m: int) -> float:
        if m not in cache:
            cache[m] = final_growth(problem, method, m, bk, step)[0] / flow_growth
        return cache[m]

    if math.isfinite(flow_growth):
        stable, unstable, monotone = _scan(ratio, criterion.factor, criterion.largest)
    else:
        stable = unstable = None
        monotone = True
    return MeasuredBoundary(
        flow_growth, steps, dict(sorted(cache.items())), stable, unstable, monotone
    )


def _map_verdict(points: list[StabilityPoint]) -> CheckVerdict | PointVerdict:
    applicable = [p for p in points if p.applies]
    if not applicable:
        return PointVerdict.NOT_APPLICABLE
    if all(p.verdict == PointVerdict.AGREES for p in applicable):
        return CheckVerdict.HOLDS
    return CheckVerdict.FAILS


@timed
def stability_map(
    problem: Problem,
    methods: Sequence[str | SteppingMethod] = ("lie",),
    *,
    scales: Sequence[float] = (1.0, 2.0),
    temperatures: Sequence[float] = (0.5, 1.0, 2.0),
    factor: float = 2.0,
    max_steps_per_unit: int = 128,
    reference: str | SteppingMethod = "extrapolation",
    reference_steps_per_unit: int = 4,
    max_reference_steps_per_unit: int = 256,
    samples_per_unit: int = 4,
    precision: str | Backend = "float64",
    relative_step: float | None = None,
    tolerance: float = 0.2,
) -> StabilityMap:
    """The largest stable dt per (method, weight scale, temperature) against the linear
    prediction.

    For each scale and temperature the problem's layers are scaled and their attention
    temperature set (`varied_problem`); G(T) is the `reference` method's growth
    sigma_max(D Phi_T), its steps per unit doubled from `reference_steps_per_unit` until
    converged; each method passes at m when G_m(T) <= factor G(T), scanned over m = 1, 2,
    4, ... up to max_steps_per_unit and bisected (docs/stability.md section 4). Domain:
    PiecewiseControls; scales and temperatures > 0 and finite (non-empty sweeps);
    factor > 1; max_steps_per_unit >= 2. Float64 by default: a factor-2 criterion needs a
    few digits, which float64 Jacobians give many times over.
    """
    if isinstance(methods, str | SteppingMethod):
        methods = (methods,)
    steppings = [resolve_method(m) for m in methods]
    if not steppings:
        raise InvalidInputError("methods must name at least one method, got an empty sweep")
    flow_method = resolve_method(reference)
    for stepping in (*steppings, flow_method):
        checked_method(problem, stepping)
    if not isinstance(problem.controls, PiecewiseControls):
        raise InvalidInputError("stability maps need PiecewiseControls")
    scale_values = positive_sweep("scales", scales)
    temperature_values = positive_sweep("temperatures", temperatures)
    factor = positive_number("factor", factor)
    if factor <= 1:
        raise InvalidInputError(f"factor must be > 1, got {factor!r}")
    largest = positive_int("max_steps_per_unit", max_steps_per_unit)
    if largest < 2:
        raise InvalidInputError(f"max_steps_per_unit must be >= 2, got {largest}")
    reference_steps = positive_int("reference_steps_per_unit", reference_steps_per_unit)
    reference_cap = positive_int("max_reference_steps_per_unit", max_reference_steps_per_unit)
    per_unit = positive_int("samples_per_unit", samples_per_unit)
    tolerance = positive_number("tolerance", tolerance)
    bk = backend(precision)
    step = perturbation_size(bk, relative_step)
    criterion = Criterion(factor, problem.t_final, tolerance, largest)

    points = []
    for scale in scale_values:
        for temperature in temperature_values:
            varied = varied_problem(problem, float(scale), float(temperature))
            flow = _converged_flow_growth(
                varied, flow_method, reference_steps, reference_cap, bk, step
            )
            samples = None
            for stepping in steppings:
                tableau = prediction_tableau(stepping)
                prediction = None
                if tableau is not None and math.isfinite(flow[0]):
                    if samples is None:
                        samples = trajectory_samples(varied, flow_method, flow[1], per_unit, bk)
                    prediction = linear_prediction(*samples, tableau, step)
                measured = _measure(varied, stepping, flow, criterion, bk, step)
                points.append(
                    judge(
                        stepping.name,
                        stepping.order(varied.norm),
                        float(scale),
                        float(temperature),
                        measured,
                        prediction,
                        criterion,
                    )
                )
    return StabilityMap(
        points=points,
        factor=factor,
        tolerance=tolerance,
        verdict=_map_verdict(points),
        inputs={
            "methods": [s.name for s in steppings],
            "norm": problem.norm,
            "shape": list(problem.u0.shape),
            "t_final": problem.t_final,
            "scales": scale_values.tolist(),
            "temperatures": temperature_values.tolist(),
            "max_steps_per_unit": largest,
            "reference": flow_method.name,
            "reference_steps_per_unit": reference_steps,
            "max_reference_steps_per_unit": reference_cap,
            "samples_per_unit": per_unit,
            "precision": repr(bk),
            "relative_step": step,
        },
    )
