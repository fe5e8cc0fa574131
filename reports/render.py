"""Render a study's stored records: report.md, report.html, figures, results.json, tables.tex.

Everything comes from the stored records, so re-rendering needs no recomputation. Each
experiment draws its own Section and judges its records apart (reports.judging); the
section joins the two. The claims table gives each registered claim the worst
verdict of its evidence (reports.claims). Claims no experiment spoke to are listed once,
in a sentence under the table, not as rows; results.json keeps every claim, those with
the verdict "no evidence".
"""

from __future__ import annotations

import base64
import html
import io
import json
import platform
from pathlib import Path
from typing import Any

from reports.claims import NO_EVIDENCE, Claim, combined
from reports.experiments.base import Section
from reports.judging import experiment_records
from reports.store import write_atomically
from reports.study import Study
from reports.tables import latex_escape, latex_table, markdown_table
from solvers.results.provenance import versions

FILES = ("report.md", "report.html", "results.json", "tables.tex", "figures/")


def sections(study: Study, records: dict[str, dict[str, Any]]) -> list[Section]:
    """One Section per experiment of the study, from its stored records (plain JSON, read
    back into typed records by the experiment): what its render draws, with its judgement."""
    out = []
    for spec, experiment, mine in experiment_records(study, records):
        section = experiment.render(spec.name, mine)
        section.judgement = experiment.judge(mine)
        failed = [r for r in mine if not r.ok]
        if failed:
            section.markdown += "\n**Failed cases:**\n\n" + "".join(
                f"- `{r.id}`: {r.error}\n" for r in failed
            )
        out.append(section)
    return out


def claims_table(all_sections: list[Section]) -> list[list[str]]:
    """Rows claim, verdict, evidence, one per registered Claim in registry order."""
    gathered: dict[Claim, list] = {claim: [] for claim in Claim}
    for section in all_sections:
        for item in section.judgement.evidence:
            gathered[item.claim].append((section.title, item))
    rows = []
    for claim, items in gathered.items():
        verdict = combined(item.verdict for _, item in items)
        evidence = "; ".join(f"{title}: {item.evidence}" for title, item in items) or "-"
        rows.append([claim.text, NO_EVIDENCE if verdict is None else str(verdict), evidence])
    return rows


def _evidenced(claims: list[list[str]]) -> tuple[list[list[str]], str]:
    """The claims table's rows with evidence, and the sentence that lists the others."""
    rows = [row for row in claims if row[1] != NO_EVIDENCE]
    missing = [row[0] for row in claims if row[1] == NO_EVIDENCE]
    if not missing:
        return rows, ""
    return rows, (
        f"No experiment of this study gives evidence on {len(missing)} of the "
        f"{len(claims)} claims: " + "; ".join(missing) + "."
    )


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


def render_report(
    study: Study, records: dict[str, dict[str, Any]], out: str | Path
) -> dict[str, Any]:
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
    rows, unjudged = _evidenced(claims)
    table = markdown_table(["claim", "verdict", "evidence"], rows) if rows else ""
    md.append("## Claims of the paper\n\n" + table + (f"\n{unjudged}\n" if unjudged else ""))
    body = [f"<h1>{html.escape(study.name)}</h1>", f"<p>{html.escape(study.description)}</p>"]
    body.append(
        "<ul>"
        + "".join(f"<li>{html.escape(f'{k}: {v}')}</li>" for k, v in header.items())
        + "</ul>"
    )
    body.append(
        "<h2>Claims of the paper</h2>"
        + (_html_table(["claim", "verdict", "evidence"], rows) if rows else "")
        + (f"<p>{html.escape(unjudged)}</p>" if unjudged else "")
    )
    latex = [latex_table("Claims of the paper", ["claim", "verdict", "evidence"], rows)]
    if unjudged:
        latex.append(latex_escape(unjudged) + "\n")
    for section in parts:
        md.append(f"## {section.title}\n\n{section.markdown}\n")
        body.append(f"<h2>{html.escape(section.title)}</h2>" + _markdown_to_html(section.markdown))
        latex.append(section.latex)
        for figure in section.figures:
            png = _png(figure.figure)
            (out / "figures" / f"{figure.name}.png").write_bytes(png)
            # the PNG's draw laid the axes out; the SVG keeps that layout (a second
            # constrained-layout pass costs as much as the drawing and moves nothing)
            figure.figure.set_layout_engine("none")
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
        "figures_of_merit": {s.title: s.judgement.figures_of_merit for s in parts},
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
