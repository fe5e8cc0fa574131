"""Certified enclosures of the continuous flow (docs/enclosures.md): the flow's Taylor
coefficients and the field's Jacobian in Taylor series of arb balls
(solvers.backends.taylor; taylor_flow), the a priori box and the logarithmic norm
(bounds), what can be enclosed (scope), and `enclose` with its result `Enclosure`
(solver)."""

from solvers.enclosure.solver import Enclosure, enclose

__all__ = ["Enclosure", "enclose"]
