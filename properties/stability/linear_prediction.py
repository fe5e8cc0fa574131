"""The linear-stability prediction of the largest stable step: the absolute-stability
boundary of a method's stability function on the spectrum of the field's Jacobian,
frozen at states sampled along the trajectory (docs/stability.md section 3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from solvers import Problem
from solvers.backends import Array, Backend
from solvers.equation.flow import LayerFlow
from solvers.equation.jacobian import jacobian
from solvers.equation.norms import tangent_projection
from solvers.integrators.tableaux import EULER, Tableau, ray_boundary, stability_function
from solvers.methods.driver import layer_lengths
from solvers.methods.splitting import LIE
from solvers.methods.stepping import Span, SteppingMethod
from solvers.methods.unsplit import Unsplit

NOISE_FACTOR = 100.0
"""Eigenvalues with Re > -NOISE_FACTOR u_r^(2/3) rho count as not damped (rho the
spectral radius; u_r^(2/3) the central-difference Jacobian's relative accuracy)."""

Sample = tuple[int, Fraction, Array]
"""(layer n, time t, state u) on a trajectory."""


def prediction_tableau(method: SteppingMethod) -> Tableau | None:
    """The tableau whose stability function the method has on the whole field: the Lie
    scheme read as explicit Euler on A + F (its splitting error O(dt^2 J_F J_A) ignored),
    an unsplit method's own; None for Strang splittings and the reference."""
    if method is LIE:
        return EULER
    if isinstance(method, Unsplit):
        return method.tableau
    return None


def trajectory_samples(
    problem: Problem, method: SteppingMethod, steps_per_unit: int, per_unit: int, bk: Backend
) -> tuple[LayerFlow, list[Sample]]:
    """States (n, t, u) of `method` at `per_unit` equally spaced times per layer and at T:
    each piece of a layer is stepped with ceil(piece * steps_per_unit) steps."""
    samples = []
    with bk.active(), np.errstate(over="ignore", invalid="ignore"):
        flow = LayerFlow.from_problem(problem, bk)
        lengths = layer_lengths(problem.t_final)
        u = problem.initial_state(bk)
        for n, length in enumerate(lengths):
            u = method.enter(flow, n, u)
            pieces = math.ceil(length * per_unit)
            piece = length / pieces
            for j in range(pieces):
                t = n + j * piece
                samples.append((n, t, u))
                span = Span(n, bk.asarray(t), bk.asarray(piece), math.ceil(piece * steps_per_unit))
                u = method.advance(flow, span, u)
        samples.append((len(lengths) - 1, Fraction(problem.t_final), u))
    return flow, samples


def field_spectrum(flow: LayerFlow, n: int, t: Fraction, u: Array, step: float) -> np.ndarray:
    """Eigenvalues of the field's Jacobian at (t, u) (central differences of step `step`);
    on the tangent space of S1 for post-LN."""
    bk = flow.bk
    with bk.active(), np.errstate(over="ignore", invalid="ignore"):
        time_point = bk.asarray(t)

        def field_of(batch: Array) -> Array:
            return flow.field(n, time_point, batch)

        matrix = bk.to_float64(jacobian(bk, field_of, u, step))
        if not flow.norm.constrained:
            return np.linalg.eigvals(matrix)
        size = matrix.shape[0]
        unit = bk.asarray(np.eye(size).reshape(size, *u.shape))
        projector = bk.to_float64(
            tangent_projection(bk, u, unit, flow.feature_weights).reshape(size, -1).T
        )
    left, values, _ = np.linalg.svd(projector)
    basis = left[:, values > 0.5]  # the range of Pi_T: the tangent space
    restricted, *_ = np.linalg.lstsq(basis, projector @ matrix @ basis, rcond=None)
    return np.linalg.eigvals(restricted)


@dataclass(frozen=True)
class LinearPrediction:
    """The absolute-stability boundary of the frozen linearisation along the trajectory.

    `predicted_dt` = min over samples and damped eigenvalues of dt*(lambda) = r* / |lambda|;
    `eigenvalue` the limiting one (real, imaginary) at `time`; `angle` its angle from the
    negative real axis in degrees; `spread` max / min of the per-sample dt*; `ray_root`
    r* and `ray_slope` g' = d|R|/dr at r*; `spectral_radius` the largest |lambda| seen.
    """

    predicted_dt: float
    eigenvalue: tuple[float, float]
    time: float
    angle: float
    spread: float
    ray_root: float
    ray_slope: float
    spectral_radius: float
    per_sample_dt: list[float]


def linear_prediction(
    flow: LayerFlow,
    samples: Sequence[Sample],
    tableau: Tableau,
    step: float,
) -> LinearPrediction:
    """The frozen-coefficient stability boundary of `tableau` over the sampled states;
    eigenvalues with Re >= -NOISE_FACTOR u_r^(2/3) rho are not counted as damped."""
    coefficients = stability_function(tableau)
    noise = NOISE_FACTOR * flow.bk.unit_roundoff ** (2 / 3)
    best = (math.inf, 0j, 0.0, math.inf, math.nan)
    per_sample, radius = [], 0.0
    for n, t, u in samples:
        spectrum = field_spectrum(flow, n, t, u, step)
        rho = float(np.max(np.abs(spectrum)))
        radius = max(radius, rho)
        sample_best = math.inf
        for value in spectrum[spectrum.real < -noise * rho]:
            root, slope = ray_boundary(coefficients, float(np.angle(value)))
            dt = root / abs(value)
            sample_best = min(sample_best, dt)
            if dt < best[0]:
                best = (dt, complex(value), float(t), root, slope)
        per_sample.append(sample_best)
    dt, value, when, root, slope = best
    finite = [x for x in per_sample if math.isfinite(x)]
    spread = max(finite) / min(finite) if finite and min(finite) > 0 else math.inf
    angle = math.degrees(abs(math.pi - abs(np.angle(value)))) if math.isfinite(dt) else math.nan
    return LinearPrediction(
        predicted_dt=dt,
        eigenvalue=(value.real, value.imag),
        time=when,
        angle=angle,
        spread=spread,
        ray_root=root,
        ray_slope=slope,
        spectral_radius=radius,
        per_sample_dt=per_sample,
    )
