"""The network-limit section's sentences: what a record says, in words a paper can print
(docs/networks.md sections 3 and 7). Every clause comes from a measured value; what was
not measured is not said, and every count names what it counts."""

from __future__ import annotations

from pathlib import Path

from convergence.network_limit import ASYMPTOTIC, NetworkLimit
from convergence.network_limit.batch import Share, Spread
from convergence.network_limit.decisions import Classes
from convergence.order import OrderVerdict
from reports.experiments.network.certified import certified_sentence
from reports.experiments.network.verdict import CLOSE_TO_OWN_LIMIT, close
from reports.tables import number as cell

COLLAPSED = 0.9
"""A set of decisions collapses onto one class when that class holds at least this share
of them while the network's own most decided class holds less."""
LEADING = 0.5
"""A layer leads the distance when its share is at least this fraction of the largest."""

SCORED = {"labels": "labelled inputs", "next tokens": "next-token positions"}
"""What the accuracy and the loss are taken over, by what the targets are."""


def share_text(changed: Share, unit: str) -> str:
    """'c of n <unit> (share s, 95% Wilson interval [lo, hi])'."""
    return (
        f"{changed.count} of {changed.of} {unit} (share {cell(changed.count / changed.of)}, "
        f"95% Wilson interval [{cell(changed.low)}, {cell(changed.high)}])"
    )


def spread_text(spread: Spread, batch: int) -> str:
    """'median m, range lo to hi over the B inputs'."""
    return (
        f"median {cell(spread.median)}, range {cell(spread.low)} to {cell(spread.high)} "
        f"over the {batch} inputs"
    )


def scored_text(accuracy: float | None, loss: float | None) -> str:
    """'accuracy a, loss l nats' from what was measured ('' if nothing)."""
    parts = [] if accuracy is None else [f"accuracy {cell(accuracy)}"]
    parts += [] if loss is None else [f"loss {cell(loss, 4)} nats"]
    return ", ".join(parts)


def _class_name(result: NetworkLimit, k: int) -> str:
    return f"token {k}" if result.decided_at == "real positions" else f"class {k}"


def _collapse(result: NetworkLimit, where: str, found: Classes) -> str | None:
    """The sentence saying that `found` collapses onto one class (None when it does not)."""
    own = result.network_classes
    if found.leader_share < COLLAPSED or own.leader_share >= COLLAPSED:
        return None
    k, count = found.top[0]
    return (
        f"{where} collapse onto one class: {count} of {result.decisions} are "
        f"{_class_name(result, k)} (share {cell(found.leader_share)}; {COLLAPSED:g} or more "
        f"is a collapse), where the network's own most decided class holds "
        f"{cell(own.leader_share)}."
    )


def classes_sentences(result: NetworkLimit) -> list[str]:
    """Which classes the limit's and the finest levels' decisions fall on."""
    if result.network_classes is None:
        return []
    lines = []
    own_k, own_n = result.network_classes.top[0]
    if result.limit_classes is not None:
        said = _collapse(result, "The limit's decisions", result.limit_classes)
        k, n = result.limit_classes.top[0]
        lines.append(
            said
            or f"The limit's most decided class is {_class_name(result, k)} ({n} of "
            f"{result.decisions}); the network's is {_class_name(result, own_k)} ({own_n})."
        )
    for levels in result.methods:
        said = _collapse(
            result,
            f"At {levels.steps_per_unit[-1]} steps per unit {levels.method}'s decisions",
            levels.classes[-1],
        )
        lines += [said] if said else []
    return lines


def limit_sentences(result: NetworkLimit) -> list[str]:
    """The limit's distance, its own error against the state's size, and its decisions."""
    unit = result.decided_at
    lines = [
        f"Its time-step limit lies at relative distance {cell(result.network_distance)} from "
        f"the network at dt = 1 (the largest over the batch; per input "
        f"{spread_text(result.network_spread, result.batch)}). The limit's own error is "
        f"{result.limit_error:.2g} (assessed, max-abs) against a state of size |U_limit| = "
        f"{cell(result.limit_size)}, relative {result.limit_error / result.limit_size:.2g}."
    ]
    split = result.limit_decisions
    if split is not None:
        changed_gap = (
            ""
            if split.changed_gap is None
            else (f", {cell(split.changed_gap)} over the changed ones")
        )
        kept_gap = (
            ""
            if split.unchanged_gap is None
            else (f" and {cell(split.unchanged_gap)} over the unchanged ones")
        )
        lines.append(
            f"In the limit {share_text(split.changed, unit)} change; {split.uncertain} are "
            f"uncertain (the limit's error, which moves a score by at most "
            f"{split.score_error:.2g} to first order, could change their leader) and "
            f"{split.unchanged} stay. The network's own gap between its leading and "
            f"second score has median {cell(split.own_gap.median)} over all its "
            f"decisions{changed_gap}{kept_gap}."
        )
    there = scored_text(result.limit_accuracy, result.limit_loss)
    if there:
        own = scored_text(result.network_accuracy, result.network_loss)
        lines.append(
            f"In the limit {there}, over {result.scored} {SCORED[result.targets]}; the "
            f"network's own: {own}."
        )
    return lines


def layer_sentence(result: NetworkLimit) -> str | None:
    """Which layers lead the distance (LEADING of the largest share or more)."""
    shares = [s for s in result.layers or [] if s.share is not None]
    if not shares:
        return None
    top = max(s.share for s in shares)
    leading = sorted((s for s in shares if s.share >= LEADING * top), key=lambda s: -s.share)
    named = ", ".join(f"layer {s.layer} ({cell(s.share)})" for s in leading)
    verb = "leads" if len(leading) == 1 else "lead"
    return (
        f"Which layer drives the distance: {named} {verb}, by the share of the final "
        f"distance that its one-layer defect carries to the final time (a layer leads with "
        f"{LEADING:g} of the largest share or more)."
    )


def rounding_sentences(result: NetworkLimit) -> list[str]:
    """Each precision's decisions changed beside the limit's."""
    lines = []
    split = result.limit_decisions
    for rounded in result.rounding:
        if rounded.decisions_changed is None:
            continue
        limit = "" if split is None else f"; the limit changes {split.changed.count}"
        lines.append(
            f"Rounding to {rounded.precision} changes {rounded.decisions_changed.count} of "
            f"{rounded.decisions_changed.of} decisions ({rounded.within_reach} lie within reach "
            f"of its distance from float64){limit}."
        )
    return lines


def levels_sentences(result: NetworkLimit) -> list[str]:
    """Per method: whether its distances decrease, where its asymptotic range starts, and
    why it has no order where it has none."""
    lines = []
    for levels in result.methods:
        distances = levels.relative_distance
        if distances is None:
            continue
        steps, name = levels.steps_per_unit, levels.method
        added = (
            f" ({levels.refined} finer levels added by refinement, up to {steps[-1]})"
            if levels.refined
            else ""
        )
        if levels.rises:
            rises = ", ".join(str(m) for m in levels.rises)
            lines.append(f"{name}'s distance is not monotone: it rises at {rises} steps per unit.")
        if levels.asymptotic_from is not None:
            lines.append(
                f"{name}'s asymptotic range (every finer level within {ASYMPTOTIC:g} of the "
                f"limit and decreasing) starts at {levels.asymptotic_from} steps per unit"
                f"{added}."
            )
        else:
            lines.append(
                f"{name} has not reached its asymptotic range by {steps[-1]} steps per unit "
                f"(distance {cell(distances[-1])}){added}."
            )
        if levels.order is None:
            near = sum(e <= ASYMPTOTIC for e in distances)
            lines.append(
                f"No order for {name}: {near} of its {len(distances)} levels ({steps[0]} to "
                f"{steps[-1]} steps per unit) lie within {ASYMPTOTIC:g} of the limit, and a "
                "fit needs 3 there."
            )
    return lines


def summary(result: NetworkLimit) -> list[str]:
    """The section's opening sentences."""
    padded = result.batch * result.tokens
    tokens = (
        f" ({result.real_tokens} of {padded} tokens real)" if result.real_tokens < padded else ""
    )
    judged = {
        "labels": ", judged against their labels",
        "next tokens": ", judged against their own next tokens",
    }.get(result.targets, "")
    lines = [f"Network `{Path(result.source).name}` on {result.batch} inputs{tokens}{judged}."]
    if result.no_limit is None:
        lines += [*limit_sentences(result), certified_sentence(result)]
    else:
        check = result.no_limit
        lines.append(f"No limit to measure against: {check.verdict} ({check.reason}).")
    lines += classes_sentences(result)
    increments = (
        ""
        if result.weight_increment is None
        else f"; largest increment {result.weight_increment:.3g} of the largest layer's "
        f"weights, variation {result.weight_variation:.3g} over depth (docs/depth.md section 4)"
    )
    twin = f"; the smooth twin is at relative distance {result.smooth_twin_distance:.3g}"
    if result.smooth_twin_decisions_changed is not None:
        twin += (
            f" and changes {result.smooth_twin_decisions_changed} of {result.decisions} "
            f"{result.decided_at}"
        )
    lines.append(
        "Depth smoothness, relative change between consecutive layers: "
        + (", ".join(f"{c:.3g}" for c in result.depth_change) or "one layer, none")
        + increments
        + twin
        + "."
    )
    lines.append(meaning(result))
    return lines


def meaning(result: NetworkLimit) -> str:
    """What the numbers say about reading this network as one Lie step per layer; every
    clause from a measured value."""
    if result.no_limit is not None:
        check = result.no_limit
        if check.verdict == OrderVerdict.UNDECIDED:
            return (
                "Whether the refined network has a limit is undecided at these levels: "
                "finer steps per unit (or a larger max_steps_per_unit) would decide."
            )
        if check.verdict != OrderVerdict.NO_LIMIT:
            return (
                f"The refined networks form a Cauchy sequence ({check.verdict}), but with "
                "post-LN per-feature norms the suite has no flow to measure them against."
            )
        last = result.methods[0]
        moved = (
            ""
            if last.decisions_changed is None
            else f"; {share_text(last.decisions_changed[-1], result.decided_at)} change at "
            f"{last.steps_per_unit[-1]} steps per unit"
        )
        return (
            "Its post-LN per-feature norms give no time-step limit (NO-LIMIT above), so the "
            f"continuous reading has no flow that this network discretises{moved}."
        )
    split, distance = result.limit_decisions, result.network_distance
    if split is not None and split.changed.count > 0:
        own = scored_text(result.network_accuracy, result.network_loss)
        there = scored_text(result.limit_accuracy, result.limit_loss)
        scores = (
            f", and its scores ({own}) belong to the discrete network at dt = 1, not to the "
            f"continuous model ({there} there)"
            if own
            else ""
        )
        return (
            f"{split.changed.count} of {result.decisions} decisions differ in the limit: the "
            f"network is not close to the flow the paper reads it as a step of{scores}."
        )
    if split is not None and split.uncertain > 0:
        return (
            f"No decision changes beyond the limit's error, but {split.uncertain} are within "
            "it: whether the continuous reading keeps the network's decisions is not "
            "settled at this error."
        )
    if split is None:
        if close(result):
            return (
                "The network's outputs are close to its limit: the continuous reading "
                "describes its states."
            )
        return (
            f"The network's outputs are not shown close to its limit (relative distance "
            f"{distance:.3g}; close means below {CLOSE_TO_OWN_LIMIT:g}, with the limit's own "
            "error small enough to tell)."
        )
    if close(result):
        return (
            "The network is close to its limit and no decision changes: the continuous "
            "reading describes it."
        )
    return (
        "No decision changes in the limit, but the outputs are not shown close to it: the "
        "continuous reading describes the decisions, not the states."
    )
