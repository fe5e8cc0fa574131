"""The figures of merit of a network-limit record, each with the tolerance its own error
allows (reports.merit), so that `tide check` sees every number the section prints.

- A relative distance from the limit (per method and level, and the network's own at
  dt = 1) is uncertain by the limit's assessed error on both runs, 2 E / |U_limit|, and by
  the float64 rounding of the refined solve, SOLVE_ALLOWANCE u S for S steps
  (docs/rounding.md section 1).
- The limit's assessed error is an estimate at a floor: it may grow by ERROR_GROWTH.
- Decisions changed and accuracies are counts: exact.
- A loss from a float64 solve is uncertain by its rounding, SOLVE_ALLOWANCE u S relative
  to max(1, loss).
- The smooth twin's distance is uncertain by the rounding of the two float64 solves.
- A fitted order keeps its interval; a limit check keeps its verdict.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from convergence.network_limit import NetworkLimit
from reports.merit import Merit, exact_merit, growth_merit, order_merit, within_merit
from solvers.results.allowances import SOLVE_ALLOWANCE

UNIT_ROUNDOFF = float(np.finfo(np.float64).eps / 2)
"""The refined networks and the limit are solved in float64."""


def network_merit(result: NetworkLimit, case: str) -> dict[str, Merit]:
    """Every figure the network-limit section prints, by name, with its tolerance."""
    layers = len(result.depth_change) + 1
    merit: dict[str, Any] = {}

    def rounding(steps_per_unit: int) -> float:
        return SOLVE_ALLOWANCE * UNIT_ROUNDOFF * layers * steps_per_unit

    def distance(value: float, steps_per_unit: int) -> Merit:
        limit = 2 * result.limit_error / result.limit_size
        why = "2 x the limit's assessed error / |U_limit| + float64 rounding of the solve"
        return within_merit(value, limit + rounding(steps_per_unit), why, case)

    if result.no_limit is not None:
        merit["limit_check.verdict"] = exact_merit(str(result.no_limit.verdict), case=case)
    else:
        merit["limit_error"] = growth_merit(result.limit_error, case)
        merit["network_distance"] = distance(result.network_distance, 1)
        if result.limit_decisions_changed is not None:
            merit["limit.decisions_changed"] = exact_merit(
                result.limit_decisions_changed, case=case
            )
        if result.limit_accuracy is not None:
            merit["limit.accuracy"] = exact_merit(result.limit_accuracy, case=case)
    merit["smooth_twin_distance"] = within_merit(
        result.smooth_twin_distance, 2 * rounding(1), "float64 rounding of the two solves", case
    )
    if result.smooth_twin_decisions_changed is not None:
        merit["smooth_twin.decisions_changed"] = exact_merit(
            result.smooth_twin_decisions_changed, case=case
        )
    for levels in result.methods:
        for k, m in enumerate(result.steps_per_unit):
            name = f"{levels.method}.{m} per unit"
            if levels.relative_distance is not None:
                merit[f"{name}.relative_distance"] = distance(levels.relative_distance[k], m)
            if levels.decisions_changed is not None:
                merit[f"{name}.decisions_changed"] = exact_merit(
                    levels.decisions_changed[k], case=case
                )
            if levels.accuracy is not None:
                merit[f"{name}.accuracy"] = exact_merit(levels.accuracy[k], case=case)
            if levels.loss is not None:
                loss = levels.loss[k]
                merit[f"{name}.loss"] = within_merit(
                    loss,
                    rounding(m) * max(1.0, abs(loss)),
                    "float64 rounding of the solve, relative to max(1, loss)",
                    case,
                )
        if levels.order is not None:
            merit[f"{levels.method}.order"] = order_merit(levels.order, case)
    return merit
