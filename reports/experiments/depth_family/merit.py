"""The figures of merit of a depth-family record, each with the tolerance its own error
allows (reports.merit), so that `tide check` sees every number the section prints.

- An own-flow distance is uncertain by the flow's assessed error (relative, on both
  sides: 2 E) and the float64 rounding of the network's L layers, SOLVE_ALLOWANCE u L
  (docs/rounding.md section 1); a family distance by the rounding of the two networks.
- The flows' assessed errors are estimates at a floor: they may grow by ERROR_GROWTH.
- Weight increments and variations are ratios of norms of the stored weights: exact up to
  their rounding.
- Accuracies and decisions changed are counts of deterministic solves: exact. A loss is
  uncertain by the rounding of its solve, relative to max(1, loss).
- A fitted rate keeps its interval and verdict (the order rule); a rate that was not
  fitted, and the family's verdict, are exact.
"""

from __future__ import annotations

import math

import numpy as np

from convergence.depth_family import DepthFamily, FittedRate
from reports.merit import (
    Merit,
    exact_merit,
    fitted_merit,
    growth_merit,
    norm_merit,
    within_merit,
)
from solvers.results.allowances import SOLVE_ALLOWANCE

UNIT_ROUNDOFF = float(np.finfo(np.float64).eps / 2)
"""The members and their flows are solved in float64."""


def family_merit(result: DepthFamily, case: str) -> dict[str, Merit]:
    """Every figure the depth-family section prints for one family, by name."""
    merit: dict[str, Merit] = {}
    for k, m in enumerate(result.members):
        name = f"L{m.depth}"
        rounding = SOLVE_ALLOWANCE * UNIT_ROUNDOFF * m.depth
        merit[f"{name}.own_flow_distance"] = within_merit(
            m.own_flow_distance,
            2 * m.own_flow_error + rounding,
            "2 x the flow's assessed relative error + float64 rounding of the network",
            case,
        )
        merit[f"{name}.own_flow_error"] = growth_merit(m.own_flow_error, case)
        if m.family_distance is not None:
            deeper = result.members[k + 1].depth
            merit[f"{name}.family_distance"] = within_merit(
                m.family_distance,
                SOLVE_ALLOWANCE * UNIT_ROUNDOFF * (m.depth + deeper),
                "float64 rounding of the two networks",
                case,
            )
        if m.weight_increment is not None:
            merit[f"{name}.weight_increment"] = norm_merit(m.weight_increment, case)
            merit[f"{name}.weight_variation"] = norm_merit(m.weight_variation, case)
        for what in ("accuracy", "flow_accuracy"):
            if getattr(m, what) is not None:
                merit[f"{name}.{what}"] = exact_merit(getattr(m, what), case=case)
        for what in ("loss", "flow_loss"):
            value = getattr(m, what)
            if value is not None:
                merit[f"{name}.{what}"] = within_merit(
                    value,
                    rounding * max(1.0, abs(value)),
                    "float64 rounding of the solve, relative to max(1, loss)",
                    case,
                )
        for what in ("flow_decisions_changed", "next_decisions_changed"):
            if getattr(m, what) is not None:
                merit[f"{name}.{what}"] = exact_merit(getattr(m, what).count, case=case)
    for what in ("own_flow_rate", "family_rate", "increment_rate"):
        merit[what] = rate_merit(getattr(result, what), case)
    merit["verdict"] = exact_merit(str(result.verdict), case=case)
    return merit


def rate_merit(rate: FittedRate, case: str) -> Merit:
    """A fitted rate by the order rule (its interval widened by ORDER_SLACK, its verdict);
    one that was not fitted, exactly."""
    if rate.verdict is None or math.isnan(rate.rate):
        return exact_merit(f"not fitted: {rate.reason}", case=case)
    return fitted_merit(rate.rate, rate.interval, rate.verdict, case)
