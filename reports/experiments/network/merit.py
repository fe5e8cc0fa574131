"""The figures of merit of a network-limit record, each with the tolerance its own error
allows (reports.merit), so that `tide check` sees every number the section prints.

- A relative distance from the limit (per method and level, the batch's and the median
  over its inputs, and the network's own at dt = 1) is uncertain by the limit's assessed
  error on both runs, 2 E / |U_limit|, and by the float64 rounding of the refined solve,
  SOLVE_ALLOWANCE u S for S steps (docs/rounding.md section 1).
- The limit's assessed error is an estimate at a floor: it may grow by ERROR_GROWTH.
- Decisions changed, classes and accuracies are counts: exact, except that the limit's
  counts may move by its uncertain decisions (those its error can change).
- A loss from a float64 solve is uncertain by its rounding, SOLVE_ALLOWANCE u S relative
  to max(1, loss); the limit's by twice its largest score error (-log softmax moves by at
  most twice the largest change of a score) on top.
- A layer's defect and carried contribution are uncertain by the references' errors; its
  share by those and the distance's own tolerance.
- A network in another precision: its distance from float64 is an error at a rounding
  floor (growth); its loss is uncertain by as much as rounding moved it from float64; its
  decisions changed and accuracy are counts of a deterministic solve: exact.
- The weights' changes over depth (per layer, the largest increment, the variation) are
  ratios of norms of the stored weights: exact up to their rounding (reports.merit).
- The smooth twin's distance is uncertain by the rounding of the two float64 solves.
- A fitted order keeps its interval; where the asymptotic range starts, how many levels
  refinement added, and a limit check's verdict are exact.
- Whether an enclosure reached the final time is exact; its width and the upper end of
  the reference's error bracket are bounds at a floor (growth); its certified and
  uncertain decisions are counts, each of which may trade with the uncertain ones; the
  verdict on the assessed error is exact.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from convergence.network_limit import NetworkLimit
from convergence.network_limit.decisions import Classes
from reports.experiments.network.certified import error_bound
from reports.merit import (
    Merit,
    exact_merit,
    growth_merit,
    norm_merit,
    order_merit,
    within_merit,
)
from solvers.results.allowances import SOLVE_ALLOWANCE

UNIT_ROUNDOFF = float(np.finfo(np.float64).eps / 2)
"""The refined networks and the limit are solved in float64."""


def network_merit(result: NetworkLimit, case: str) -> dict[str, Merit]:
    """Every figure the network-limit section prints, by name, with its tolerance."""
    layers = len(result.depth_change) + 1
    merit: dict[str, Any] = {}
    split = result.limit_decisions
    uncertain = 0 if split is None else split.uncertain

    def rounding(steps_per_unit: int) -> float:
        return SOLVE_ALLOWANCE * UNIT_ROUNDOFF * layers * steps_per_unit

    def distance_tolerance(steps_per_unit: int) -> float:
        return 2 * result.limit_error / result.limit_size + rounding(steps_per_unit)

    def distance(value: float, steps_per_unit: int) -> Merit:
        why = "2 x the limit's assessed error / |U_limit| + float64 rounding of the solve"
        return within_merit(value, distance_tolerance(steps_per_unit), why, case)

    def loss(value: float, steps_per_unit: int, more: float = 0.0, why: str = "") -> Merit:
        return within_merit(
            value,
            rounding(steps_per_unit) * max(1.0, abs(value)) + more,
            "float64 rounding of the solve, relative to max(1, loss)" + why,
            case,
        )

    def classes(name: str, found: Classes, slack: int = 0) -> None:
        k, count = found.top[0]
        merit[f"{name}.top_class"] = exact_merit(k, case=case)
        merit[f"{name}.top_class_decisions"] = exact_merit(count, slack, case)

    if result.no_limit is not None:
        merit["limit_check.verdict"] = exact_merit(str(result.no_limit.verdict), case=case)
    else:
        merit["limit_error"] = growth_merit(result.limit_error, case)
        merit["network_distance"] = distance(result.network_distance, 1)
        merit["network_distance.median"] = distance(result.network_spread.median, 1)
        if split is not None:
            merit["limit.decisions_changed"] = exact_merit(split.changed.count, uncertain, case)
            merit["limit.decisions_uncertain"] = exact_merit(uncertain, uncertain, case)
            if result.limit_classes is not None:
                classes("limit", result.limit_classes, uncertain)
        if result.limit_accuracy is not None and split is not None:
            merit["limit.accuracy"] = within_merit(
                result.limit_accuracy,
                uncertain / result.scored,
                f"{uncertain} uncertain decisions of {result.scored}",
                case,
            )
            merit["limit.loss"] = loss(
                result.limit_loss, 1, 2 * split.score_error, " + 2 x the limit's score error"
            )
        for s in result.layers or []:
            name = f"layer {s.layer}"
            merit[f"{name}.defect"] = distance(s.defect, 1)
            carried = s.error / result.limit_size + rounding(1)
            merit[f"{name}.carried"] = within_merit(
                s.contribution, carried, "the references' errors / |U_limit| + rounding", case
            )
            if s.share is not None:
                merit[f"{name}.share"] = within_merit(
                    s.share,
                    (carried + s.share * distance_tolerance(1)) / result.network_distance,
                    "the carried defect's and the distance's tolerances, over the distance",
                    case,
                )
    if result.network_classes is not None:
        classes("network", result.network_classes)
    for k, change in enumerate(result.depth_change):
        merit[f"depth_change.{k}"] = norm_merit(change, case)
    if result.weight_increment is not None:
        merit["weight_increment"] = norm_merit(result.weight_increment, case)
        merit["weight_variation"] = norm_merit(result.weight_variation, case)
    merit["smooth_twin_distance"] = within_merit(
        result.smooth_twin_distance, 2 * rounding(1), "float64 rounding of the two solves", case
    )
    if result.smooth_twin_decisions_changed is not None:
        merit["smooth_twin.decisions_changed"] = exact_merit(
            result.smooth_twin_decisions_changed, case=case
        )
    if result.certified is not None:
        merit.update(_certified_merit(result, case))
    for levels in result.methods:
        for k, m in enumerate(levels.steps_per_unit):
            name = f"{levels.method}.{m} per unit"
            if levels.relative_distance is not None:
                merit[f"{name}.relative_distance"] = distance(levels.relative_distance[k], m)
                merit[f"{name}.median_distance"] = distance(levels.distance_spread[k].median, m)
            if levels.decisions_changed is not None:
                merit[f"{name}.decisions_changed"] = exact_merit(
                    levels.decisions_changed[k].count, case=case
                )
                classes(name, levels.classes[k])
            if levels.accuracy is not None:
                merit[f"{name}.accuracy"] = exact_merit(levels.accuracy[k], case=case)
                merit[f"{name}.loss"] = loss(levels.loss[k], m)
        merit[f"{levels.method}.refined"] = exact_merit(levels.refined, case=case)
        if levels.relative_distance is not None:
            merit[f"{levels.method}.asymptotic_from"] = exact_merit(
                levels.asymptotic_from, case=case
            )
        if levels.order is not None:
            merit[f"{levels.method}.order"] = order_merit(levels.order, case)
    for rounded in result.rounding:
        name = f"rounding {rounded.precision}"
        merit[f"{name}.relative_distance"] = growth_merit(rounded.relative_distance, case)
        if rounded.decisions_changed is not None:
            merit[f"{name}.decisions_changed"] = exact_merit(
                rounded.decisions_changed.count, case=case
            )
        if rounded.accuracy is not None:
            merit[f"{name}.accuracy"] = exact_merit(rounded.accuracy, case=case)
            moved = abs(rounded.loss - result.network_loss)
            merit[f"{name}.loss"] = loss(
                rounded.loss, 1, moved, " + as far as rounding moved it from float64"
            )
    return merit


def _certified_merit(result: NetworkLimit, case: str) -> dict[str, Merit]:
    """The enclosure's figures (module docstring)."""
    found = result.certified
    merit = {"certified.reached": exact_merit(found.failure is None, case=case)}
    if found.failure is not None:
        return merit
    verdict = str(error_bound(found, result.limit_error))
    merit |= {
        "certified.width": growth_merit(found.width, case),
        "certified.reference_error": growth_merit(found.reference_error[1], case),
        "certified.error_bound": exact_merit(verdict, case=case),
    }
    if found.decisions is not None:
        slack = found.uncertain
        merit["certified.same"] = exact_merit(found.certified_same, slack, case)
        merit["certified.changed"] = exact_merit(found.certified_changed, slack, case)
        merit["certified.uncertain"] = exact_merit(found.uncertain, slack, case)
    return merit
