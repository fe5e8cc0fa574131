"""The depth-family section: per family its verdict, a table of its members and its rates,
and two figures over every family of the experiment: the own-flow and family distances
against L, and the weight increments against L, each with a slope of rate 1 drawn
(docs/depth.md sections 2 to 5). It only draws: the evidence and the figures of merit are
judged apart."""

from __future__ import annotations

from convergence.depth_family import DepthFamily, FittedRate
from convergence.network_limit import ASYMPTOTIC
from convergence.network_limit.batch import Share
from reports.experiments.base import Record, Section
from reports.figures import Figure, lines_figure
from reports.tables import latex_table, markdown_table, slug
from reports.tables import number as cell

MEMBER_HEADERS = [
    "L",
    "h",
    "own-flow distance",
    "flow's error",
    "family distance",
    "largest increment",
    "variation",
    "accuracy",
    "loss (nats)",
    "changed in the flow [95%]",
    "changed by the next [95%]",
]
RATE_HEADERS = ["family", "sequence", "rate", "95% interval", "verdict", "members", "reason"]
SEQUENCES = (
    ("own_flow_rate", "own-flow distance"),
    ("family_rate", "family distance"),
    ("increment_rate", "largest increment"),
)


def _share(s: Share | None) -> str:
    return "-" if s is None else f"{s.count} [{cell(s.low)}, {cell(s.high)}]"


def _member_rows(result: DepthFamily) -> list[list[str]]:
    return [
        [
            str(m.depth),
            cell(m.step),
            cell(m.own_flow_distance),
            f"{m.own_flow_error:.2g}",
            cell(m.family_distance),
            cell(m.weight_increment),
            cell(m.weight_variation),
            cell(m.accuracy),
            cell(m.loss, 4),
            _share(m.flow_decisions_changed),
            _share(m.next_decisions_changed),
        ]
        for m in result.members
    ]


def _rate_row(family: str, sequence: str, rate: FittedRate) -> list[str]:
    lo, hi = rate.interval
    return [
        family,
        sequence,
        cell(rate.rate),
        "-" if rate.verdict is None else f"[{lo:.3f}, {hi:.3f}]",
        str(rate.verdict or "not fitted"),
        ", ".join(map(str, rate.depths)) or "none",
        rate.reason if rate.fitted_by is None else f"{rate.fitted_by}: {rate.reason}",
    ]


def _guide(depths: list[int], through: float) -> tuple[str, list[float], list[float]]:
    """A line of rate 1 through the finest member's value: v L_f / L."""
    finest = depths[-1]
    return "rate 1", [float(L) for L in depths], [through * finest / L for L in depths]


def _figures(title: str, families: list[tuple[str, DepthFamily]]) -> list[Figure]:
    distances, increments = [], []
    for name, r in families:
        depths = [m.depth for m in r.members]
        distances.append((f"{name}: own flow", depths, [m.own_flow_distance for m in r.members]))
        deeper = [m for m in r.members if m.family_distance is not None]
        distances.append(
            (f"{name}: family", [m.depth for m in deeper], [m.family_distance for m in deeper])
        )
        rough = [m for m in r.members if m.weight_increment is not None]
        increments.append((name, [m.depth for m in rough], [m.weight_increment for m in rough]))
    first = families[0][1].members
    figures = [
        Figure(
            slug(f"{title} distances"),
            "Each member's relative distance from its own flow (own flow) and from the next "
            "deeper member (family) against its depth L, with a line of rate 1 (dashed) "
            f"through the first family's deepest member; within {ASYMPTOTIC:g} the rates "
            "are fitted.",
            lines_figure(
                title,
                "depth L",
                "relative distance",
                distances,
                guides=[_guide([m.depth for m in first], first[-1].own_flow_distance)],
            ),
        )
    ]
    _, x, y = increments[0]
    if x and y[-1] > 0:
        figures.append(
            Figure(
                slug(f"{title} increments"),
                "The largest relative increment of the unscaled weights between consecutive "
                "layers, max_k |theta_{k+1} - theta_k| / max_k |theta_k|, against the depth L, "
                f"with a line of rate 1 (dashed) through the {families[0][0]} family's deepest "
                "member.",
                lines_figure(
                    title,
                    "depth L",
                    "largest weight increment",
                    increments,
                    guides=[_guide(x, y[-1])],
                ),
            )
        )
    return figures


def render(title: str, records: list[Record[DepthFamily]]) -> Section:
    families = [(r.label, r.result) for r in records if r.ok]
    if not families:
        return Section(title, "No finished case.\n")
    markdown, latex = [], ""
    for name, r in families:
        first, last = r.members[0], r.members[-1]
        judged = (
            ""
            if r.decisions is None
            else f", {r.decisions} decisions each"
            + ("" if r.targets is None else f" against {r.targets}")
        )
        markdown.append(
            f"Family **{name}**: {len(r.members)} members, L = {first.depth} to {last.depth} "
            f"(each {r.depth_ratio} x the one before), residual branches scaled by h = T / L "
            f"with T = {r.horizon:g}, on {r.batch} inputs of {r.tokens} tokens{judged}. "
            f"Verdict: **{r.verdict}** ({r.reason})."
        )
        markdown.append(markdown_table(MEMBER_HEADERS, _member_rows(r)))
        latex += latex_table(f"{title}: {name}", MEMBER_HEADERS, _member_rows(r))
    rows = [
        _rate_row(name, sequence, getattr(r, what))
        for name, r in families
        for what, sequence in SEQUENCES
    ]
    markdown.append(
        "Rates in 1 / L (the order estimator of docs/orders.md section 4; the distances over "
        f"the members within {ASYMPTOTIC:g}, the own flows' error as the floor; where the "
        "estimator fits no order, the least-squares slope over every member):"
    )
    markdown.append(markdown_table(RATE_HEADERS, rows))
    latex += latex_table(f"{title}: rates", RATE_HEADERS, rows)
    return Section(title, "\n\n".join(markdown) + "\n", _figures(title, families), latex)
