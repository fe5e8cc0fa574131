"""The error-controlled reference as a stepping method of the layer loop: the method
"reference" of `solve`, whose runs cross a Transformer's layers with one controller
(solvers.reference.controller), each layer as a System (solvers.reference.layer_system).
`solvers.reference.solution.solve_reference` runs it and returns its error estimates."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from solvers.backends import Array, Backend
from solvers.equation.flow import LayerFlow
from solvers.methods.stepping import Span, StepHook, SteppingMethod
from solvers.reference.controller import MAX_STEPS, Controller, Work
from solvers.reference.guard_digits import tolerance_for
from solvers.reference.layer_system import layer_system
from solvers.reference.system import System


@dataclass(frozen=True)
class ControlledReference(SteppingMethod):
    """The error-controlled extrapolation as a method: a run of it (`run`) crosses every
    layer to `tol` (None: the working precision) with one controller, in steps of at most
    1 / steps_per_unit, so steps_per_unit caps the step size and does not set the error.
    Its order is infinite: its error does not depend on the step count. `solve` and
    `solve_layers` hand it to `solve_reference`, which adds the guard digits, certifies
    and rounds back (solvers.reference.solution)."""

    name: str = "reference"
    tol: float | None = None
    max_steps: int = MAX_STEPS
    free_order: float = math.inf

    def controller(self, bk: Backend, work: Work, max_step: float = 1.0) -> Controller:
        """A controller of this method's tolerance and budget in `bk`."""
        return Controller(bk, tolerance_for(bk, self.tol), self.max_steps, work, max_step)

    def run(self, flow: LayerFlow, steps_per_unit: int) -> ReferenceRun:
        """One run over the layers: one controller, its steps at most 1 / steps_per_unit."""
        return ReferenceRun(self.controller(flow.bk, Work(), 1.0 / steps_per_unit))

    def step(
        self, flow: LayerFlow, n: int, t: Array, u: Array, h: Array, pattern: Array | None = None
    ) -> Array:
        """u(t + h) to the tolerance, in as many controlled steps as that needs; with
        `pattern`, along the flow with that activation pattern held (no events)."""
        return self.controller(flow.bk, Work()).cross(layer_system(flow, n), t, u, h, pattern)


class ReferenceRun(SteppingMethod):
    """One run of the reference over a whole problem, as the layer loop crosses it: one
    controller across the layers (its step size, column and global estimate carry over),
    its global estimate recorded at every layer boundary (`errors`), its work in `work`.
    It only crosses spans: a single step of the reference is ControlledReference.step.
    `systems(flow, n)` makes each layer's System (`layer_system` unless given: a study of
    the controller may take a provider out)."""

    name = "reference"
    free_order = math.inf

    def __init__(
        self,
        controller: Controller,
        systems: Callable[[LayerFlow, int], System] = layer_system,
    ) -> None:
        self.controller, self.systems = controller, systems
        self.errors = [0.0]

    @property
    def work(self) -> Work:
        return self.controller.work

    def advance(
        self, flow: LayerFlow, span: Span, u: Array, on_step: StepHook | None = None
    ) -> Array:
        """u at the end of the span, with every ReLU kink located; `on_step` sees every
        accepted step with the pattern it held."""
        system = self.systems(flow, span.layer)
        u = self.controller.cross(system, span.start, u, span.length, on_step=on_step)
        self.errors.append(self.controller.error)
        return u
