"""A trained network against its own time-step limit (docs/networks.md sections 3, 5 and
7): the study (`study.network_limit` and its record), one method's levels and their
refinement into the asymptotic range (`levels`), statistics over the batch (`batch`), the
limit's decisions split by margin (`decisions`), which layer drives the distance
(`layers`), and the network in other number systems (`rounding`)."""

from convergence.network_limit.levels import ASYMPTOTIC, FIT_LEVELS, MethodLevels
from convergence.network_limit.study import LIMIT_TOLERANCE, NetworkLimit, network_limit

__all__ = [
    "ASYMPTOTIC",
    "FIT_LEVELS",
    "LIMIT_TOLERANCE",
    "MethodLevels",
    "NetworkLimit",
    "network_limit",
]
