"""Render claim checks as a Markdown report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from convergence.rounding import BOUND_CONSTANT, RoundingByDepth
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


def render_rounding_table(
    study: RoundingByDepth, shown: Sequence[int] = (1, 2, 4, 8, 12, 16, 24)
) -> str:
    """Error after n layers in units of each format's u, the bound 8 sqrt(n) and the fit."""
    names = list(study.errors)
    depths = [n for n in shown if n in study.depths]
    lines = [
        "| layers | "
        + " | ".join(f"{name} error / u" for name in names)
        + f" | bound {BOUND_CONSTANT:g} sqrt(n) |",
        "|---|" + "---|" * (len(names) + 1),
    ]
    for n in depths:
        cells = [f"{study.errors[name][n - 1] / study.unit_roundoff[name]:.2f}" for name in names]
        lines.append(f"| {n} | " + " | ".join(cells) + f" | {BOUND_CONSTANT * np.sqrt(n):.1f} |")
    lines.append(
        "| fit c n^alpha | "
        + " | ".join(
            f"{study.fitted_constant[name]:.2f} n^{study.fitted_exponent[name]:.2f}"
            for name in names
        )
        + " | |"
    )
    lines.append(
        "| within bound | "
        + " | ".join("yes" if study.within_bound[n] else "**no**" for n in names)
        + " | |"
    )
    return "\n".join(lines) + "\n"


def render_report(
    rows: Sequence[tuple[ClaimCheck, str]],
    rounding: Sequence[RoundingByDepth],
    header: dict[str, str],
) -> str:
    """The whole report.md: provenance, a summary, the claims table, rounding against depth."""
    unexpected = sum(check.verdict != predicted for check, predicted in rows)
    provenance = "\n".join(f"- {key}: {value}" for key, value in header.items())
    summary = (
        f"{len(rows)} checks; {len(rows) - unexpected} as MODEL.md predicts"
        + (f"; **{unexpected} not as predicted**" if unexpected else "")
        + "."
    )
    rounding_sections = "".join(
        f"\n### norm = {study.configuration['norm']} (reference {study.reference}, "
        f"{study.configuration})\n\n" + render_rounding_table(study)
        for study in rounding
    )
    return (
        "# tide-suite report: the paper's exactness claims\n\n"
        f"{provenance}\n\n{summary}\n\n"
        "A claim *holds* when its measured defect is at most the tolerance derived from the "
        "unit roundoff of the precision it ran in. Where MODEL.md predicts a failure (layer "
        "norm with eps > 0 or per-feature gain and bias is not a projection), the defect is "
        "the measured size of the departure.\n\n"
        "## Claims\n\n" + render_claims_table(rows) + "\n## Rounding error against depth\n\n"
        "Relative max-abs error of each float format after n layers of a Transformer stack, "
        "against the same stack at 50 digits, in units of the format's unit roundoff u. "
        "Documented bound: 8 sqrt(n) u (see convergence.rounding).\n" + rounding_sections
    )
