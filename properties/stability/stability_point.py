"""One point of a step-size stability map: the measured boundary of a method against the
linear prediction, and whether the comparison applies there (docs/stability.md section 4).

The measured boundary is where the perturbation growth passes a factor of the flow's,
which sits at the absolute-stability boundary only under the conditions `judge` checks;
each condition that fails is reported as a reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from properties.stability.linear_prediction import LinearPrediction

OFFSET_LIMIT = 0.1
"""Largest |expected_offset| (relative shift of the growth-criterion boundary from the
absolute-stability boundary) at which the linear prediction is compared."""


class PointVerdict(StrEnum):
    """Whether a point's measured boundary agrees with the linear prediction."""

    AGREES = "agrees"
    DISAGREES = "disagrees"
    NOT_APPLICABLE = "not applicable"


@dataclass(frozen=True)
class StabilityPoint:
    """One (method, weight scale, temperature): measured and predicted dt boundaries.

    `flow_growth` G(T) of the reference at `reference_steps_per_unit` (the first of the
    doubled resolutions that agrees with the previous one to
    properties.stability.stability_map.REFERENCE_AGREEMENT); `scan`
    maps each tried m to G_m(T) / G(T) (inf: overflow). `stable_dt` = 1/m, the largest
    dt passing with every finer scanned dt (None if even the finest fails);
    `unstable_dt` = 1/(m - 1), its failing neighbour (None if dt = 1 passes: no
    instability in the scanned range); `measured_dt` their midpoint. `prediction` as in
    LinearPrediction (None without a stability function); `expected_offset`
    log(factor G(T)) dt* / (T r* g'); `relative_disagreement` (measured - predicted) /
    predicted; `accuracy_error` the growth error at the finest dt carried to the measured
    one at the method's order. `applies` when `reasons` (the failed conditions) is empty;
    `verdict` agrees when it applies and |relative_disagreement| <= the tolerance.
    """

    method: str
    scale: float
    temperature: float
    flow_growth: float
    reference_steps_per_unit: int
    scan: dict[int, float]
    stable_dt: float | None
    unstable_dt: float | None
    measured_dt: float | None
    prediction: LinearPrediction | None
    expected_offset: float | None
    relative_disagreement: float | None
    accuracy_error: float | None
    applies: bool
    reasons: list[str]
    verdict: PointVerdict


@dataclass(frozen=True)
class MeasuredBoundary:
    """What a scan measured: the flow's growth, the reference steps it took, G_m / G per
    scanned m, the bracketing stable and unstable m (None: not found), monotonicity."""

    flow_growth: float
    reference_steps: int
    scan: dict[int, float]
    stable: int | None
    unstable: int | None
    monotone: bool


@dataclass(frozen=True)
class Criterion:
    """The map's settings a point is judged by."""

    factor: float
    t_final: float
    tolerance: float
    largest: int


def _measured_reasons(
    measured: MeasuredBoundary, order: int, criterion: Criterion
) -> tuple[float | None, float | None, list[str]]:
    """(measured_dt, accuracy_error, reasons): whether the scan found a boundary that
    stability, not accuracy, sets."""
    reasons = []
    stable, unstable, largest = measured.stable, measured.unstable, criterion.largest
    measured_dt = None
    if not math.isfinite(measured.flow_growth):
        reasons.append(
            "the reference did not converge (two successive resolutions never agreed): "
            "no flow growth to compare with"
        )
    elif stable is None:
        reasons.append(f"no instability boundary: unstable at every scanned dt down to 1/{largest}")
    elif unstable is None:
        reasons.append("no instability in the scanned range: dt = 1 already passes")
    else:
        measured_dt = (1.0 / stable + 1.0 / unstable) / 2
    if not measured.monotone:
        reasons.append("the scan is not monotone: a coarser dt passes before a finer one fails")
    accuracy = None
    if measured_dt is not None:
        finest = measured.scan[largest]
        accuracy = abs(finest - 1) * (largest / stable) ** order
        if accuracy > (criterion.factor - 1) / 2:
            reasons.append(
                f"accuracy, not stability, sets the measured boundary: the growth error at "
                f"dt = 1/{largest} ({finest - 1:+.3g}), carried to dt = 1/{stable} at order "
                f"{order}, is {accuracy:.3g} > (factor - 1) / 2"
            )
    return measured_dt, accuracy, reasons


def _has_boundary(prediction: LinearPrediction | None) -> bool:
    """Whether the prediction is a step size dt* > 0 to compare with."""
    return (
        prediction is not None
        and math.isfinite(prediction.predicted_dt)
        and prediction.predicted_dt != 0
    )


def _prediction_reasons(
    prediction: LinearPrediction | None, flow_growth: float, criterion: Criterion
) -> tuple[float | None, list[str]]:
    """(expected_offset, reasons): whether the frozen linearisation predicts a boundary
    the growth criterion can be expected to sit at."""
    reasons = []
    offset = None
    if prediction is None:
        if math.isfinite(flow_growth):
            reasons.append("the method has no single stability function: no linear prediction")
    elif not math.isfinite(prediction.predicted_dt):
        reasons.append("no damped eigenvalue: the linearisation predicts no boundary")
    elif prediction.predicted_dt == 0:
        reasons.append(
            f"the limiting eigenvalue {complex(*prediction.eigenvalue):.3g} lies on a ray "
            "that leaves the stability region at once: the prediction is dt = 0"
        )
    else:
        if prediction.ray_slope > 0:
            offset = (
                math.log(criterion.factor * flow_growth)
                * prediction.predicted_dt
                / (criterion.t_final * prediction.ray_root * prediction.ray_slope)
            )
        if offset is None or abs(offset) > OFFSET_LIMIT:
            shift = "an unknown distance" if offset is None else f"{offset:+.0%}"
            reasons.append(
                f"the limiting eigenvalue {complex(*prediction.eigenvalue):.3g} "
                f"({prediction.angle:.0f} deg from the negative real axis) damps too slowly "
                f"for the horizon: the growth criterion sits {shift} from the "
                "absolute-stability boundary"
            )
        if not prediction.spread <= 1 + criterion.tolerance:
            reasons.append(
                f"the frozen prediction changes along the trajectory by more than the "
                f"tolerance (max/min dt* = {prediction.spread:.3g} > 1 + "
                f"{criterion.tolerance:g}): the field is far from linear over the horizon"
            )
    return offset, reasons


def judge(
    method: str,
    order: int,
    scale: float,
    temperature: float,
    measured: MeasuredBoundary,
    prediction: LinearPrediction | None,
    criterion: Criterion,
) -> StabilityPoint:
    """The point of `method` (of order `order`) at (scale, temperature): its measured
    boundary against the prediction, with the reasons the comparison does not apply."""
    measured_dt, accuracy, reasons = _measured_reasons(measured, order, criterion)
    offset, prediction_reasons = _prediction_reasons(prediction, measured.flow_growth, criterion)
    reasons += prediction_reasons
    disagreement = None
    if measured_dt is not None and _has_boundary(prediction):
        dt_star = prediction.predicted_dt
        disagreement = (measured_dt - dt_star) / dt_star
    applies = not reasons
    if applies:
        verdict = (
            PointVerdict.AGREES
            if abs(disagreement) <= criterion.tolerance
            else PointVerdict.DISAGREES
        )
    else:
        verdict = PointVerdict.NOT_APPLICABLE
    return StabilityPoint(
        method=method,
        scale=scale,
        temperature=temperature,
        flow_growth=measured.flow_growth,
        reference_steps_per_unit=measured.reference_steps,
        scan=measured.scan,
        stable_dt=None if measured.stable is None else 1.0 / measured.stable,
        unstable_dt=None if measured.unstable is None else 1.0 / measured.unstable,
        measured_dt=measured_dt,
        prediction=prediction,
        expected_offset=offset,
        relative_disagreement=disagreement,
        accuracy_error=accuracy,
        applies=applies,
        reasons=reasons,
        verdict=verdict,
    )
