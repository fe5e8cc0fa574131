"""What an experiment kind is: its keys, how it splits into cases, how a case runs, and
how its finished cases are rendered.

A study file's [[experiment]] table names a `kind` (a registered Experiment) and the
kind's keys. `cases(params)` turns the checked keys into independent cases, each a
label and plain JSON parameters; `run(case_params, seed)` computes one case in any
process and returns plain JSON data; `render(records)` turns the stored records of
one experiment into a report Section (Markdown, figures, LaTeX rows, claim evidence).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from reports.schema import Field


def slug(text: str) -> str:
    """A file-name-safe form of a title: lower case, runs of other characters as '-'."""
    kept = "".join(c if c.isalnum() else "-" for c in text.lower())
    return "-".join(part for part in kept.split("-") if part)


Record = dict[str, Any]
"""A stored case: id, experiment, kind, label, params, seed, status, result or error."""


@dataclass
class Figure:
    """A named matplotlib figure of a report (saved as PNG and SVG, embedded in HTML)."""

    name: str
    caption: str
    figure: Any


@dataclass
class Evidence:
    """A claim of the paper, the verdict this experiment supports, and why."""

    claim: str
    verdict: str  # "verified", "qualified" or "refuted"
    evidence: str


@dataclass
class Section:
    """One experiment's part of the report."""

    title: str
    markdown: str
    figures: list[Figure] = field(default_factory=list)
    latex: str = ""
    evidence: list[Evidence] = field(default_factory=list)
    figures_of_merit: dict[str, Any] = field(default_factory=dict)
    """Numbers a baseline keeps: {name: {"value": x, "low": a, "high": b}}; see baseline.py."""


def order_merit(estimate: dict[str, Any]) -> dict[str, Any]:
    """The figure of merit of a stored OrderEstimate: its order, 95% interval and verdict
    (reports.baseline keeps it inside the interval)."""
    low, high = estimate["interval"]
    return {"value": estimate["order"], "low": low, "high": high, "verdict": estimate["verdict"]}


@dataclass(frozen=True)
class Experiment:
    kind: str
    summary: str
    fields: dict[str, Field]
    cases: Callable[[dict[str, Any]], list[tuple[str, dict[str, Any]]]]
    run: Callable[[dict[str, Any], int], dict[str, Any]]
    render: Callable[[str, list[Record]], Section]
