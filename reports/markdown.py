"""Render claim checks as a Markdown report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from properties.claim_check import ClaimCheck


def _configuration(configuration: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in configuration.items())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_claims_table(rows: Sequence[tuple[ClaimCheck, str]]) -> str:
    """A Markdown table: claim, configuration, verdict (and whether MODEL.md predicted it),
    measured defect, tolerance. `rows` pairs each check with its predicted verdict."""
    lines = [
        "| claim | configuration | verdict | predicted | measured defect | tolerance |",
        "|---|---|---|---|---|---|",
    ]
    for check, predicted in rows:
        mark = (
            "as predicted" if check.verdict == predicted else f"**NOT AS PREDICTED** ({predicted})"
        )
        lines.append(
            f"| {_cell(check.claim)} | {_cell(_configuration(check.configuration))} | "
            f"{check.verdict} | {mark} | {check.defect:.3e} | {check.tolerance:.3e} |"
        )
    return "\n".join(lines) + "\n"


def render_report(rows: Sequence[tuple[ClaimCheck, str]], header: dict[str, str]) -> str:
    """The whole report.md: provenance, a summary, and the claims table."""
    unexpected = sum(check.verdict != predicted for check, predicted in rows)
    provenance = "\n".join(f"- {key}: {value}" for key, value in header.items())
    summary = (
        f"{len(rows)} checks; {len(rows) - unexpected} as MODEL.md predicts"
        + (f"; **{unexpected} not as predicted**" if unexpected else "")
        + "."
    )
    return (
        "# tide-suite report: the paper's exactness claims\n\n"
        f"{provenance}\n\n{summary}\n\n"
        "A claim *holds* when its measured defect is at most the tolerance derived from the "
        "unit roundoff of the precision it ran in. Where MODEL.md predicts a failure (layer "
        "norm with eps > 0 or per-feature gain and bias is not a projection), the defect is "
        "the measured size of the departure.\n\n"
        "## Claims\n\n" + render_claims_table(rows)
    )
