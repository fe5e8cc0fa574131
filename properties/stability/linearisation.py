"""The layer maps Phi_n of a stepping method and their Jacobians along its own trajectory
(docs/stability.md section 1).

Phi_n takes the state at t = n to the state at the end of layer n as the method computes
it, the projection at the layer start included. The perturbed states replay the
trajectory's committed steps (step sizes and activation patterns), so J_n is the
derivative of the solve along its own step sequence, event location included.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from solvers import Problem, backend
from solvers.backends import Array, Backend
from solvers.equation.flow import LayerFlow
from solvers.equation.jacobian import jacobian, relative_step
from solvers.errors import NumericalBreakdownError
from solvers.methods.driver import integrate, layer_lengths
from solvers.methods.stepping import Step, SteppingMethod
from solvers.validation import positive_number

DEFAULT_DIGITS = 40
"""Digits of the default working precision (mpmath): Jacobians good to ~1e-27."""


def working_backend(precision: str | Backend | None) -> Backend:
    """The backend `precision` names; None means mpmath with DEFAULT_DIGITS digits."""
    return backend("mpmath", DEFAULT_DIGITS) if precision is None else backend(precision)


def perturbation_size(bk: Backend, relative: object) -> float:
    """The relative difference step: `relative` (> 0, finite), by default u_r^(1/3), which
    balances truncation (~h^2) and rounding (~u_r / h) at ~u_r^(2/3) relative."""
    if relative is None:
        return bk.unit_roundoff ** (1 / 3)
    return positive_number("relative_step (the perturbation size)", relative)


def layer_trajectory(
    problem: Problem, method: SteppingMethod, steps_per_unit: int, flow: LayerFlow
) -> tuple[Array, list[list[Step]]]:
    """The method's states at the layer boundaries, and the steps it committed in each
    layer (`flow.bk` active)."""
    committed: list[list[Step]] = [[] for _ in layer_lengths(problem.t_final)]
    try:
        states = integrate(
            problem, method, steps_per_unit, flow, lambda step: committed[step.layer].append(step)
        )
    except NumericalBreakdownError as exc:
        raise NumericalBreakdownError(
            f"method {method.name!r} with {steps_per_unit} steps per unit: {exc}"
        ) from exc
    return states, committed


def replay(
    method: SteppingMethod, flow: LayerFlow, n: int, batch: Array, steps: list[Step]
) -> Array:
    """Phi_n on a batch of states (leading axis): the layer start, then `steps` replayed."""
    batch = method.enter(flow, n, batch)
    for step in steps:
        batch = method.step(flow, n, step.t, batch, step.h, step.pattern)
    return batch


@dataclass
class Linearisation:
    """A method's layer Jacobians J_n along its trajectory (flattened states, in the
    working backend), the layer boundary times, and the Richardson estimate of J_0's
    relative truncation error ||J_2h - J_h|| / (3 ||J_h||) when it was asked for."""

    jacobians: list[Array]
    times: list[Fraction]
    jacobian_error: float | None


def linearise(
    problem: Problem,
    method: SteppingMethod,
    steps_per_unit: int,
    bk: Backend,
    relative: float,
    check_truncation: bool = False,
) -> Linearisation:
    """J_n = D Phi_n(u_n) of every layer by central differences with step
    relative * max(1, max|u_n|); with `check_truncation`, J_0 at twice the step too."""
    with bk.active(), np.errstate(over="ignore", invalid="ignore"):
        flow = LayerFlow.from_problem(problem, bk)
        states, committed = layer_trajectory(problem, method, steps_per_unit, flow)
        jacobians, error = [], None
        for n, steps in enumerate(committed):
            u = states[n]
            step = relative_step(bk, u, relative)

            def evaluate(batch: Array, n: int = n, steps: list[Step] = steps) -> Array:
                return replay(method, flow, n, batch, steps)

            layer_jacobian = jacobian(bk, evaluate, u, step)
            if check_truncation and n == 0:
                change = bk.to_float64(jacobian(bk, evaluate, u, 2 * step) - layer_jacobian)
                fine = bk.to_float64(layer_jacobian)
                error = float(np.linalg.norm(change, 2) / (3 * np.linalg.norm(fine, 2)))
            jacobians.append(layer_jacobian)
    times, elapsed = [], Fraction(0)
    for length in layer_lengths(problem.t_final):
        elapsed += length
        times.append(elapsed)
    return Linearisation(jacobians, times, error)


def largest_singular_value(bk: Backend, matrix: Array) -> Array:
    """|J v| / |v| in bk at the float64 top right singular vector v: sigma_max to
    O(|dv|^2), so it carries the working precision. A backend array of shape (1,)."""
    _, _, right = np.linalg.svd(bk.to_float64(matrix))
    v = bk.asarray(right[0][:, None])
    image = bk.matmul(matrix, v)
    return bk.sqrt(bk.sum(image * image, 0) / bk.sum(v * v, 0))[0]
