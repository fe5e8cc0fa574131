"""The one solve loop: a method steps a problem's flow from layer boundary to layer boundary."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from solvers.backends import Array, Backend
from solvers.backends import backend as resolve_backend
from solvers.errors import NumericalBreakdownError
from solvers.flow import LayerFlow
from solvers.methods import checked_method
from solvers.problem import Problem
from solvers.schemes import Span, StepHook, SteppingMethod
from solvers.validation import positive_int


def solve(
    problem: Problem,
    method: str | SteppingMethod = "lie",
    steps_per_unit: int = 1,
    backend: str | Backend = "float64",
) -> np.ndarray:
    """u(t_final) computed by `method` with `steps_per_unit` equal steps per unit of time.

    The steps land exactly on every layer boundary n (a final partial layer of length
    l < 1 gets ceil(l * steps_per_unit) equal steps). method "lie" with steps_per_unit=1
    is the standard Transformer; `solvers.methods.METHODS` lists the others (Strang
    splittings with Euler, RK2, RK4 or exact sub-flows on tangent or ambient sub-fields,
    projected and ambient RK4, the extrapolation reference with and without ReLU event
    location; docs/schemes.md). Returns a float array of the backend's precision (or an
    object array for the arbitrary-precision backends). Raises NumericalBreakdownError
    when the computation overflows or produces NaN in its number format.
    """
    return solve_layers(problem, method, steps_per_unit, backend)[-1]


def solve_layers(
    problem: Problem,
    method: str | SteppingMethod = "lie",
    steps_per_unit: int = 1,
    backend: str | Backend = "float64",
) -> np.ndarray:
    """Like `solve`, but the states at t = 0, 1, ..., and t_final stacked on a leading axis.

    Entry n is u(min(n, t_final)): the output of the first n layers.
    """
    method = checked_method(problem, method)
    steps_per_unit = positive_int("steps_per_unit", steps_per_unit)
    bk = resolve_backend(backend)

    def computation(working: Backend) -> Array:
        return integrate(problem, method, steps_per_unit, LayerFlow.from_problem(problem, working))

    return bk.to_output(bk.certify(computation))


def layer_lengths(t_final: float) -> list[Fraction]:
    """The length of each layer's interval [n, min(n + 1, t_final)], exactly."""
    end = Fraction(t_final)
    return [min(end, n + 1) - n for n in range(math.ceil(end))]


def integrate(
    problem: Problem,
    method: SteppingMethod,
    steps_per_unit: int,
    flow: LayerFlow,
    on_step: StepHook | None = None,
) -> Array:
    """The states at the layer boundaries of `problem`, stepped by `method` on `flow`
    (in its backend, already active).

    The loop behind `solve_layers`, for instrumented studies: `flow` may be a LayerFlow
    subclass that records what the method evaluates, and `on_step` sees every committed
    step (solvers.schemes.Step). No validation and no certification here.
    """
    bk = flow.bk
    u = problem.initial_state(bk)
    states = [u]
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is reported below
        for n, length in enumerate(layer_lengths(problem.t_final)):
            span = Span(n, bk.asarray(n), bk.asarray(length), math.ceil(length * steps_per_unit))
            u = method.advance(flow, span, method.enter(flow, n, u), on_step)
            if not bk.all_finite(u):
                raise NumericalBreakdownError(
                    f"{bk!r} produced inf or NaN in layer {n} (t in [{n}, {n + length}]): "
                    "the values exceed what the format can hold"
                )
            states.append(u)
    return np.stack(states)
