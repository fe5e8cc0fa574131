"""Stability of the schemes and of the flow (issue 6): how perturbations grow over depth,
and for which step sizes a scheme's perturbation growth stays that of the flow.

Notation. Phi_n is the map from the state at t = n to the state at t = n + l_n (layer n,
l_n = 1 or what is left of t_final) computed by a method with m = steps_per_unit steps
per unit (dt = 1/m, ceil(l_n m) equal steps): what `solve_layers` does between two layer
boundaries, including the projection at the layer start of the methods that enter the
constraint set. J_n = D Phi_n(u_n) is its Jacobian at the method's own trajectory, an
(N d) x (N d) matrix on the flattened state, and D Phi_t = J_{n-1} ... J_0 (t = t_n the
n-th boundary) the Jacobian of the map u0 -> u(t) (chain rule).

- Jacobians by central differences, column k = (Phi(u + h e_k) - Phi(u - h e_k)) / (2h),
  all 2 N d perturbed states in one batched evaluation. Step h = relative_step *
  max(1, max|u|), relative_step = u_r^(1/3) by default (u_r the unit roundoff), so the
  truncation error (~h^2 |Phi'''| / 6) and the rounding error (~u_r |Phi| / h) are both
  ~u_r^(2/3) relative: ~1e-27 at 40 digits (the default precision, mpmath), ~1e-11 in
  float64. `jacobian_error` reports ||J_2h - J_h|| / (3 ||J_h||) for layer 0 (Richardson:
  the truncation error of J_h). Domain: Phi differentiable at u_n; the ReLU makes the
  field only Lipschitz where a hidden pre-activation vanishes, which the trajectory meets
  at isolated times only. The extrapolation reference with event location steps to
  those times; the perturbed states replay the unperturbed trajectory's step sequence
  and activation patterns (its analytic continuations between the events), which is
  what the linearisation is: the field is continuous across a kink, so the saltation
  matrix is the identity, and the O(h^2) error of stepping a perturbed state with the
  wrong pattern for the O(h) time between the two crossings has the same sign for +h
  and -h and cancels in the central difference.
- Amplification of layer n: sigma_max(J_n); perturbation growth G(t_n) =
  sigma_max(D Phi_{t_n}); finite-time Lyapunov exponent lambda(t_n) = log G(t_n) / t_n.
  sigma_max is the Rayleigh quotient |J v| / |v| at the top right singular vector v of J
  rounded to float64 (numpy's SVD), evaluated in the working precision: a lower bound on
  sigma_max whose relative error is O(|dv|^2) = O(1e-32), so the figures carry the
  working precision (decimal strings in `*_digits`).
- Claim (`ftle_convergence`): the scheme's FTLE at t_final tends to the flow's (the
  extrapolation reference) as dt -> 0: the differences |lambda_m(T) - lambda(T)| against
  dt = 1/m; verdict holds when a least-squares fit of log difference against log dt on
  the finest three levels above the floor (properties.conditioning's fit_line) has its
  95% interval above 0. Its order against the method's is judged by an injected
  `order_estimator` (convergence.order.estimate_order; properties does not import
  convergence), whose result, asymptotic window and verdict included, is reported.
- Stability map (`stability_map`): per method, weight scale s (LayerWeights.scaled(s):
  the field grows like s^2) and attention temperature tau (scale -> scale / tau), the
  largest dt = 1/m (m scanned in powers of two up to max_steps_per_unit, then bisected
  over the integers) such that the scheme's growth G_m(T) stays within `factor` of the
  flow's G(T) at that dt and every finer scanned one. The boundary is bracketed by the
  passing 1/m and the failing 1/(m - 1); `measured_dt` is the midpoint (resolution
  1/(2m) relative). G(T) comes from the reference with its steps per unit doubled until
  two successive resolutions agree to REFERENCE_AGREEMENT: an extrapolation step too
  long for the field's stiffness is unstable and returns garbage (G ~ 1e24 at 4 steps
  per unit where the flow contracts), which the agreement test rejects.
- Linear-stability prediction: the Jacobian of the reference's field f (the tangent
  field Pi_T(u)[A(u) + F(u)] restricted to the tangent space of S1 for post-LN, A(P(u))
  + F(P(u)) for pre-LN, A + F without norm) at `samples_per_unit` times per unit on the
  reference trajectory. A method with stability function R (explicit RK: R(z) =
  sum_k z^k b^T A^(k-1) 1; the Lie scheme is read as explicit Euler on f, R(z) = 1 + z,
  its splitting error O(dt^2 J_F J_A) ignored) is absolutely stable for an eigenvalue
  lambda where |R(dt lambda)| <= 1; along the ray of lambda the boundary is the first
  r > 0 at which |R(r e^(i arg lambda))| crosses 1 upwards (the positive roots of the
  polynomial |R|^2 - 1 in r, numpy.roots), dt*(lambda) = r / |lambda|. For Euler this is
  -2 Re(lambda) / |lambda|^2. predicted_dt = min over the samples and over the
  eigenvalues with Re(lambda) < -noise (noise = 100 u_r^(2/3) times the spectral radius,
  the Jacobian's accuracy) of dt*(lambda). Strang splittings and the reference have no
  single stability function: no prediction.
- When the linearisation applies. The measured boundary is where the growth passes
  factor * G(T), not where |R| passes 1. Past dt*, the limiting mode grows per step by
  |R| ~ 1 + r g' delta (delta the relative excess over dt*, g' = d|R|/dr at r*), over
  T / dt* steps; it exceeds factor * G(T) once delta > expected_offset =
  log(factor G(T)) dt* / (T r* g') (for Euler log(factor G(T)) / (T |Re lambda|)). The
  comparison is called applicable when (a) the reference converged and the scan
  brackets a boundary (an instability occurs at some scanned dt and not at the finest),
  (b) a prediction exists, (c) |expected_offset| <= OFFSET_LIMIT (the limiting
  eigenvalue damps fast enough for the growth criterion to sit at the
  absolute-stability boundary: modes near the imaginary axis fail this), (d) the frozen
  prediction is steady along the trajectory: max / min over the samples of dt*(t) <=
  1 + tolerance (a field far from linear over the horizon changes its spectrum; beyond
  that spread no single frozen dt* can be expected to match within the tolerance),
  (e) the scan is monotone and (f) accuracy does not set the boundary: the growth
  error at the finest dt, |G_M / G - 1|, carried to the measured dt at the method's
  order, (M / m)^p |G_M / G - 1| (`accuracy_error`), is at most (factor - 1) / 2 (the
  criterion "within a factor of the flow" also fails for an accurate-enough but
  stable scheme whose O(dt^p) error exceeds the factor). Each failed condition is
  reported in `reasons`; the verdict on a point is "agrees" when applicable and
  |measured - predicted| / predicted <= tolerance (0.2, the issue's), "disagrees" when
  applicable and not, "not applicable" otherwise.
- `damped_attention_layer` builds layers whose FFN is the exact linear damping
  F(U) = -U K (K symmetric positive definite with eigenvalues from 1 to `stiffness`,
  written with ReLU pairs: relu(z) - relu(-z) = z), so the field (norm "none") is
  analytic with stiff, nearly real eigenvalues -s^2 k plus the attention's: a family
  where instability is observable and the linearisation applies. Post-LN problems bound
  the state; there instability shows as growth of perturbations, not blow-up.
- Bad input: a relative_step (the perturbation size), factor, scale or temperature that
  is not positive or not finite, an empty sweep, an unknown method, and non-finite
  weights (LayerWeights rejects them on construction) raise InvalidInputError naming the
  value.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from properties.claim_check import CheckVerdict
from properties.conditioning import Fit, fit_line
from solvers import LayerWeights, PiecewiseControls, Problem, backend
from solvers.backends import Array, Backend
from solvers.driver import layer_lengths
from solvers.errors import InvalidInputError, NumericalBreakdownError
from solvers.flow import LayerFlow
from solvers.integrators import EULER, Tableau
from solvers.methods import METHODS, checked_method
from solvers.operators import tangent_projection
from solvers.provenance import json_float, versions
from solvers.reference import Reference
from solvers.schemes import LIE, Step, SteppingMethod, Unsplit
from solvers.validation import choice, positive_int, positive_number, positive_sweep

DEFAULT_DIGITS = 40
OFFSET_LIMIT = 0.1
"""Largest |expected_offset| (relative shift of the growth-criterion boundary from the
absolute-stability boundary) at which the linear prediction is compared."""
NOISE_FACTOR = 100.0
"""Eigenvalues with Re > -NOISE_FACTOR u_r^(2/3) rho count as not damped (rho the
spectral radius; u_r^(2/3) the central-difference Jacobian's relative accuracy)."""
REFERENCE_AGREEMENT = 1e-4
"""Relative agreement of G(T) at two successive reference resolutions that makes it the
flow's growth (a factor criterion needs a few digits)."""
AGREES, DISAGREES, NOT_APPLICABLE = "agrees", "disagrees", "not applicable"


# ------------------------------------------------------------------ validation


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


def _method(name: object) -> SteppingMethod:
    if isinstance(name, SteppingMethod):
        return name
    return METHODS[choice("method", name, tuple(METHODS))]


def _check_problem(problem: object, method: SteppingMethod) -> Problem:
    """The checks solve_layers makes: a Problem, and one constraint set per post-LN layer."""
    checked_method(problem, method)
    return problem


def _precision(precision: str | Backend | None) -> Backend:
    return backend("mpmath", DEFAULT_DIGITS) if precision is None else backend(precision)


def _relative_step(bk: Backend, relative_step: object) -> float:
    if relative_step is None:
        return bk.unit_roundoff ** (1 / 3)
    return positive_number("relative_step (the perturbation size)", relative_step)


# ------------------------------------------------------------------ layer maps and Jacobians


def _layer_lengths(problem: Problem, steps_per_unit: int) -> list[tuple[Fraction, int]]:
    return [
        (length, math.ceil(length * steps_per_unit)) for length in layer_lengths(problem.t_final)
    ]


class _LayerMaps:
    """Phi_n of one method in one backend, for one state and for batches of states."""

    def __init__(self, problem: Problem, method: SteppingMethod, steps_per_unit: int, bk: Backend):
        self.flow = LayerFlow.from_problem(problem, bk)
        self.method, self.bk = method, bk
        self.layers = _layer_lengths(problem, steps_per_unit)
        self.replays = isinstance(method, Reference) and method.events

    def advance(self, n: int, u: Array) -> tuple[Array, list[Step] | None]:
        """Phi_n(u), and the committed steps to replay (reference with events)."""
        bk, (length, steps) = self.bk, self.layers[n]
        u = self.method.enter(self.flow, n, u)
        start, size = bk.asarray(n), bk.asarray(length)
        if not self.replays:
            return self.method.advance(self.flow, n, start, size, steps, u), None
        schedule: list[Step] = []
        end = self.method.advance(self.flow, n, start, size, steps, u, schedule.append)
        return end, schedule

    def apply(self, n: int, batch: Array, schedule: list[Step] | None) -> Array:
        """Phi_n on a batch (leading axis), replaying `schedule` when there is one."""
        if schedule is None:
            return self.advance(n, batch)[0]
        batch = self.method.enter(self.flow, n, batch)
        for step in schedule:
            batch = self.method.step(self.flow, n, step.t, batch, step.h, step.pattern)
        return batch


def _jacobian(bk: Backend, evaluate: Callable[[Array], Array], u: Array, step: float) -> Array:
    """Central-difference Jacobian (outputs x inputs, flattened) of `evaluate` at u.

    `evaluate` takes a batch of states (leading axis) and returns the batch of outputs.
    """
    size = int(np.prod(u.shape))
    unit = bk.asarray(np.eye(size).reshape(size, *u.shape))
    h = bk.asarray(step)
    batch = np.concatenate([u + unit * h, u - unit * h])
    out = evaluate(batch)
    if not bk.all_finite(out):
        raise NumericalBreakdownError(f"{bk!r} produced inf or NaN in a perturbed evaluation")
    columns = (out[:size] - out[size:]) / (2 * h)
    return columns.reshape(size, -1).T


def _step_size(bk: Backend, u: Array, relative_step: float) -> float:
    return relative_step * max(1.0, float(np.max(np.abs(bk.to_float64(u)))))


def _largest_singular_value(bk: Backend, matrix: Array) -> Array:
    """|J v| / |v| in bk at the float64 top right singular vector v: sigma_max to O(|dv|^2).

    Returned as a backend array of shape (1,).
    """
    _, _, right = np.linalg.svd(bk.to_float64(matrix))
    v = bk.asarray(right[0][:, None])
    image = bk.matmul(matrix, v)
    return bk.sqrt(bk.sum(image * image, 0) / bk.sum(v * v, 0))[0]


@dataclass
class _Linearisation:
    """A method's layer Jacobians along its trajectory, and the layer boundary times."""

    jacobians: list[Array]
    times: list[Fraction]
    jacobian_error: float | None


def _linearise(
    problem: Problem,
    method: SteppingMethod,
    steps_per_unit: int,
    bk: Backend,
    relative_step: float,
    check_truncation: bool = False,
) -> _Linearisation:
    maps = _LayerMaps(problem, method, steps_per_unit, bk)
    with bk.active(), np.errstate(over="ignore", invalid="ignore"):
        u = problem.initial_state(bk)
        jacobians, times, error = [], [], None
        elapsed = Fraction(0)
        for n, (length, _) in enumerate(maps.layers):
            following, schedule = maps.advance(n, u)
            if not bk.all_finite(following):
                raise NumericalBreakdownError(
                    f"{bk!r} produced inf or NaN in layer {n} of method {method.name!r} "
                    f"with {steps_per_unit} steps per unit"
                )
            step = _step_size(bk, u, relative_step)

            def evaluate(batch: Array, n: int = n, schedule=schedule) -> Array:
                return maps.apply(n, batch, schedule)

            jacobian = _jacobian(bk, evaluate, u, step)
            if check_truncation and n == 0:
                change = bk.to_float64(_jacobian(bk, evaluate, u, 2 * step) - jacobian)
                fine = bk.to_float64(jacobian)
                error = float(np.linalg.norm(change, 2) / (3 * np.linalg.norm(fine, 2)))
            jacobians.append(jacobian)
            elapsed += length
            times.append(elapsed)
            u = following
    return _Linearisation(jacobians, times, error)


# ------------------------------------------------------------------ amplification and FTLE


@dataclass(frozen=True)
class PerturbationGrowth:
    """Per-layer amplification sigma_max(J_n), growth sigma_max(D Phi_t) and FTLE at each
    layer boundary t (`times`) for one method, step count and precision.

    Floats for use; `*_digits` hold the same figures as decimal strings at the working
    precision. `jacobian_error` is the Richardson estimate of the relative truncation
    error of layer 0's Jacobian (module docstring).
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
    versions: dict[str, str] = field(default_factory=versions)
    wall_time: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data (nan and inf as repr strings)."""
        record = dataclasses.asdict(self)
        for key in ("amplification", "growth", "ftle"):
            record[key] = [json_float(x) for x in record[key]]
        record["jacobian_error"] = json_float(self.jacobian_error)
        return record


def _growth_figures(bk: Backend, linearisation: _Linearisation) -> tuple[list, list, list]:
    """(amplification, growth, ftle) per layer as backend scalars."""
    amplification, growth, ftle = [], [], []
    with bk.active():
        product = None
        for jacobian, t in zip(linearisation.jacobians, linearisation.times, strict=True):
            amplification.append(_largest_singular_value(bk, jacobian))
            product = jacobian if product is None else bk.matmul(jacobian, product)
            sigma = _largest_singular_value(bk, product)
            growth.append(sigma)
            ftle.append(bk.log(sigma) / bk.asarray(t))
    return amplification, growth, ftle


def perturbation_growth(
    problem: Problem,
    method: str | SteppingMethod = "lie",
    steps_per_unit: int = 1,
    *,
    precision: str | Backend | None = None,
    relative_step: float | None = None,
) -> PerturbationGrowth:
    """Amplification sigma_max(J_n) of each layer map, growth G(t) = sigma_max(D Phi_t) and
    FTLE lambda(t) = log G(t) / t at each layer boundary t of `problem` (module docstring).

    Domain: any Problem and method of solvers.problem.METHODS; steps_per_unit >= 1;
    relative_step > 0 (default u_r^(1/3)). precision None means mpmath with 40 digits.
    Cost: 2 N d + 1 batched evaluations of each layer map (plus 2 N d for the truncation
    check of layer 0).
    """
    started = time.perf_counter()
    stepping = _method(method)
    problem = _check_problem(problem, stepping)
    steps_per_unit = positive_int("steps_per_unit", steps_per_unit)
    bk = _precision(precision)
    step = _relative_step(bk, relative_step)
    linearisation = _linearise(problem, stepping, steps_per_unit, bk, step, check_truncation=True)
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
        inputs={
            "norm": problem.norm,
            "shape": list(problem.u0.shape),
            "t_final": problem.t_final,
            "precision": repr(bk),
            "relative_step": step,
        },
        wall_time=time.perf_counter() - started,
    )


def _final_growth(
    problem: Problem, method: SteppingMethod, steps_per_unit: int, bk: Backend, step: float
) -> tuple[float, float, _Linearisation]:
    """(G(T), FTLE(T), the linearisation) of one method; G(T) = inf on overflow."""
    try:
        linearisation = _linearise(problem, method, steps_per_unit, bk, step)
    except NumericalBreakdownError:
        return math.inf, math.inf, None  # type: ignore[return-value]
    with bk.active():
        product = linearisation.jacobians[0]
        for jacobian in linearisation.jacobians[1:]:
            product = bk.matmul(jacobian, product)
        sigma = float(bk.to_float64(_largest_singular_value(bk, product))[0])
    return sigma, math.log(sigma) / problem.t_final, linearisation


# ------------------------------------------------------------------ FTLE convergence


@dataclass(frozen=True)
class FtleConvergence:
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
    `order_estimator` (convergence.order.estimate_order, whose result is
    `order_estimate`, verdict included; properties does not import convergence).
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
    verdict: str
    order_estimate: dict[str, Any] | None
    inputs: dict[str, Any]
    versions: dict[str, str] = field(default_factory=versions)
    wall_time: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data (nan and inf as repr strings)."""
        record = dataclasses.asdict(self)
        for key in ("ftle", "differences", "max_differences", "local_orders", "step_sizes"):
            record[key] = [json_float(x) for x in record[key]]
        for key in ("reference_ftle", "reference_error", "floor"):
            record[key] = json_float(record[key])
        record["fit"] = self.fit.to_json()
        return record


def ftle_convergence(
    problem: Problem,
    method: str | SteppingMethod = "lie",
    steps_per_unit: Sequence[int] = (1, 2, 4, 8, 16),
    *,
    reference: str | SteppingMethod = "reference",
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
    floor=)` returns an object with `to_json()` (estimate_order).
    """
    started = time.perf_counter()
    stepping, flow_method = _method(method), _method(reference)
    problem = _check_problem(problem, stepping)
    _check_problem(problem, flow_method)
    levels = _step_sweep("steps_per_unit", steps_per_unit, 3)
    reference_steps = positive_int("reference_steps_per_unit", reference_steps_per_unit)
    bk = _precision(precision)
    step = _relative_step(bk, relative_step)

    def profile(chosen: SteppingMethod, m: int) -> tuple[np.ndarray, float]:
        linearisation = _linearise(problem, chosen, m, bk, step, check_truncation=True)
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
    expected = stepping.order
    converges = len(fitted) == 3 and fit.slope_interval[0] > 0
    estimate = None
    if order_estimator is not None:
        estimate = order_estimator(hs, differences, expected=expected, floor=floor).to_json()
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
        inputs={
            "norm": problem.norm,
            "shape": list(problem.u0.shape),
            "t_final": t_final,
            "reference": flow_method.name,
            "reference_steps_per_unit": reference_steps,
            "precision": repr(bk),
            "relative_step": step,
        },
        wall_time=time.perf_counter() - started,
    )


# ------------------------------------------------------------------ linear stability


def stability_function(tableau: Tableau) -> list[Fraction]:
    """Coefficients c_0 .. c_s of R(z) = sum_k c_k z^k, c_0 = 1, c_k = b^T A^(k-1) 1: the
    stability function of an explicit Runge-Kutta tableau (u' = lambda u gives
    u_new = R(h lambda) u). Exact fractions."""
    stages = len(tableau.b)
    a = [[row[j] if j < len(row) else Fraction(0) for j in range(stages)] for row in tableau.a]
    vector = [Fraction(1)] * stages
    coefficients = [Fraction(1)]
    for _ in range(stages):
        coefficients.append(
            sum((b * v for b, v in zip(tableau.b, vector, strict=True)), Fraction(0))
        )
        vector = [
            sum((a[i][j] * vector[j] for j in range(stages)), Fraction(0)) for i in range(stages)
        ]
    return coefficients


def ray_boundary(coefficients: Sequence[Fraction], angle: float) -> tuple[float, float]:
    """(r*, g') along the ray z = r e^(i angle): r* the first r > 0 where |R(z)| crosses 1
    upwards (0 if |R| > 1 right away, inf if never), g' = d|R|/dr there.

    The crossings are the positive real roots of |R(r w)|^2 - 1, a polynomial in r with
    real coefficients (w = e^(i angle)); numpy.roots finds them.
    """
    w = complex(math.cos(angle), math.sin(angle))
    ray = np.array([complex(c) * w**k for k, c in enumerate(coefficients)])  # ascending in r
    square = np.convolve(ray, ray.conj()).real
    square[0] -= 1  # |R|^2 - 1, which vanishes at r = 0

    def excess(r: float) -> float:
        return float(np.polynomial.polynomial.polyval(r, square))

    roots = np.roots(square[1:][::-1])  # |R|^2 - 1 = r q(r)
    positive = sorted(
        r.real for r in roots if r.real > 0 and abs(r.imag) <= 1e-9 * max(1.0, abs(r))
    )
    first = positive[0] if positive else math.inf
    if excess(min(first, 1.0) * 1e-6) > 0:
        return 0.0, math.nan  # |R| > 1 for small r: the ray leaves the region at once
    for r in positive:
        if excess(r * (1 + 1e-6)) > 0:
            size = abs(np.polynomial.polynomial.polyval(r, ray))
            derivative = np.polynomial.polynomial.polyval(
                r, np.polynomial.polynomial.polyder(square)
            ) / (2 * size)
            return float(r), float(derivative)
    return math.inf, math.nan


def _prediction_tableau(method: SteppingMethod) -> Tableau | None:
    if method is LIE:
        return EULER  # the Lie step read as Euler on A + F (module docstring)
    if isinstance(method, Unsplit):
        return method.tableau
    return None


def _trajectory_samples(
    problem: Problem, method: SteppingMethod, steps_per_unit: int, per_unit: int, bk: Backend
) -> tuple[LayerFlow, list[tuple[int, Fraction, Array]]]:
    """States (n, t, u) of `method` at `per_unit` equally spaced times per layer and at T."""
    flow = LayerFlow.from_problem(problem, bk)
    maps = _LayerMaps(problem, method, steps_per_unit, bk)
    samples = []
    with bk.active(), np.errstate(over="ignore", invalid="ignore"):
        u = problem.initial_state(bk)
        for n, (length, _) in enumerate(maps.layers):
            if method.enters_constraint_set:
                u = flow.project(n, bk.asarray(n), u)
            pieces = math.ceil(length * per_unit)
            piece = length / pieces
            for j in range(pieces):
                t = n + j * piece
                samples.append((n, t, u))
                steps = math.ceil(piece * steps_per_unit)
                u = method.advance(flow, n, bk.asarray(t), bk.asarray(piece), steps, u)
        samples.append((len(maps.layers) - 1, Fraction(problem.t_final), u))
    return flow, samples


def _field_spectrum(flow: LayerFlow, n: int, t: Fraction, u: Array, step: float) -> np.ndarray:
    """Eigenvalues of the field's Jacobian at (t, u); on the tangent space of S1 for post-LN."""
    bk = flow.bk
    with bk.active(), np.errstate(over="ignore", invalid="ignore"):
        time_point = bk.asarray(t)

        def field_of(batch: Array) -> Array:
            return flow.tangent(n, time_point, batch, flow.total(n, time_point, batch))

        jacobian = bk.to_float64(_jacobian(bk, field_of, u, step))
        if flow.norm != "post":
            return np.linalg.eigvals(jacobian)
        size = jacobian.shape[0]
        unit = bk.asarray(np.eye(size).reshape(size, *u.shape))
        projector = bk.to_float64(
            tangent_projection(bk, u, unit, flow.feature_weights).reshape(size, -1).T
        )
    left, values, _ = np.linalg.svd(projector)
    basis = left[:, values > 0.5]  # the range of Pi_T: the tangent space
    restricted, *_ = np.linalg.lstsq(basis, projector @ jacobian @ basis, rcond=None)
    return np.linalg.eigvals(restricted)


@dataclass(frozen=True)
class LinearPrediction:
    """The absolute-stability boundary of the frozen linearisation along the trajectory.

    `predicted_dt` = min over samples and damped eigenvalues of dt*(lambda); `eigenvalue`
    the limiting one (real, imaginary) at `time`; `angle` its angle from the negative
    real axis in degrees; `spread` max / min of the per-sample dt*; `ray_root` r* and
    `ray_slope` g' = d|R|/dr at r*; `spectral_radius` the largest |lambda| seen.
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

    def to_json(self) -> dict[str, Any]:
        record = dataclasses.asdict(self)
        for key, value in record.items():
            if isinstance(value, float):
                record[key] = json_float(value)
        record["eigenvalue"] = [json_float(x) for x in self.eigenvalue]
        record["per_sample_dt"] = [json_float(x) for x in self.per_sample_dt]
        return record


def linear_prediction(
    flow: LayerFlow,
    samples: Sequence[tuple[int, Fraction, Array]],
    tableau: Tableau,
    step: float,
) -> LinearPrediction:
    """The frozen-coefficient stability boundary of `tableau` over the sampled states."""
    coefficients = stability_function(tableau)
    noise = NOISE_FACTOR * flow.bk.unit_roundoff ** (2 / 3)
    best = (math.inf, 0j, 0.0, math.inf, math.nan)
    per_sample, radius = [], 0.0
    for n, t, u in samples:
        spectrum = _field_spectrum(flow, n, t, u, step)
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


# ------------------------------------------------------------------ stability maps


@dataclass(frozen=True)
class StabilityPoint:
    """One (method, weight scale, temperature): measured and predicted dt boundaries.

    `flow_growth` G(T) of the reference at `reference_steps_per_unit` (the first of the
    doubled resolutions that agrees with the previous one to REFERENCE_AGREEMENT); `scan`
    maps each tried m to G_m(T) / G(T) (inf: overflow). `stable_dt` = 1/m, the largest
    dt passing with every finer scanned dt (None if even the finest fails);
    `unstable_dt` = 1/(m - 1), its failing neighbour (None if dt = 1 passes: no
    instability in the scanned range); `measured_dt` their midpoint. `prediction` as in
    LinearPrediction (None without a stability function); `expected_offset`
    log(factor G(T)) dt* / (T r* g'); `relative_disagreement` (measured - predicted) /
    predicted. `applies`, `reasons` and `verdict` as in the module docstring.
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
    verdict: str

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "scale": self.scale,
            "temperature": self.temperature,
            "flow_growth": json_float(self.flow_growth),
            "reference_steps_per_unit": self.reference_steps_per_unit,
            "scan": {str(m): json_float(r) for m, r in self.scan.items()},
            "stable_dt": json_float(self.stable_dt),
            "unstable_dt": json_float(self.unstable_dt),
            "measured_dt": json_float(self.measured_dt),
            "prediction": None if self.prediction is None else self.prediction.to_json(),
            "expected_offset": json_float(self.expected_offset),
            "relative_disagreement": json_float(self.relative_disagreement),
            "accuracy_error": json_float(self.accuracy_error),
            "applies": self.applies,
            "reasons": list(self.reasons),
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class StabilityMap:
    """Stability points over methods x weight scales x temperatures.

    `verdict` holds when at least one point is applicable and every applicable point
    agrees (within `tolerance`), fails when an applicable point disagrees, and is
    "not applicable" when no point is.
    """

    points: list[StabilityPoint]
    factor: float
    tolerance: float
    verdict: str
    inputs: dict[str, Any]
    versions: dict[str, str] = field(default_factory=versions)
    wall_time: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "points": [p.to_json() for p in self.points],
            "factor": self.factor,
            "tolerance": self.tolerance,
            "verdict": self.verdict,
            "inputs": self.inputs,
            "versions": self.versions,
            "wall_time": self.wall_time,
        }


def varied_problem(problem: Problem, scale: float, temperature: float) -> Problem:
    """`problem` with every layer's weights scaled by `scale` (LayerWeights.scaled) and its
    attention scale divided by `temperature` (both > 0; PiecewiseControls)."""
    if not isinstance(problem.controls, PiecewiseControls):
        raise InvalidInputError("stability maps need PiecewiseControls")
    scale = positive_number("scale", scale)
    temperature = positive_number("temperature", temperature)
    layers = [
        dataclasses.replace(layer.scaled(scale), scale=layer.scale / temperature)
        for layer in problem.controls.layers
    ]
    return dataclasses.replace(problem, controls=PiecewiseControls(layers))


def _scan(growth_ratio: Callable[[int], float], factor: float, largest: int):
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
    `largest`. An extrapolation step longer than the field's stiffness allows is
    unstable and returns garbage, which this catches."""
    previous = _final_growth(problem, method, steps, bk, step)[0]
    while 2 * steps <= largest:
        steps *= 2
        current = _final_growth(problem, method, steps, bk, step)[0]
        if math.isfinite(current) and abs(current - previous) <= REFERENCE_AGREEMENT * current:
            return current, steps
        previous = current
    return math.nan, steps


def stability_map(
    problem: Problem,
    methods: Sequence[str | SteppingMethod] = ("lie",),
    *,
    scales: Sequence[float] = (1.0, 2.0),
    temperatures: Sequence[float] = (0.5, 1.0, 2.0),
    factor: float = 2.0,
    max_steps_per_unit: int = 128,
    reference: str | SteppingMethod = "reference",
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
    converged; each method passes at m when G_m(T) <= factor G(T) (module docstring for
    the scan, the prediction and when it applies). Domain: PiecewiseControls; scales and
    temperatures > 0 and finite (non-empty sweeps); factor > 1; max_steps_per_unit >= 2.
    Float64 by default: a factor-2 criterion needs a few digits, which float64 Jacobians
    (~1e-8 relative through the reference) give many times over.
    """
    started = time.perf_counter()
    if isinstance(methods, str | SteppingMethod):
        methods = (methods,)
    steppings = [_method(m) for m in methods]
    if not steppings:
        raise InvalidInputError("methods must name at least one method, got an empty sweep")
    flow_method = _method(reference)
    for stepping in (*steppings, flow_method):
        problem = _check_problem(problem, stepping)
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
    step = _relative_step(bk, relative_step)
    t_final = problem.t_final

    points = []
    for scale in scale_values:
        for temperature in temperature_values:
            varied = varied_problem(problem, float(scale), float(temperature))
            flow_growth, steps = _converged_flow_growth(
                varied, flow_method, reference_steps, reference_cap, bk, step
            )
            samples = None
            for stepping in steppings:
                tableau = _prediction_tableau(stepping)
                prediction = None
                if tableau is not None and math.isfinite(flow_growth):
                    if samples is None:
                        samples = _trajectory_samples(varied, flow_method, steps, per_unit, bk)
                    prediction = linear_prediction(*samples, tableau, step)
                cache: dict[int, float] = {}

                def ratio(
                    m: int, varied=varied, stepping=stepping, cache=cache, flow_growth=flow_growth
                ) -> float:
                    if m not in cache:
                        cache[m] = _final_growth(varied, stepping, m, bk, step)[0] / flow_growth
                    return cache[m]

                if math.isfinite(flow_growth):
                    stable, unstable, monotone = _scan(ratio, factor, largest)
                else:
                    stable = unstable = None
                    monotone = True
                measured = _Measured(
                    flow_growth, steps, dict(sorted(cache.items())), stable, unstable, monotone
                )
                points.append(
                    _judge(
                        stepping.name, stepping.order, float(scale), float(temperature),
                        measured, prediction,
                        factor, t_final, tolerance, largest,
                    )
                )  # fmt: skip
    applicable = [p for p in points if p.applies]
    if not applicable:
        verdict = NOT_APPLICABLE
    else:
        verdict = (
            CheckVerdict.HOLDS
            if all(p.verdict == AGREES for p in applicable)
            else CheckVerdict.FAILS
        )
    return StabilityMap(
        points=points,
        factor=factor,
        tolerance=tolerance,
        verdict=verdict,
        inputs={
            "methods": [s.name for s in steppings],
            "norm": problem.norm,
            "shape": list(problem.u0.shape),
            "t_final": t_final,
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
        wall_time=time.perf_counter() - started,
    )


@dataclass(frozen=True)
class _Measured:
    flow_growth: float
    reference_steps: int
    scan: dict[int, float]
    stable: int | None
    unstable: int | None
    monotone: bool


def _judge(
    method: str,
    order: int,
    scale: float,
    temperature: float,
    measured: _Measured,
    prediction: LinearPrediction | None,
    factor: float,
    t_final: float,
    tolerance: float,
    largest: int,
) -> StabilityPoint:
    reasons = []
    stable, unstable, flow_growth = measured.stable, measured.unstable, measured.flow_growth
    stable_dt = None if stable is None else 1.0 / stable
    unstable_dt = None if unstable is None else 1.0 / unstable
    measured_dt = None
    if not math.isfinite(flow_growth):
        reasons.append(
            "the reference did not converge (two successive resolutions never agreed): "
            "no flow growth to compare with"
        )
    elif stable is None:
        reasons.append(f"no instability boundary: unstable at every scanned dt down to 1/{largest}")
    elif unstable is None:
        reasons.append("no instability in the scanned range: dt = 1 already passes")
    else:
        measured_dt = (stable_dt + unstable_dt) / 2
    if not measured.monotone:
        reasons.append("the scan is not monotone: a coarser dt passes before a finer one fails")
    accuracy = None
    if measured_dt is not None:
        finest = measured.scan[largest]
        accuracy = abs(finest - 1) * (largest / stable) ** order
        if accuracy > (factor - 1) / 2:
            reasons.append(
                f"accuracy, not stability, sets the measured boundary: the growth error at "
                f"dt = 1/{largest} ({finest - 1:+.3g}), carried to dt = 1/{stable} at order "
                f"{order}, is {accuracy:.3g} > (factor - 1) / 2"
            )
    offset = disagreement = None
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
        dt_star = prediction.predicted_dt
        if prediction.ray_slope > 0:
            offset = (
                math.log(factor * flow_growth) * dt_star
                / (t_final * prediction.ray_root * prediction.ray_slope)
            )  # fmt: skip
        if offset is None or abs(offset) > OFFSET_LIMIT:
            shift = "an unknown distance" if offset is None else f"{offset:+.0%}"
            reasons.append(
                f"the limiting eigenvalue {complex(*prediction.eigenvalue):.3g} "
                f"({prediction.angle:.0f} deg from the negative real axis) damps too slowly "
                f"for the horizon: the growth criterion sits {shift} from the "
                "absolute-stability boundary"
            )
        if not prediction.spread <= 1 + tolerance:
            reasons.append(
                f"the frozen prediction changes along the trajectory by more than the "
                f"tolerance (max/min dt* = {prediction.spread:.3g} > 1 + {tolerance:g}): "
                "the field is far from linear over the horizon"
            )
        if measured_dt is not None:
            disagreement = (measured_dt - dt_star) / dt_star
    applies = not reasons
    if applies:
        verdict = AGREES if abs(disagreement) <= tolerance else DISAGREES
    else:
        verdict = NOT_APPLICABLE
    return StabilityPoint(
        method=method,
        scale=scale,
        temperature=temperature,
        flow_growth=flow_growth,
        reference_steps_per_unit=measured.reference_steps,
        scan=measured.scan,
        stable_dt=stable_dt,
        unstable_dt=unstable_dt,
        measured_dt=measured_dt,
        prediction=prediction,
        expected_offset=offset,
        relative_disagreement=disagreement,
        accuracy_error=accuracy,
        applies=applies,
        reasons=reasons,
        verdict=verdict,
    )


# ------------------------------------------------------------------ a stiff family


def damped_attention_layer(
    d: int,
    heads: int,
    stiffness: float,
    rng: np.random.Generator | int = 0,
    *,
    attention_scale: float = 1.0,
) -> LayerWeights:
    """Seeded random attention (LayerWeights.random with weight_scale `attention_scale`)
    and the FFN F(U) = -U K written with ReLU pairs: W1 = [I | -I], b1 = 0,
    W2 = [-K ; K], b2 = 0, so relu(U) (-K) + relu(-U) K = -U K exactly. K = Q diag(k) Q^T
    with k evenly spaced on [1, stiffness] and Q a seeded random orthogonal matrix.

    With norm "none" the field A(U) - U K is analytic (use the reference without event
    location: every pre-activation crosses zero wherever a state entry does, and the
    kinks cancel in pairs). Domain: d >= 1, heads dividing d, stiffness >= 1.
    """
    rng = np.random.default_rng(rng)
    stiffness = positive_number("stiffness", stiffness)
    if stiffness < 1:
        raise InvalidInputError(f"stiffness must be >= 1, got {stiffness!r}")
    attention_scale = positive_number("attention_scale", attention_scale)
    layer = LayerWeights.random(d, heads, 2 * d, rng, weight_scale=attention_scale)
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    damping = q @ np.diag(np.linspace(1.0, stiffness, d)) @ q.T
    identity = np.eye(d)
    return dataclasses.replace(
        layer,
        w1=np.hstack([identity, -identity]),
        b1=np.zeros(2 * d),
        w2=np.vstack([-damping, damping]),
        b2=np.zeros(d),
    )
