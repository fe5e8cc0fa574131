"""The `tide` command.

    tide report [--out DIR]   run the built-in study and write DIR/report.md, DIR/results.json
    tide --version

Exit codes: 0 the report was written (whatever the verdicts); 1 a tide-suite error (the
message says what and where); 2 a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from reports.exactness import exactness_cases, run_exactness_study
from reports.markdown import render_report
from reports.precision_study import run_precision_study
from solvers.errors import TideError
from solvers.provenance import versions


def _write_atomically(path: Path, text: str) -> None:
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as handle:
        handle.write(text)
    os.replace(handle.name, path)


def _report(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cases = exactness_cases()
    rows = []
    started = time.perf_counter()
    for done, (case, checks) in enumerate(run_exactness_study(cases), start=1):
        rows += [(check, case.expectation) for check in checks]
        verdicts = ", ".join(sorted({c.verdict for c in checks}))
        print(f"[{done}/{len(cases)}] {case.label}: {verdicts}", file=sys.stderr, flush=True)
    rounding = []
    for norm in ("post", "pre"):
        rounding.append(run_precision_study(norm))
        print(f"rounding against depth, norm={norm}: done", file=sys.stderr, flush=True)
    wall = time.perf_counter() - started
    header = {**versions(), "machine": platform.machine(), "wall time": f"{wall:.2f} s"}
    _write_atomically(out / "report.md", render_report(rows, rounding, header))
    results = {
        "provenance": header,
        "checks": [dict(check.to_json(), predicted=predicted) for check, predicted in rows],
        "rounding_by_depth": [study.to_json() for study in rounding],
    }
    _write_atomically(out / "results.json", json.dumps(results, indent=2) + "\n")
    unexpected = sum(check.verdict != predicted for check, predicted in rows)
    print(
        f"wrote {out / 'report.md'} and {out / 'results.json'}: {len(rows)} checks, "
        f"{unexpected} not as predicted, {wall:.1f} s",
        file=sys.stderr,
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tide",
        description="Verify the Transformer read as an integro-differential equation.",
        epilog="Exit codes: 0 report written; 1 tide-suite error; 2 usage error.",
    )
    parser.add_argument("--version", action="version", version=f"tide {version('tide-suite')}")
    commands = parser.add_subparsers(dest="command", required=True)
    report = commands.add_parser(
        "report",
        help="run the built-in study and write a Markdown report",
        description="Run the paper's exactness claims on the built-in configurations and write "
        "report.md (claims table) and results.json (lossless data) to --out.",
    )
    report.add_argument(
        "--out", default="tide-report", metavar="DIR", help="output folder (default: tide-report)"
    )
    report.set_defaults(handler=_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except TideError as exc:
        print(f"tide: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
