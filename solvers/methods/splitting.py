"""Lie and Strang splittings as data: a sequence of sub-steps, a sub-solver and the
sub-field it steps. The Transformer's own layer is the Lie splitting with Euler sub-steps
on the ambient terms, P1 after attention and P2 after the feed-forward: at dt = 1 it is
one standard encoder layer (docs/model.md section 2; docs/schemes.md sections 1 and 5)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from solvers.backends import Array
from solvers.equation.flow import LayerFlow
from solvers.integrators.tableaux import (
    EULER,
    RK2,
    RK4,
    Tableau,
    extrapolation_step,
    rk_step,
    scaled,
)
from solvers.methods.stepping import SteppingMethod
from solvers.methods.terms import (
    AMBIENT,
    ATTENTION,
    FFN,
    LAYER_ATTENTION,
    LAYER_FFN,
    SUB_FIELDS,
    TANGENT,
    SubField,
    SubStep,
)

ACCURATE_SUB_FLOW_LEVELS = 6  # one extrapolated step of order 12 per sub-step


@dataclass(frozen=True)
class Splitting(SteppingMethod):
    """Sub-steps in order, each solved by `sub_solver` (None: an accurate sub-flow) on
    `sub_field`, then projected onto the set its term lands on.

    `enters_constraint_set` is False for the Transformer's own layer (the Lie scheme
    "lie"), which takes its input raw; every other splitting steps the flow: it enters
    the constraint set of norm2 and projects each sub-step onto it (docs/limits.md
    section 3)."""

    name: str
    free_order: int
    sequence: tuple[SubStep, ...]
    sub_solver: Tableau | None
    sub_field: SubField = AMBIENT
    enters_constraint_set: bool = True

    @property
    def on_ambient_field(self) -> bool:
        return self.sub_field is AMBIENT

    def step(
        self, flow: LayerFlow, n: int, t: Array, u: Array, h: Array, pattern: Array | None = None
    ) -> Array:
        bk = flow.bk
        clock = t
        for sub in self.sequence:
            size = scaled(bk, h, sub.fraction)

            def field(s: Array, v: Array, sub=sub, frozen=clock) -> Array:
                clock_time = s if sub.advances else frozen
                g = sub.term.evaluate(flow, n, clock_time, v, pattern)
                return self.sub_field.restrict(flow, n, s, v, g, moving=sub.advances)

            if self.sub_solver is None:
                u = extrapolation_step(bk, field, clock, u, size, ACCURATE_SUB_FLOW_LEVELS)
            else:
                u = rk_step(bk, field, clock, u, size, self.sub_solver)
            if sub.advances:
                clock = clock + size
            u = flow.project(n, clock, u, sub.term.lands_on)
        return u


WHOLE, HALF = Fraction(1), Fraction(1, 2)
LAYER_SEQUENCE = (SubStep(LAYER_ATTENTION, WHOLE, True), SubStep(LAYER_FFN, WHOLE, False))
LIE_SEQUENCE = (SubStep(ATTENTION, WHOLE, True), SubStep(FFN, WHOLE, False))
STRANG_SEQUENCE = (
    SubStep(ATTENTION, HALF, True),
    SubStep(FFN, WHOLE, False),
    SubStep(ATTENTION, HALF, True),
)

LIE = Splitting("lie", 1, LAYER_SEQUENCE, EULER, AMBIENT, enters_constraint_set=False)


def _splitting(kind: str, sub_solver: Tableau | None, sub_field: SubField) -> Splitting:
    """Lie or Strang with a sub-solver (None: the accurate sub-flow) on a sub-field."""
    solver = "exact" if sub_solver is None else sub_solver.name
    name = f"{kind}-{solver}" + ("" if sub_field is TANGENT else "-ambient")
    # Lie is first order whatever its sub-solvers; Strang is order 2 with sub-solvers of
    # order >= 2 (on a constrained flow only on the tangent sub-fields: SteppingMethod.order)
    lifted = sub_solver is None or sub_solver.order >= 2
    order = 2 if kind == "strang" and lifted else 1
    sequence = STRANG_SEQUENCE if kind == "strang" else LIE_SEQUENCE
    return Splitting(name, order, sequence, sub_solver, sub_field)


SUB_SOLVERS = (EULER, RK2, RK4, None)
LIES = tuple(_splitting("lie", solver, field) for solver in SUB_SOLVERS for field in SUB_FIELDS)
"""Lie with every sub-solver, stepping the flow (with one norm per layer, lie-euler-ambient
is the Transformer's own step, but projects the initial data first)."""
STRANGS = tuple(
    _splitting("strang", solver, field) for solver in SUB_SOLVERS for field in SUB_FIELDS
)
SPLITTINGS = (LIE, *LIES, *STRANGS)
