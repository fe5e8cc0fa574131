"""Tables for the report: Markdown and LaTeX from the same rows, order-estimate cells, and
the slugs that name figures and figures of merit."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from convergence.order import OrderEstimate


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(str(cell).replace("|", "\\|") for cell in row) + " |")
    return "\n".join(lines) + "\n"


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(c, c) for c in str(text))


def latex_table(caption: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A booktabs table (\\usepackage{booktabs})."""
    body = [
        r"\begin{table}[ht]",
        r"\centering",
        rf"\caption{{{latex_escape(caption)}}}",
        r"\begin{tabular}{" + "l" * len(headers) + "}",
        r"\toprule",
        " & ".join(latex_escape(h) for h in headers) + r" \\",
        r"\midrule",
        *(" & ".join(latex_escape(c) for c in row) + r" \\" for row in rows),
        r"\bottomrule",
        r"\end{tabular}",
        r"\end{table}",
    ]
    return "\n".join(body) + "\n"


def slug(text: str) -> str:
    """A file-name-safe form of a title: lower case, runs of other characters as '-'."""
    kept = "".join(c if c.isalnum() else "-" for c in text.lower())
    return "-".join(part for part in kept.split("-") if part)


def number(x: Any, digits: int = 3) -> str:
    """A float for a table cell (nan and None as an em dash)."""
    if x is None:
        return "-"
    x = float(x)
    return "-" if not math.isfinite(x) else f"{x:.{digits}g}"


def number_rows(*columns: Sequence[Any]) -> list[list[str]]:
    """Table rows of numbers, one column per sequence (all of one length)."""
    return [[number(x) for x in row] for row in zip(*columns, strict=True)]


def order_cells(estimate: OrderEstimate) -> list[str]:
    """order, 95% interval, verdict, expected, dropped levels."""
    lo, hi = estimate.interval
    interval = "-" if not math.isfinite(lo) else f"[{lo:.3f}, {hi:.3f}]"
    dropped = ", ".join(
        f"{level_name(estimate.hs[k])}: {v.split(':')[0]}" for k, v in estimate.dropped.items()
    )
    return [
        number(estimate.order, 4),
        interval,
        str(estimate.verdict),
        number(estimate.expected),
        dropped or "none",
    ]


def level_name(h: float) -> str:
    """A level by its step: "h = 1/m" where 1/h is a whole number m, else "h = h"."""
    m = round(1 / h)
    if m == 1 and math.isclose(h, 1.0):
        return "h = 1"
    return f"h = 1/{m}" if m >= 1 and math.isclose(1 / h, m, rel_tol=1e-9) else f"h = {h:.3g}"


ORDER_HEADERS = ["order", "95% interval", "verdict", "expected", "dropped levels"]
