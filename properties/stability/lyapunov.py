"""Perturbation growth over depth and finite-time Lyapunov exponents of a stepping method,
and the claim that the scheme's FTLE tends to the flow's as dt -> 0 (docs/stability.md
section 2).

Amplification of layer n is sigma_max(J_n), the growth G(t) = sigma_max(D Phi_t) with
D Phi_t = J_{n-1} ... J_0 at the boundary t = t_n, and the FTLE log G(t) / t.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from properties.claim_check import CheckVerdict
from properties.stability.linearisation import (
    Linearisation,
    largest_singular_value,
    linearise,
    perturbation_size,
    working_backend,
)
from solvers import Problem
from solvers.backends import Array, Backend
from solvers.errors import InvalidInputError, NumericalBreakdownError
from solvers.methods.stepping import SteppingMethod
from solvers.results.line_fit import Fit, fit_line
from solvers.results.provenance import Provenance, timed
from solvers.results.records import to_json
from solvers.solving import checked_method
from solvers.validation import positive_int


@dataclass(frozen=True)
class PerturbationGrowth(Provenance):
    """Per-layer amplification sigma_max(J_n), growth sigma_max(D Phi_t) and FTLE at each
    layer boundary t (`times`) for one method, step count and precision.

    Floats for use; `*_digits` hold the same figures as decimal strings at the working
    precision. `jacobian_error` is the Richardson estimate of the relative truncation
    error of layer 0's Jacobian (properties.stability.linearisation.Linearisation).
    """

    method: str
    steps_per_unit: int
    times: list[float]
    amplification: list[float]
    growth: list[float]
    ftle: list[float]
    amplification_digits: list[str]
    growth_digits: list[str]
    ftle_digits: list[str]
    jacobian_error: float
    inputs: dict[str, Any]


def _flow_map_jacobians(bk: Backend, linearisation: Linearisation) -> Iterator[Array]:
    """D Phi_{t_n} = J_{n-1} ... J_0 at each layer boundary in turn (bk active)."""
    product = None
    for jacobian in linearisation.jacobians:
        product = jacobian if product is None else bk.matmul(jacobian, product)
        yield product


def _growth_figures(bk: Backend, linearisation: Linearisation) -> tuple[list, list, list]:
    """(amplification, growth, ftle) per layer as backend scalars."""
    amplification, growth, ftle = [], [], []
    with bk.active():
        products = _flow_map_jacobians(bk, linearisation)
        for jacobian, product, t in zip(
            linearisation.jacobians, products, linearisation.times, strict=True
        ):
            amplification.append(largest_singular_value(bk, jacobian))
            sigma = largest_singular_value(bk, product)
            growth.append(sigma)
            ftle.append(bk.log(sigma) / bk.asarray(t))
    return amplification, growth, ftle


def _problem_inputs(problem: Problem, bk: Backend, relative: float) -> dict[str, Any]:
    return {
        "norm": problem.norm,
        "shape": list(problem.u0.shape),
        "t_final": problem.t_final,
        "precision": repr(bk),
        "relative_step": relative,
    }


@timed
def perturbation_growth(
    problem: Problem,
    method: str | SteppingMethod = "lie",
    steps_per_unit: int = 1,
    *,
    precision: str | Backend | None = None,
    relative_step: float | None = None,
) -> PerturbationGrowth:
    """Amplification sigma_max(J_n) of each layer map, growth G(t) = sigma_max(D Phi_t) and
    FTLE lambda(t) = log G(t) / t at each layer boundary t of `problem`.

    Domain: any Problem and method of solvers.solving.METHODS; steps_per_unit >= 1;
    relative_step > 0 (default u_r^(1/3)). precision None means mpmath with 40 digits.
    Cost: 2 N d + 1 batched evaluations of each layer map (plus 2 N d for the truncation
    check of layer 0).
    """
    stepping = checked_method(problem, method)
    steps_per_unit = positive_int("steps_per_unit", steps_per_unit)
    bk = working_backend(precision)
    step = perturbation_size(bk, relative_step)
    linearisation = linearise(problem, stepping, steps_per_unit, bk, step, check_truncation=True)
    amplification, growth, ftle = _growth_figures(bk, linearisation)

    def floats(values: list) -> list[float]:
        return [float(bk.to_float64(v)[0]) for v in values]

    def strings(values: list) -> list[str]:
        return [str(bk.to_strings(v)[0]) for v in values]

    return PerturbationGrowth(
        method=stepping.name,
        steps_per_unit=steps_per_unit,
        times=[float(t) for t in linearisation.times],
        amplification=floats(amplification),
        growth=floats(growth),
        ftle=floats(ftle),
        amplification_digits=strings(amplification),
        growth_digits=strings(growth),
        ftle_digits=strings(ftle),
        jacobian_error=float(linearisation.jacobian_error),
        inputs=_problem_inputs(problem, bk, step),
    )


def final_growth(
    problem: Problem, method: SteppingMethod, steps_per_unit: int, bk: Backend, relative: float
) -> tuple[float, float, Linearisation | None]:
    """(G(T), FTLE(T), the linearisation) of one method; (inf, inf, None) on overflow."""
    try:
        linearisation = linearise(problem, method, steps_per_unit, bk, relative)
    except NumericalBreakdownError:
        return math.inf, math.inf, None
    with bk.active():
        *_, product = _flow_map_jacobians(bk, linearisation)
        sigma = float(bk.to_float64(largest_singular_value(bk, product))[0])
    return sigma, math.log(sigma) / problem.t_final, linearisation


@dataclass(frozen=True)
class FtleConvergence(Provenance):
    """The scheme's FTLE at t_final against the flow's as dt = 1/m -> 0.

    Per level m (`steps_per_unit`): `ftle` lambda_m(T), `differences` |lambda_m(T) -
    lambda(T)| and `max_differences` (over every layer boundary); `local_orders` between
    consecutive levels. `floor` is the FTLE error the computation allows: layers x the
    Richardson truncation estimates of the reference's and the finest level's layer-0
    Jacobians, / T, plus `reference_error`, the largest change of the reference's FTLEs
    from reference_steps_per_unit to twice that (the finer is the reference: an
    extrapolation step too long for a stiff field is unstable, which this exposes).
    `fit` is log difference against log dt by least squares over the finest
    three levels above 10 x floor (`fitted_steps`; coarser levels may be pre-asymptotic),
    with its 95% interval; `verdict` (the claim that the FTLEs agree as dt -> 0) holds
    when that interval lies above 0: the difference shrinks with dt at 95% confidence.
    The order against the method's (`expected_order`) is judged by the injected
    `order_estimator` (convergence.order.estimate_order, whose result, verdict included,
    is `order_estimate` as JSON data; properties does not import convergence).
    """

    method: str
    expected_order: int
    steps_per_unit: list[int]
    step_sizes: list[float]
    ftle: list[float]
    reference_ftle: float
    reference_error: float
    differences: list[float]
    max_differences: list[float]
    local_orders: list[float]
    floor: float
    fit: Fit
    fitted_steps: list[int]
    verdict: CheckVerdict
    order_estimate: dict[str, Any] | None
    inputs: dict[str, Any]


def _step_sweep(name: str, values: object, minimum: int) -> list[int]:
    try:
        steps = [positive_int(f"{name} entry", v) for v in values]  # type: ignore[union-attr]
    except TypeError as exc:
        raise InvalidInputError(f"{name} must be a sequence of positive integers") from exc
    if len(steps) < minimum or len(set(steps)) != len(steps):
        raise InvalidInputError(
            f"{name} needs at least {minimum} distinct positive integers, got {list(steps)}"
        )
    return sorted(steps)


@timed
def ftle_convergence(
    problem: Problem,
    method: str | SteppingMethod = "lie",
    steps_per_unit: Sequence[int] = (1, 2, 4, 8, 16),
    *,
    reference: str | SteppingMethod = "extrapolation",
    reference_steps_per_unit: int = 4,
    precision: str | Backend | None = None,
    relative_step: float | None = None,
    order_estimator: Callable[..., Any] | None = None,
) -> FtleConvergence:
    """Does the scheme's FTLE tend to the flow's as dt -> 0, and at which order?

    lambda_m(t) = log sigma_max(D Phi^m_t) / t of `method` with m steps per unit, against
    the `reference` method's at 2 x `reference_steps_per_unit` (checked against
    reference_steps_per_unit), at every layer boundary.
    Domain: at least 3 distinct steps_per_unit. `order_estimator(hs, errors, expected=,
    floor=)` returns a result dataclass (estimate_order's), stored as JSON data.
    """
    stepping = checked_method(problem, method)
    flow_method = checked_method(problem, reference)
    levels = _step_sweep("steps_per_unit", steps_per_unit, 3)
    reference_steps = positive_int("reference_steps_per_unit", reference_steps_per_unit)
    bk = working_backend(precision)
    step = perturbation_size(bk, relative_step)

    def profile(chosen: SteppingMethod, m: int) -> tuple[np.ndarray, float]:
        linearisation = linearise(problem, chosen, m, bk, step, check_truncation=True)
        _, _, ftle = _growth_figures(bk, linearisation)
        values = np.array([float(bk.to_float64(x)[0]) for x in ftle])
        return values, linearisation.jacobian_error

    coarse_exact, _ = profile(flow_method, reference_steps)
    exact, exact_error = profile(flow_method, 2 * reference_steps)
    reference_error = float(np.max(np.abs(exact - coarse_exact)))
    ftles, errors = [], []
    for m in levels:
        values, error = profile(stepping, m)
        ftles.append(values)
        errors.append(error)
    t_final = problem.t_final
    layers = len(exact)
    floor = layers * (exact_error + errors[-1] + bk.unit_roundoff) / t_final + reference_error
    differences = np.array([abs(f[-1] - exact[-1]) for f in ftles])
    max_differences = [float(np.max(np.abs(f - exact))) for f in ftles]
    hs = np.array([1.0 / m for m in levels])
    with np.errstate(divide="ignore", invalid="ignore"):
        local = np.diff(np.log(differences)) / np.diff(np.log(hs))
    fitted = [i for i, e in enumerate(differences) if e > 10 * floor][-3:]
    fit = fit_line(np.log(hs[fitted]), np.log(differences[fitted]))
    expected = stepping.order(problem.norm)
    converges = len(fitted) == 3 and fit.slope_interval[0] > 0
    estimate = None
    if order_estimator is not None:
        estimate = to_json(order_estimator(hs, differences, expected=expected, floor=floor))
    return FtleConvergence(
        method=stepping.name,
        expected_order=expected,
        steps_per_unit=levels,
        step_sizes=hs.tolist(),
        ftle=[float(f[-1]) for f in ftles],
        reference_ftle=float(exact[-1]),
        reference_error=reference_error,
        differences=differences.tolist(),
        max_differences=max_differences,
        local_orders=local.tolist(),
        floor=floor,
        fit=fit,
        fitted_steps=[levels[i] for i in fitted],
        verdict=CheckVerdict.HOLDS if converges else CheckVerdict.FAILS,
        order_estimate=estimate,
        inputs=_problem_inputs(problem, bk, step)
        | {"reference": flow_method.name, "reference_steps_per_unit": reference_steps},
    )
