"""Unsplit Runge-Kutta: a tableau on the whole field (its tangent projection, or the ambient
field), then the projection onto the constraint set (docs/schemes.md section 2)."""

from __future__ import annotations

from dataclasses import dataclass

from solvers.backends import Array
from solvers.equation.flow import LayerFlow
from solvers.integrators.tableaux import RK2, RK4, Tableau, rk_step
from solvers.methods.stepping import SteppingMethod
from solvers.methods.terms import AMBIENT, TANGENT, SubField


@dataclass(frozen=True)
class Unsplit(SteppingMethod):
    """A tableau on the whole field (tangent or ambient), then the projection."""

    name: str
    free_order: int
    tableau: Tableau
    field: SubField = TANGENT

    @property
    def on_ambient_field(self) -> bool:
        return self.field is AMBIENT

    def step(
        self, flow: LayerFlow, n: int, t: Array, u: Array, h: Array, pattern: Array | None = None
    ) -> Array:
        def field(s: Array, v: Array) -> Array:
            return self.field.restrict(flow, n, s, v, flow.total(n, s, v, pattern))

        return flow.project(n, t + h, rk_step(flow.bk, field, t, u, h, self.tableau))


UNSPLIT = (
    Unsplit("projected-rk4", 4, RK4, TANGENT),
    Unsplit("ambient-rk4", 4, RK4, AMBIENT),
    Unsplit("projected-rk2", 2, RK2, TANGENT),
)
