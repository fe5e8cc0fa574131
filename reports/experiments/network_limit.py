"""kind "network-limit": a user's trained network against its own time-step limit.

    [[experiment]]
    kind = "network-limit"
    model = "vit-digits"            # a save_pretrained directory or a save_model file,
                                    # relative to the study file
    inputs = "inputs.npy"           # initial token states (B, N, d); or instead
    tokens = "tokens.npy"           #   token ids (B, N), embedded by the model itself; or
    pixels = "pixels.npy"           #   images (B, C, H, W) for a ViT
    mask = "mask.npy"               # optional: 0/1 padding mask (B, N), 1 for a real token
    labels = "labels.npy"           # optional: class indices (B,); an LM head is judged
                                    #   against its own next tokens instead
    methods = ["lie", "strang-rk2"]
    steps_per_unit = [1, 2, 4, 8, 16]
    max_steps_per_unit = 256        # optional: a limit check may refine on its own to here

Everything that can be checked before running is checked when the study is read
(reports.experiments.network_inputs: the files, never unpickled; shapes and widths
against the model; NaN; token ids, labels and the mask; the methods the model's norms
allow): a one-line error naming the file and the key, and nothing runs. The case's
parameters carry the files' SHA-256 digests, so a changed file reruns the case on
--resume. The computation is convergence.network_limit (docs/networks.md sections 3 and
5).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from convergence.network_limit import ASYMPTOTIC, NetworkLimit, network_limit
from convergence.order import OrderVerdict
from reports.claims import Claim, ClaimVerdict, Evidence, verified_or
from reports.experiments.base import CaseKind, Experiment, Judgement, Record, Section, results
from reports.experiments.network_inputs import FIELDS, Network, check_network, network_cases
from reports.experiments.network_merit import network_merit
from reports.figures import Figure, lines_figure
from reports.tables import (
    ORDER_HEADERS,
    latex_table,
    markdown_table,
    order_cells,
    slug,
)
from reports.tables import number as cell


def _run(case: dict[str, Any], seed: int) -> NetworkLimit:
    network = Network(case)
    return network_limit(
        network.model,
        network.states,
        network.targets,
        mask=network.mask,
        methods=case["methods"],
        steps_per_unit=case["steps_per_unit"],
        max_steps_per_unit=case["max_steps_per_unit"],
    )


CLOSE_TO_OWN_LIMIT = 1e-2
"""A network is close to its limit when its relative distance from it (dt = 1) is below this
and no decision of its readout changes in the limit."""
JUDGEABLE = 0.1
"""The limit's own error must be below this share of CLOSE_TO_OWN_LIMIT (relative) for a
distance below that threshold to verify the claim."""


def network_evidence(result: NetworkLimit) -> Evidence | None:
    """Refuted when a decision changes in the limit, or when there is no limit (NO-LIMIT);
    qualified when no decision changes but the distance is above CLOSE_TO_OWN_LIMIT (or
    when the limit check finds a Cauchy sequence the suite has no flow for); verified
    otherwise. A readout that takes no decisions leaves the outputs alone to judge; a limit
    check that cannot decide is no evidence (None)."""
    name = Path(result.source).name
    if result.no_limit is not None:
        check = result.no_limit
        if check.verdict == OrderVerdict.UNDECIDED:
            return None
        verdict = (
            ClaimVerdict.REFUTED
            if check.verdict == OrderVerdict.NO_LIMIT
            else ClaimVerdict.QUALIFIED
        )
        return Evidence(
            Claim.TRAINED_NEAR_LIMIT,
            verdict,
            f"{name}: no limit to measure against (post-LN per-feature norms): the refined "
            f"network's sequence is {check.verdict} ({check.reason})",
        )
    changed, distance = result.limit_decisions_changed, result.network_distance
    if changed is not None and changed > 0:
        verdict = ClaimVerdict.REFUTED
    else:
        verdict = verified_or(_close(result), ClaimVerdict.QUALIFIED)
    if changed is None:
        judged = " (outputs alone: the readout takes none)"
        rule = f"close: below {CLOSE_TO_OWN_LIMIT:g}"
    else:
        judged = f", {changed} of {result.decisions} decisions changed"
        rule = f"close: below {CLOSE_TO_OWN_LIMIT:g} and none changed"
    return Evidence(
        Claim.TRAINED_NEAR_LIMIT,
        verdict,
        f"{name}: relative distance {distance:.3g} from its limit at dt = 1{judged} "
        f"({rule}, with the limit's own error below {JUDGEABLE:g} of that: "
        f"{result.limit_error:.2g} absolute)",
    )


def _close(result: NetworkLimit) -> bool:
    """Whether the network's outputs are close to its limit: the relative distance at
    dt = 1 below CLOSE_TO_OWN_LIMIT, with the limit's own error small enough to tell."""
    judgeable = result.limit_error <= JUDGEABLE * CLOSE_TO_OWN_LIMIT * result.limit_size
    return result.network_distance <= CLOSE_TO_OWN_LIMIT and judgeable


def _scored(accuracy: float | None, loss: float | None) -> str:
    """'accuracy a, loss l nats' from what was measured ('' if nothing)."""
    parts = [] if accuracy is None else [f"accuracy {cell(accuracy)}"]
    parts += [] if loss is None else [f"loss {cell(loss, 4)} nats"]
    return ", ".join(parts)


def _meaning(result: NetworkLimit) -> str:
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
        last = result.methods[0].decisions_changed
        moved = (
            ""
            if last is None
            else f"; {last[-1]} of {result.decisions} decisions change at the finest level"
        )
        return (
            "Its post-LN per-feature norms give no time-step limit (NO-LIMIT above), so the "
            f"continuous reading has no flow that this network discretises{moved}."
        )
    changed, distance, close = (
        result.limit_decisions_changed,
        result.network_distance,
        _close(result),
    )
    if changed is not None and changed > 0:
        own = _scored(result.network_accuracy, result.network_loss)
        there = _scored(result.limit_accuracy, result.limit_loss)
        scores = (
            f", and its scores ({own}) belong to the discrete network at dt = 1, not to the "
            f"continuous model ({there} there)"
            if own
            else ""
        )
        return (
            f"{changed} of {result.decisions} decisions differ in the limit: the network is "
            f"not close to the flow the paper reads it as a step of{scores}."
        )
    if changed is None:
        if close:
            return (
                "The network's outputs are close to its limit: the continuous reading "
                "describes its states."
            )
        return (
            f"The network's outputs are not shown close to its limit (relative distance "
            f"{distance:.3g}; close means below {CLOSE_TO_OWN_LIMIT:g}, with the limit's own "
            "error small enough to tell)."
        )
    if close:
        return (
            "The network is close to its limit and no decision changes: the continuous "
            "reading describes it."
        )
    return (
        "No decision changes in the limit, but the outputs are not shown close to it: the "
        "continuous reading describes the decisions, not the states."
    )


def _levels_table(result: NetworkLimit) -> tuple[list[str], list[list[str]]]:
    """Per method and level: the distance, and what the readout measured (if anything)."""
    first = result.methods[0]
    columns = []
    if first.relative_distance is not None:
        columns.append(("relative distance", "relative_distance"))
    if first.decisions_changed is not None:
        columns.append(("decisions changed", "decisions_changed"))
    if first.accuracy is not None:
        columns += [("accuracy", "accuracy"), ("loss (nats)", "loss")]
    headers = ["method", "steps per unit", *(name for name, _ in columns)]
    rows = []
    for levels in result.methods:
        for i, m in enumerate(result.steps_per_unit):
            values = [getattr(levels, key) for _, key in columns]
            rows.append(
                [levels.method, str(m)]
                + [
                    cell(None if v is None else v[i], 4 if key == "loss" else 3)
                    for v, (_, key) in zip(values, columns, strict=True)
                ]
            )
    return headers, rows


def _summary(result: NetworkLimit) -> list[str]:
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
        parts = [f"the reference's assessed error {result.limit_error:.2g}"]
        measured = []
        if result.limit_decisions_changed is not None:
            measured.append(
                f"{result.limit_decisions_changed} of {result.decisions} decisions changed"
            )
        scores = _scored(result.limit_accuracy, result.limit_loss)
        if scores:
            own = _scored(result.network_accuracy, result.network_loss)
            measured.append(f"{scores} (the network's own: {own})")
        tail = f": {', '.join(measured)}" if measured else ""
        lines.append(
            f"Its time-step limit ({parts[0]}) lies at relative distance "
            f"{result.network_distance:.3g} from the network{tail}."
        )
    else:
        check = result.no_limit
        lines.append(f"No limit to measure against: {check.verdict} ({check.reason}).")
    twin = f"; the smooth twin is at relative distance {result.smooth_twin_distance:.3g}"
    if result.smooth_twin_decisions_changed is not None:
        twin += (
            f" and changes {result.smooth_twin_decisions_changed} of {result.decisions} decisions"
        )
    lines.append(
        "Depth smoothness, relative change between consecutive layers: "
        + (", ".join(f"{c:.3g}" for c in result.depth_change) or "one layer, none")
        + twin
        + "."
    )
    lines.append(_meaning(result))
    return lines


def _fitted(result: NetworkLimit) -> list:
    """The methods whose relative distance has a fitted order (the levels near the limit)."""
    return [lv for lv in result.methods if lv.order is not None]


def _judge(records: list[Record[NetworkLimit]]) -> Judgement:
    """Every figure the section prints as a figure of merit (network_merit), and
    `network_evidence` (none when the limit check cannot decide)."""
    done = [r for r in records if r.ok]
    if not done:
        return Judgement()
    result = done[0].result
    evidence = [e for e in [network_evidence(result)] if e is not None]
    return Judgement(evidence, network_merit(result, done[0].label))


def _render(title: str, records: list[Record[NetworkLimit]]) -> Section:
    done = results(records)
    if not done:
        return Section(title, "No finished case.\n")
    result = done[0]
    headers, rows = _levels_table(result)
    markdown, latex = "\n\n".join(_summary(result)), ""
    if len(headers) > 2:  # something was measured per level
        markdown += "\n\n" + markdown_table(headers, rows)
        latex = latex_table(title, headers, rows)
    fitted = _fitted(result)
    if fitted:
        order_rows = [[lv.method, *order_cells(lv.order), lv.order.reason] for lv in fitted]
        order_headers = ["method", *ORDER_HEADERS, "reason"]
        markdown += (
            "\n\nOrders of the relative distance against dt = 1 / (steps per unit), over the "
            f"levels within {ASYMPTOTIC:g} of the limit, its assessed error as the floor:\n\n"
            + markdown_table(order_headers, order_rows)
        )
        latex += latex_table(f"{title}: orders", order_headers, order_rows)
    unfitted = [lv for lv in result.methods if lv.order is None and lv.relative_distance]
    if unfitted:
        markdown += "\n\n" + " ".join(
            f"No order for {lv.method}: {sum(e <= ASYMPTOTIC for e in lv.relative_distance)} "
            f"of its {len(lv.relative_distance)} levels lie within {ASYMPTOTIC:g} of the limit, "
            "and a fit needs 3 there."
            for lv in unfitted
        )
    steps = [float(m) for m in result.steps_per_unit]
    figures = []
    series = [
        (lv.method, steps, lv.relative_distance)
        for lv in result.methods
        if lv.relative_distance is not None
    ]
    if series:  # a limit to measure against
        figures.append(
            Figure(
                slug(f"{title} distance"),
                "Relative distance from the time-step limit against steps per unit.",
                lines_figure(title, "steps per unit", "relative distance", series),
            )
        )
    if result.methods[0].decisions_changed is not None:
        series = [
            (lv.method, steps, [float(c) for c in lv.decisions_changed]) for lv in result.methods
        ]
        figures.append(
            Figure(
                slug(f"{title} decisions"),
                "Decisions changed (against the network's own) against steps per unit.",
                lines_figure(title, "steps per unit", "decisions changed", series, logy=False),
            )
        )
    if result.methods[0].loss is not None:
        series = [(lv.method, steps, lv.loss) for lv in result.methods]
        figures.append(
            Figure(
                slug(f"{title} loss"),
                "Cross-entropy loss (nats) against steps per unit.",
                lines_figure(title, "steps per unit", "loss (nats)", series, logy=False),
            )
        )
    return Section(title, markdown, figures, latex)


NETWORK_LIMIT = Experiment(
    "network-limit",
    "a trained network (model file or directory) against its own time-step limit",
    FIELDS,
    network_cases,
    {"network-limit": CaseKind(_run, NetworkLimit)},
    _render,
    _judge,
    check_network,
)
