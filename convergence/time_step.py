"""Time-step refinement studies: errors of each method against a reference as dt -> 0.

`time_step_study` measures each method's max-abs, relative Frobenius and per-token errors
at every layer boundary against the exact solution (manufactured or uniform attention),
the error-controlled reference (solve_reference), or the next finer level of the same
method ("richardson"), and fits each method's order. Levels within a factor 10 of a
floor are not fitted: the precision floor (100 unit roundoffs times the solution's size)
or, against "reference", the reference's error at t = T, assessed against a second run
(solve_reference's `assess`, docs/schemes.md section 7), which the study records
("reference floor", docs/orders.md section 4). A scheme whose limit is another problem's
flow is measured against that problem (`limit`). `splitting_table` runs every splitting
(docs/orders.md section 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from convergence.order import OrderEstimate
from convergence.refinement import refine, rounding_floor
from solvers import Problem, backend, solve_layers, solve_reference
from solvers.backends import Backend
from solvers.equation.exact import uniform_attention_solution
from solvers.errors import InvalidInputError
from solvers.methods.splitting import SPLITTINGS
from solvers.results.provenance import Provenance, timed
from solvers.solving import METHODS

REFERENCES = ("exact", "reference", "richardson")


@dataclass(frozen=True)
class MethodConvergence:
    """One method's errors per level (rows: steps_per_unit) and its estimated order."""

    method: str
    steps_per_unit: list[int]
    max_abs: list[float]
    relative_frobenius: list[float]
    per_token_max: list[list[float]]
    max_abs_per_layer: list[list[float]]
    estimate: OrderEstimate
    reference_error: list[float] | None
    """The reference's max-abs error at each layer boundary, assessed against a second run
    (docs/schemes.md section 7; None for the exact solution and "richardson")."""


@dataclass(frozen=True)
class TimeStepStudy(Provenance):
    """Every method's convergence, with the inputs and provenance."""

    methods: list[MethodConvergence]
    reference: str
    precision: str
    configuration: dict[str, object]


def _reference_layers(
    problem: Problem, reference: str, bk: Backend, steps: int
) -> tuple[np.ndarray, list[float] | None]:
    """The reference states in bk at the layer boundaries (only the final one for the
    uniform-attention solution), and the reference's assessed error at each (None for
    an exact solution). The error-controlled reference takes steps of at most 1 / steps."""
    if reference == "reference":
        solution = solve_reference(problem, backend=bk, steps_per_unit=steps, assess=True)
        return solution.states, solution.error
    with bk.active():
        return _exact_layers(problem, bk), None


def _exact_layers(problem: Problem, bk: Backend) -> np.ndarray:
    """The exact solution at the layer boundaries (manufactured), or at t = T (uniform
    attention)."""
    if problem.manufactured is not None:
        times = range(int(np.ceil(problem.t_final)) + 1)
        return np.stack(
            [problem.manufactured.state(bk, bk.asarray(min(t, problem.t_final))) for t in times]
        )
    return uniform_attention_solution(problem, bk)[None]


@timed
def time_step_study(
    problem: Problem,
    methods: Sequence[str],
    steps_per_unit: Sequence[int],
    *,
    reference: str = "reference",
    precision: str | Backend = "float64",
    reference_steps: int = 8,
    expected: dict[str, float] | None = None,
    configuration: dict[str, object] | None = None,
    limit: Problem | None = None,
) -> TimeStepStudy:
    """Errors and orders of `methods` over `steps_per_unit` (see the module docstring).

    `limit` is the problem whose solution the methods converge to (default: `problem`).
    `expected` overrides, per method, the order docs/orders.md predicts on the problem's
    norm placement (SteppingMethod.order).
    """
    if reference not in REFERENCES:
        raise InvalidInputError(f"unknown reference {reference!r}; allowed: {REFERENCES}")
    needed = 4 if reference == "richardson" else 3  # richardson loses the finest level
    if len(steps_per_unit) < needed:
        raise InvalidInputError(
            f"a study against reference {reference!r} needs at least {needed} step counts, "
            f"got {list(steps_per_unit)}"
        )
    for name in methods:
        if name not in METHODS:
            raise InvalidInputError(f"unknown method {name!r}; allowed: {', '.join(METHODS)}")
    bk = backend(precision)
    steps = sorted(int(m) for m in steps_per_unit)
    exact, reference_error = (
        (None, None)
        if reference == "richardson"
        else _reference_layers(problem if limit is None else limit, reference, bk, reference_steps)
    )
    against = {"successive": True} if exact is None else {"truth": exact}
    results = []
    for name in methods:
        run = partial(solve_layers, problem, name, backend=bk)
        refinement = refine(run, steps, partial(_final_error, bk), **against)
        errors = [
            _layer_errors(bk, v, t)
            for v, t in zip(refinement.values, refinement.truths, strict=True)
        ]
        final = [err[-1] for err in errors]
        with bk.active():
            truth = bk.to_float64(refinement.truths[-1])
        floor = rounding_floor(bk.unit_roundoff, float(np.abs(truth[-1]).max()))
        if reference_error is not None and reference_error[-1] > floor:
            refinement = refinement.floored(reference_error[-1], "reference floor")
        else:
            refinement = refinement.floored(floor)
        results.append(
            MethodConvergence(
                method=name,
                steps_per_unit=refinement.levels,
                max_abs=refinement.distances,
                relative_frobenius=[
                    float(np.linalg.norm(f) / np.linalg.norm(truth[-1])) for f in final
                ],
                per_token_max=[f.max(axis=-1).ravel().tolist() for f in final],
                max_abs_per_layer=[
                    err.reshape(len(err), -1).max(axis=1).tolist() for err in errors
                ],
                estimate=refinement.estimate(_expected(name, problem, expected)),
                reference_error=reference_error,
            )
        )
    return TimeStepStudy(
        methods=results,
        reference=reference,
        precision=repr(bk),
        configuration={"norm": problem.norm, "t_final": problem.t_final, **(configuration or {})},
    )


def _layer_errors(bk: Backend, run: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """|run - truth| at the boundaries the truth has, in float64."""
    with bk.active():  # differences in the backend: a 50-digit error survives
        return np.abs(bk.to_float64(run[-len(truth) :] - truth))


def _final_error(bk: Backend, run: np.ndarray, truth: np.ndarray) -> float:
    """max |run - truth| at the last boundary."""
    return float(_layer_errors(bk, run, truth)[-1].max())


def _expected(name: str, problem: Problem, expected: dict[str, float] | None) -> float | None:
    """The order method `name` is judged against: the given one, else the method's order on
    the problem's placement (None for a method whose error does not depend on the step)."""
    if expected is not None and name in expected:
        return expected[name]
    order = METHODS[name].order(problem.norm)
    return float(order) if math.isfinite(order) else None


SPLITTING_METHODS = tuple(method.name for method in SPLITTINGS)


def splitting_table(problem: Problem, steps_per_unit: Sequence[int], **options) -> TimeStepStudy:
    """The splitting-error table: the Lie step, every Lie and Strang variant (SPLITTINGS)."""
    return time_step_study(problem, SPLITTING_METHODS, steps_per_unit, **options)
