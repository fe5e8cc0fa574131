"""The one layer loop: a method steps a problem's flow from layer boundary to layer boundary
(docs/schemes.md section 5): `solvers.solving.solve` and `solve_reference` both run
through it."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from solvers.backends import Array
from solvers.equation.flow import LayerFlow
from solvers.equation.problem import Problem
from solvers.errors import NumericalBreakdownError
from solvers.methods.stepping import Span, StepHook, SteppingMethod


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

    The loop behind `solve_layers` and `solve_reference`, for instrumented studies (one
    run of `method`, SteppingMethod.run, crosses every layer): `flow` may be a LayerFlow
    subclass that records what the method evaluates, and `on_step` sees every committed
    step (solvers.methods.stepping.Step). No validation and no certification here.
    """
    bk = flow.bk
    method = method.run(flow, steps_per_unit)
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
