"""Render a study's stored records: report.md, report.html, figures, results.json, tables.tex.

Everything comes from the records in the result store, so re-rendering needs no
recomputation. Each experiment's kind renders its own Section; the claims table gathers
their evidence per claim of the paper: refuted if any evidence refutes it, qualified if
any qualifies it, verified if all verify it, "no evidence" if no experiment spoke to it.
"""

from __future__ import annotations

import base64
import html
import io
import json
import platform
from pathlib import Path
from typing import Any

from reports.experiments import EXPERIMENTS
from reports.experiments.base import Record, Section
from reports.store import write_atomically
from reports.study import Study
from reports.tables import latex_table, markdown_table
from solvers.provenance import versions

PAPER_CLAIMS = (
    "Layer norm (eps = 0, scalar gain) is the projection onto S1 (Theorem 3.1)",
    "Torch-style layer norm (eps > 0 or per-feature gain and bias) is that projection",
    "ReLU is the projection onto the non-negative orthant",
    "The discretised equation (Lie, dt = 1) is exactly the Transformer",
    "Multi-head attention is covered",
    "The paper's six sub-steps are the post-LN layer",
    "The Lie scheme (the Transformer) is a first-order discretisation of the flow",
    "The time-step limit exists (continuous limit in time)",
    "The time-step limit exists with torch-style LN (eps > 0, scalar gain)",
    "The time-step limit exists with per-feature LN gain and bias",
    "The grid discretisation converges to the continuous attention operator",
    "High precision moves the rounding floor below the truncation error",
    "The equation is well posed: u(T) depends continuously on data and controls",
    "A trained-size Transformer is close to its continuous (time-step) limit",
    "Near constant rows the LN projection is ill-conditioned: Lipschitz ~ sigma2 / std",
    "Step-size stability follows the linearised flow where the linearisation applies",
    "The framework covers the Vision Transformer (pre-LN, GELU)",
    "The ViT's time-step limit exists, with the schemes' orders",
    "The framework covers the Convolutional vision Transformer (CvT)",
    "The CvT's time-step limit exists, with the schemes' orders",
    "The vision flows have a token-grid limit (the network converges as its grid refines)",
)
FILES = ("report.md", "report.html", "results.json", "tables.tex", "figures/")


def sections(study: Study, records: dict[str, Record]) -> list[Section]:
    """One Section per experiment of the study, from its stored records."""
    out, order = [], {case.id: k for k, case in enumerate(study.cases())}
    ordered = sorted(records.values(), key=lambda r: order.get(r["id"], len(order)))
    for spec in study.experiments:
        mine = [r for r in ordered if r["experiment"] == spec.name]
        section = EXPERIMENTS[spec.kind].render(spec.name, mine)
        failed = [r for r in mine if r["status"] != "ok"]
        if failed:
            section.markdown += "\n**Failed cases:**\n\n" + "".join(
                f"- `{r['id']}`: {r['error']}\n" for r in failed
            )
        out.append(section)
    return out


def claims_table(all_sections: list[Section]) -> list[list[str]]:
    """Rows claim, verdict, evidence, in the order of PAPER_CLAIMS (then any others)."""
    gathered: dict[str, list] = {}
    for section in all_sections:
        for item in section.evidence:
            gathered.setdefault(item.claim, []).append((section.title, item))
    rows = []
    for claim in [*PAPER_CLAIMS, *(c for c in gathered if c not in PAPER_CLAIMS)]:
        items = gathered.get(claim, [])
        verdicts = {item.verdict for _, item in items}
        verdict = (
            "no evidence"
            if not items
            else "refuted"
            if "refuted" in verdicts
            else "qualified"
            if "qualified" in verdicts
            else "verified"
        )
        evidence = "; ".join(f"{title}: {item.evidence}" for title, item in items) or "-"
        rows.append([claim, verdict, evidence])
    return rows


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


def render_report(study: Study, records: dict[str, Record], out: str | Path) -> dict[str, Any]:
    """Write every output file into `out`; return the results.json content."""
    out = Path(out)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    parts = sections(study, records)
    claims = claims_table(parts)
    failed = sum(r["status"] != "ok" for r in records.values())
    header = {
        "study": study.name,
        "source": study.source,
        "seed": study.seed,
        "cases": len(records),
        "failed cases": failed,
        "compute time": f"{sum(r['wall_time'] for r in records.values()):.1f} s",
        "machine": platform.machine(),
        **versions(),
    }
    md = [f"# {study.name}\n", study.description + "\n" if study.description else ""]
    md.append("".join(f"- {k}: {v}\n" for k, v in header.items()) + "\n")
    md.append(
        "## Claims of the paper\n\n" + markdown_table(["claim", "verdict", "evidence"], claims)
    )
    body = [f"<h1>{html.escape(study.name)}</h1>", f"<p>{html.escape(study.description)}</p>"]
    body.append(
        "<ul>"
        + "".join(f"<li>{html.escape(f'{k}: {v}')}</li>" for k, v in header.items())
        + "</ul>"
    )
    body.append(
        "<h2>Claims of the paper</h2>" + _html_table(["claim", "verdict", "evidence"], claims)
    )
    latex = [latex_table("Claims of the paper", ["claim", "verdict", "evidence"], claims)]
    for section in parts:
        md.append(f"## {section.title}\n\n{section.markdown}\n")
        body.append(f"<h2>{html.escape(section.title)}</h2>" + _markdown_to_html(section.markdown))
        latex.append(section.latex)
        for figure in section.figures:
            png = _png(figure.figure)
            (out / "figures" / f"{figure.name}.png").write_bytes(png)
            figure.figure.savefig(out / "figures" / f"{figure.name}.svg", format="svg")
            md.append(f"![{figure.caption}](figures/{figure.name}.png)\n\n*{figure.caption}*\n\n")
            encoded = base64.b64encode(png).decode()
            body.append(
                f'<figure><img alt="{html.escape(figure.caption)}" '
                f'src="data:image/png;base64,{encoded}"><figcaption>'
                f"{html.escape(figure.caption)}</figcaption></figure>"
            )
    results = {
        "provenance": header,
        "claims": [dict(zip(("claim", "verdict", "evidence"), row, strict=True)) for row in claims],
        "figures_of_merit": {s.title: s.figures_of_merit for s in parts},
        "cases": list(records.values()),
    }
    write_atomically(out / "report.md", "".join(md))
    write_atomically(out / "report.html", _page(study.name, "\n".join(body)))
    write_atomically(out / "tables.tex", "\n".join(latex))
    write_atomically(out / "results.json", json.dumps(results, indent=1) + "\n")
    return results


def _html_table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _markdown_to_html(text: str) -> str:
    """The small Markdown subset the sections use: pipe tables, bullets and paragraphs."""
    blocks, lines = [], text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                if not set(lines[i]) <= set("|-: "):
                    rows.append(
                        [c.strip().replace("\\|", "|") for c in lines[i].strip("|").split(" | ")]
                    )
                i += 1
            blocks.append(_html_table(rows[0], rows[1:]))
            continue
        if line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{html.escape(lines[i][2:])}</li>")
                i += 1
            blocks.append("<ul>" + "".join(items) + "</ul>")
            continue
        if line.strip():
            blocks.append(f"<p>{html.escape(line)}</p>")
        i += 1
    return "\n".join(blocks)


def _page(title: str, body: str) -> str:
    style = (
        "body{font-family:sans-serif;max-width:70em;margin:2em auto;line-height:1.4}"
        "table{border-collapse:collapse;margin:1em 0;font-size:90%}"
        "td,th{border:1px solid #bbb;padding:0.2em 0.5em;text-align:left}"
        "th{background:#eee}img{max-width:100%}figcaption{font-style:italic}"
    )
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{style}</style></head><body>\n{body}\n</body></html>\n"
    )
