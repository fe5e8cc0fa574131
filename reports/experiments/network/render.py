"""The network-limit section: the sentences (reports.experiments.network.sentences), per
method and level a table, the orders, which layer drives the distance, the network in
other number systems, and the figures with the expected slopes and the limit's own error
drawn (docs/networks.md sections 3 and 7). It only draws: the verdict and the figures of
merit are judged apart."""

from __future__ import annotations

from convergence.network_limit import ASYMPTOTIC, MethodLevels, NetworkLimit
from reports.experiments.base import Record, Section, results
from reports.experiments.network.sentences import (
    layer_sentence,
    levels_sentences,
    rounding_sentences,
    summary,
)
from reports.figures import Figure, lines_figure
from reports.tables import ORDER_HEADERS, latex_table, markdown_table, order_cells, slug
from reports.tables import number as cell


def _levels_table(result: NetworkLimit) -> tuple[list[str], list[list[str]]]:
    """Per method and level: the distance (the batch's and per input), and what the readout
    measured (if anything)."""
    first = result.methods[0]
    headers = ["method", "steps per unit"]
    if first.relative_distance is not None:
        headers += ["relative distance", "per input: median [min, max]"]
    if first.decisions_changed is not None:
        headers += [f"decisions changed, of {result.decisions} {result.decided_at} [95%]"]
    if first.accuracy is not None:
        headers += ["accuracy", "loss (nats)"]
    rows = []
    for levels in result.methods:
        asked = len(levels.steps_per_unit) - levels.refined
        for i, m in enumerate(levels.steps_per_unit):
            row = [levels.method, str(m) if i < asked else f"{m} (refined)"]
            if levels.relative_distance is not None:
                s = levels.distance_spread[i]
                row += [
                    cell(levels.relative_distance[i]),
                    f"{cell(s.median)} [{cell(s.low)}, {cell(s.high)}]",
                ]
            if levels.decisions_changed is not None:
                c = levels.decisions_changed[i]
                row += [f"{c.count} [{cell(c.low)}, {cell(c.high)}]"]
            if levels.accuracy is not None:
                row += [cell(levels.accuracy[i]), cell(levels.loss[i], 4)]
            rows.append(row)
    return headers, rows


LAYER_HEADERS = [
    "layer",
    "one-layer defect (relative)",
    "carried to the end (relative)",
    "share of the distance",
    "its error (absolute)",
]
ROUNDING_HEADERS = [
    "precision",
    "unit roundoff",
    "relative distance from float64",
    "per input: median [min, max]",
    "decisions changed [95%]",
    "within reach",
    "accuracy",
    "loss (nats)",
]


def _layer_rows(result: NetworkLimit) -> list[list[str]]:
    return [
        [str(s.layer), cell(s.defect), cell(s.contribution), cell(s.share), f"{s.error:.2g}"]
        for s in result.layers
    ]


def _rounding_rows(result: NetworkLimit) -> list[list[str]]:
    rows = []
    for r in result.rounding:
        c, s = r.decisions_changed, r.distance_spread
        rows.append(
            [
                r.precision,
                f"{r.unit_roundoff:.3g}",
                cell(r.relative_distance),
                f"{cell(s.median)} [{cell(s.low)}, {cell(s.high)}]",
                "-" if c is None else f"{c.count} [{cell(c.low)}, {cell(c.high)}]",
                cell(r.within_reach),
                cell(r.accuracy),
                cell(r.loss, 4),
            ]
        )
    return rows


def _slope_guide(levels: MethodLevels) -> tuple[str, list[float], list[float]]:
    """The method's expected order as a line through its finest level: d (m_f / m)^p."""
    p = levels.expected_order
    finest, distance = levels.steps_per_unit[-1], levels.relative_distance[-1]
    x = [float(m) for m in levels.steps_per_unit]
    return f"slope -{p:g} (order of {levels.method})", x, [distance * (finest / m) ** p for m in x]


def _figures(title: str, result: NetworkLimit) -> list[Figure]:
    figures = []
    limited = [lv for lv in result.methods if lv.relative_distance is not None]
    if limited:
        error = result.limit_error / result.limit_size
        figures.append(
            Figure(
                slug(f"{title} distance"),
                "Relative distance from the time-step limit against steps per unit, with each "
                "method's expected slope through its finest level (dashed) and the limit's own "
                f"relative error (dotted); within {ASYMPTOTIC:g} of the limit the order is fitted.",
                lines_figure(
                    title,
                    "steps per unit",
                    "relative distance",
                    [(lv.method, lv.steps_per_unit, lv.relative_distance) for lv in limited],
                    guides=[_slope_guide(lv) for lv in limited if lv.expected_order is not None],
                    levels=[("limit's own error", error)] if error > 0 else [],
                ),
            )
        )
    if result.methods[0].decisions_changed is not None:
        series = [
            (lv.method, lv.steps_per_unit, [float(c.count) for c in lv.decisions_changed])
            for lv in result.methods
        ]
        split = result.limit_decisions
        figures.append(
            Figure(
                slug(f"{title} decisions"),
                "Decisions changed (against the network's own) against steps per unit"
                + ("; dotted: the limit's." if split is not None else "."),
                lines_figure(
                    title,
                    "steps per unit",
                    "decisions changed",
                    series,
                    logy=False,
                    levels=[] if split is None else [("limit", float(split.changed.count))],
                ),
            )
        )
    if result.methods[0].loss is not None:
        series = [(lv.method, lv.steps_per_unit, lv.loss) for lv in result.methods]
        figures.append(
            Figure(
                slug(f"{title} loss"),
                "Cross-entropy loss (nats) against steps per unit"
                + ("; dotted: the limit's." if result.limit_loss is not None else "."),
                lines_figure(
                    title,
                    "steps per unit",
                    "loss (nats)",
                    series,
                    logy=False,
                    levels=[] if result.limit_loss is None else [("limit", result.limit_loss)],
                ),
            )
        )
    return figures


def render(title: str, records: list[Record[NetworkLimit]]) -> Section:
    done = results(records)
    if not done:
        return Section(title, "No finished case.\n")
    result = done[0]
    markdown, latex = "\n\n".join(summary(result)), ""

    def table(intro: str, name: str, headers: list[str], rows: list[list[str]]) -> None:
        nonlocal markdown, latex
        markdown += f"\n\n{intro}\n\n" + markdown_table(headers, rows)
        latex += latex_table(f"{title}{name}", headers, rows)

    headers, rows = _levels_table(result)
    if len(headers) > 2:  # something was measured per level
        parts = []
        if result.methods[0].relative_distance is not None:
            parts.append(
                "the relative distance is the batch's maximum; per input, the median and range "
                "over the inputs"
            )
        if result.methods[0].decisions_changed is not None:
            parts.append(
                "decisions changed against the network's own, with the 95% Wilson interval of "
                "their share"
            )
        table(f"Per method and level ({'; '.join(parts)}):", "", headers, rows)
    fitted = [lv for lv in result.methods if lv.order is not None]
    if fitted:
        table(
            "Orders of the relative distance against dt = 1 / (steps per unit), over the "
            f"levels within {ASYMPTOTIC:g} of the limit, its assessed error as the floor:",
            ": orders",
            [*["method"], *ORDER_HEADERS, "reason"],
            [[lv.method, *order_cells(lv.order), lv.order.reason] for lv in fitted],
        )
    said = levels_sentences(result)
    markdown += "\n\n" + " ".join(said) if said else ""
    leading = layer_sentence(result)
    if leading is not None:
        table(
            leading + " Per layer n, relative to |U_limit|: the defect of the Lie step "
            "against the layer's flow from the network's own state, and that defect carried "
            "to the final time by the later layers' flow; the carried defects add up to the "
            "network's distance as arrays, so their shares in the max norm need not sum to 1:",
            ": layers",
            LAYER_HEADERS,
            _layer_rows(result),
        )
    if result.rounding:
        table(
            "The network (dt = 1) in other number systems, against its float64 solve ("
            "within reach: the decisions that a move of every state entry by that distance "
            "could change). " + " ".join(rounding_sentences(result)),
            ": rounding",
            ROUNDING_HEADERS,
            _rounding_rows(result),
        )
    return Section(title, markdown, _figures(title, result), latex)
