"""Certified enclosures of the continuous flow (docs/enclosures.md): the flow's Taylor
coefficients and the field's Jacobian in Taylor series of arb balls
(solvers.backends.taylor; taylor_flow), the a priori box and the logarithmic norm
(bounds), what can be enclosed (scope), `enclose` with its result `Enclosure` (solver),
and the decisions of a readout that an enclosure proves (decisions)."""

from solvers.enclosure.decisions import CertifiedDecisions, certified_decisions
from solvers.enclosure.solver import Enclosure, default_order, default_tolerance, enclose

__all__ = [
    "CertifiedDecisions",
    "Enclosure",
    "certified_decisions",
    "default_order",
    "default_tolerance",
    "enclose",
]
