"""The rounding allowances that tolerances are derived from (docs/rounding.md section 1)."""

from __future__ import annotations

import math

SOLVE_ALLOWANCE = 100
"""Roundings of unit roundoff u allowed per step and per unit of state size in a whole
solve: a solve with S steps of a state of size |u| may differ from exact arithmetic by
SOLVE_ALLOWANCE u S |u| before a difference counts as more than rounding."""

PROJECTION_ALLOWANCE = 8
"""The factor on the layer-norm projection's rounding count (2 + kappa + log2 d) u."""


def rounding_gamma(n: float, u: float) -> float:
    """gamma_n = n u / (1 - n u), the relative error of n roundings of unit roundoff u.

    Domain: n >= 0, u > 0; inf once n u >= 1 (the precision bounds nothing).
    """
    return n * u / (1 - n * u) if n * u < 1 else math.inf


def solve_allowance(unit_roundoff: float, steps: int, size: float) -> float:
    """SOLVE_ALLOWANCE u S |u|: how far rounding may move the result of S steps."""
    return SOLVE_ALLOWANCE * unit_roundoff * steps * size


def projection_allowance(unit_roundoff: float, kappa: float, d: int) -> float:
    """PROJECTION_ALLOWANCE (2 + kappa + log2 d) u: the relative rounding of one projection
    of a row with conditioning kappa (max |v_i| / std) and d features."""
    return PROJECTION_ALLOWANCE * (2 + kappa + math.log2(d)) * unit_roundoff
