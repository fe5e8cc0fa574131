"""solve and solve_layers: the stepping methods by name, the check that a method can solve a
problem, and the public entry to the layer loop (solvers.methods.driver.integrate)."""

from __future__ import annotations

import numpy as np

from solvers.backends import Array, Backend
from solvers.backends import backend as resolve_backend
from solvers.equation.flow import LayerFlow
from solvers.equation.problem import Problem
from solvers.errors import InvalidInputError
from solvers.methods.driver import integrate
from solvers.methods.extrapolation import Extrapolation
from solvers.methods.solvable import check_solvable
from solvers.methods.splitting import SPLITTINGS
from solvers.methods.stepping import SteppingMethod
from solvers.methods.unsplit import UNSPLIT
from solvers.reference.method import ControlledReference
from solvers.reference.solution import solve_reference
from solvers.validation import choice, positive_int

METHODS: dict[str, SteppingMethod] = {
    method.name: method
    for method in (
        *SPLITTINGS,
        *UNSPLIT,
        ControlledReference(),
        Extrapolation(),
        Extrapolation(name="extrapolation-no-events", events=False),
    )
}


def resolve_method(method: str | SteppingMethod) -> SteppingMethod:
    """The method called `method` (a SteppingMethod is returned as it is)."""
    if isinstance(method, SteppingMethod):
        return method
    return METHODS[choice("method", method, tuple(METHODS))]


def checked_method(problem: Problem, method: str | SteppingMethod) -> SteppingMethod:
    """The method (resolved from its name) if it can solve `problem`
    (solvers.methods.solvable.check_solvable says when it cannot)."""
    if not isinstance(problem, Problem):
        raise InvalidInputError(f"problem must be a Problem, got {type(problem).__name__}")
    method = resolve_method(method)
    check_solvable(problem, method)
    return method


def solve(
    problem: Problem,
    method: str | SteppingMethod = "lie",
    steps_per_unit: int = 1,
    backend: str | Backend = "float64",
) -> np.ndarray:
    """u(t_final) computed by `method` with `steps_per_unit` equal steps per unit of time.

    The steps land exactly on every layer boundary n (a final partial layer of length
    l < 1 gets ceil(l * steps_per_unit) equal steps). method "lie" with steps_per_unit=1
    is the standard Transformer; `solvers.solving.METHODS` lists the others (Strang
    splittings with Euler, RK2, RK4 or exact sub-flows on tangent or ambient sub-fields,
    projected and ambient RK4, the fixed extrapolation with and without ReLU event
    location, and "reference", the error-controlled reference, which is
    `solve_reference(problem).states`; docs/schemes.md). Returns a float array of the
    backend's precision (or an object array for the arbitrary-precision backends).
    Raises NumericalBreakdownError when the computation overflows or produces NaN in its
    number format.
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
    if isinstance(method, ControlledReference):  # its one path: guard digits, certification
        return solve_reference(
            problem, method.tol, bk, steps_per_unit=steps_per_unit, max_steps=method.max_steps
        ).states

    def computation(working: Backend) -> Array:
        return integrate(problem, method, steps_per_unit, LayerFlow.from_problem(problem, working))

    return bk.to_output(bk.certify(computation))
