"""The `tide` command.

    tide report [STUDY ...] [--out DIR] [--jobs N | --scheduler ADDR | --dask-local N] [--resume]
    tide render [--study STUDY] --out DIR       re-render from the stored results alone
                                                (the study they were run with by default)
    tide list                                   experiment kinds, problems keys, methods, backends
    tide baseline save DIR [STUDY] [--results DIR2]  store the figures of merit with tolerances
    tide check --baseline DIR [STUDY]           recompute and compare with a baseline
    tide --version

`baseline save` and `check` judge the records (reports.judging) and draw nothing: they
never import matplotlib. `check` stores the recomputed cases in its --out, from which
`tide render --study STUDY --out DIR` writes the report.

Exit codes: 0 success (a report is written whatever its verdicts say); 1 a tide-suite
error (a bad study file, checked before anything runs: the message names it), a case
that failed while running (the report is still written, with the failure under "Failed
cases"), or `tide check` found a difference from the baseline; 2 a usage error; 130
interrupted; `render` exits 2 (one line) on results that belong to no study it can find
rather than render empty sections over a report.
"""

from __future__ import annotations

import argparse
import sys
import time
from importlib.metadata import version
from pathlib import Path

from reports.baseline import check_against, load_baseline, save_baseline
from reports.claims import NO_EVIDENCE
from reports.experiments import EXPERIMENTS
from reports.problems import PROBLEM_FIELDS
from reports.render import FILES, render_report
from reports.runner import run_study
from reports.store import ResultStore, remember_study, remembered_study, stored_records
from reports.study import Study, default_study, load_study
from solvers.backends import REGISTRY
from solvers.errors import TideError
from solvers.solving import METHODS


def _studies(paths: list[str]) -> list[tuple[Study, str | None]]:
    """Each study with the file it was read from (None: the built-in study)."""
    return [(load_study(p), p) for p in paths] if paths else [(default_study(), None)]


def _study(path: str | None) -> Study:
    return load_study(path) if path else default_study()


def _out_for(base: Path, study: Study, several: bool) -> Path:
    if not several:
        return base
    return base / "".join(c if c.isalnum() or c in "-_" else "-" for c in study.name)


def _run(args: argparse.Namespace, study: Study, source: str | None, out: Path) -> dict:
    store = ResultStore(out)
    remember_study(out, study.name, source)
    records = run_study(
        study,
        store,
        jobs=args.jobs,
        scheduler=args.scheduler,
        dask_local=args.dask_local,
        resume=args.resume,
    )
    return render_report(study, records, out)


def _report(args: argparse.Namespace) -> int:
    studies = _studies(args.study)
    base = Path(args.out)
    started = time.perf_counter()
    failed = 0
    for study, source in studies:
        out = _out_for(base, study, len(studies) > 1)
        results = _run(args, study, source, out)
        verdicts = [c["verdict"] for c in results["claims"] if c["verdict"] != NO_EVIDENCE]
        tally = ", ".join(f"{verdicts.count(v)} {v}" for v in sorted(set(verdicts))) or "none"
        unjudged = len(results["claims"]) - len(verdicts)
        provenance = results["provenance"]
        failed += provenance["failed cases"]
        print(
            f"wrote {', '.join(str(out / f) for f in FILES)}: {provenance['cases']} cases "
            f"({provenance['failed cases']} failed); claims: {tally} ({unjudged} without "
            "evidence)",
            file=sys.stderr,
        )
    print(f"wall time {time.perf_counter() - started:.1f} s", file=sys.stderr)
    if failed:
        cases = "1 case" if failed == 1 else f"{failed} cases"
        print(
            f"tide: {cases} failed while running; the report lists them under 'Failed cases'",
            file=sys.stderr,
        )
        return 1
    return 0


def _render(args: argparse.Namespace) -> int:
    """Re-render the study the results belong to; refuse (exit 2) results that belong to
    no study found, or to another study than the one given, rather than write a report
    of empty sections over a good one."""
    records = stored_records(args.out)
    study, refusal = _study_of_results(args.out, args.study, records)
    if study is None:
        print(f"tide: error: {args.out}: {refusal}", file=sys.stderr)
        return 2
    render_report(study, records, args.out)
    print(f"rendered {args.out} ({study.name}) from {len(records)} stored cases", file=sys.stderr)
    return 0


def _study_of_results(
    out: str, given: str | None, records: dict[str, dict]
) -> tuple[Study | None, str]:
    """The study whose report the stored `records` make (`given`, else the one they
    remember, else the built-in study if they are its), or None and why not."""
    remembered = remembered_study(out)
    if given:
        study = load_study(given)
    elif remembered is None:  # stored before studies were recorded
        study = default_study()
    elif remembered["source"] is None:
        study = default_study()
    elif Path(remembered["source"]).is_file():
        study = load_study(remembered["source"])
    else:
        return None, (
            f"its results belong to study {remembered['name']!r}, whose file "
            f"{remembered['source']} is gone; give it with --study"
        )
    experiments = {spec.name for spec in study.experiments}
    stored = {r["experiment"] for r in records.values()}
    if not stored & experiments:
        return None, (
            f"none of its {len(records)} stored cases belongs to study {study.name!r} "
            f"(from {study.source}); give the study they were run with (--study)"
        )
    if remembered is not None and remembered["name"] != study.name:
        return None, (
            f"its results belong to study {remembered['name']!r}, not {study.name!r}; give "
            "the study they were run with (--study)"
        )
    return study, ""


def _list(args: argparse.Namespace) -> int:
    print("experiment kinds (study file: [[experiment]] kind = ...):")
    for kind, experiment in EXPERIMENTS.items():
        keys = ", ".join(experiment.fields) or "no keys"
        print(f"  {kind}: {experiment.summary}\n      keys: {keys}")
    print("problem keys (problem = { ... }):")
    for key, spec in PROBLEM_FIELDS.items():
        print(f"  {key} (default {spec.default!r})")
    print("methods: " + ", ".join(METHODS))
    backends = [
        name if factory.digits is None else f"{name} (digits {low} to {high})"
        for name, factory in REGISTRY.items()
        for low, high in [factory.digits or (None, None)]
    ]
    print("backends: " + ", ".join(backends))
    return 0


def _baseline(args: argparse.Namespace) -> int:
    study = _study(args.study)
    if args.results:
        records, source = stored_records(args.results), args.results
    else:
        source = str(Path(args.directory) / "run")
        remember_study(source, study.name, args.study)
        records = run_study(study, ResultStore(source), jobs=args.jobs)
    path = save_baseline(study, records, args.directory, source)
    print(f"saved {path}", file=sys.stderr)
    return 0


def _check(args: argparse.Namespace) -> int:
    baseline = load_baseline(args.baseline)
    study = _study(args.study)
    out = Path(args.out)
    remember_study(out, study.name, args.study)
    records = run_study(study, ResultStore(out), jobs=args.jobs, resume=args.resume)
    differences = check_against(baseline, study, records)
    if differences:
        print(f"tide check: {len(differences)} difference(s) from {args.baseline}:")
        for line in differences:
            print(f"  {line}")
        return 1
    print(f"tide check: every figure of merit within its baseline tolerance ({args.baseline})")
    return 0


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="run cases in N local processes (joblib/loky; default 1: serial)",
    )


def _add_study(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("study", nargs="?", metavar="STUDY", help="study file (default: built-in)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tide",
        description="Verify the Transformer read as an integro-differential equation.",
        epilog="Exit codes: 0 success; 1 a tide-suite error, a failed case or a baseline "
        "difference; 2 usage error; 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"tide {version('tide-suite')}")
    commands = parser.add_subparsers(dest="command", required=True)

    report = commands.add_parser(
        "report",
        help="run studies and write the report",
        description="Run each STUDY file (default: the built-in study) and write report.md, "
        "report.html, figures/ (PNG and SVG), results.json and tables.tex to --out. Each "
        "finished case is stored at once in DIR/cases/; --resume skips stored cases. "
        "Everything a study file can be checked for is checked before anything runs (exit "
        "1, one line naming the file and the key).",
        epilog="Exit status: 0 when every case finished (whatever the verdicts say); 1 when "
        "the study file is refused (nothing runs) or when a case failed while running (the "
        "report is still written, listing it under 'Failed cases'); 130 when interrupted "
        "(finished cases are kept: --resume).",
    )
    report.add_argument("study", nargs="*", metavar="STUDY", help="study TOML files")
    report.add_argument(
        "--out",
        default="tide-report",
        metavar="DIR",
        help="output folder (default: tide-report; one subfolder per study when several are given)",
    )
    _add_run_options(report)
    where = report.add_mutually_exclusive_group()
    where.add_argument(
        "--scheduler", metavar="ADDR", help="run on the Dask cluster at ADDR (e.g. tcp://host:8786)"
    )
    where.add_argument(
        "--dask-local",
        type=int,
        metavar="N",
        help="start a local Dask cluster of N workers on 127.0.0.1 (no public dashboard)",
    )
    report.add_argument(
        "--resume",
        action="store_true",
        help="keep the cases already stored in DIR and run only the others",
    )
    report.set_defaults(handler=_report)

    render = commands.add_parser(
        "render",
        help="re-render a report from stored results",
        description="Write the report files again from DIR/cases/ alone (no recomputation).",
    )
    render.add_argument(
        "--study",
        metavar="STUDY",
        help="the study file (default: the study the results were run with, recorded in "
        "DIR/study.json; exit 2 when the results belong to no study found)",
    )
    render.add_argument("--out", default="tide-report", metavar="DIR", help="the report folder")
    render.set_defaults(handler=_render)

    listing = commands.add_parser(
        "list", help="list experiment kinds, problem keys, methods and backends"
    )
    listing.set_defaults(handler=_list)

    baseline = commands.add_parser(
        "baseline",
        help="save a baseline of figures of merit",
        description="tide baseline save DIR [STUDY]: run the study (or read --results DIR) "
        "and store its figures of merit (orders with intervals, errors with tolerances) "
        "in DIR/baseline.json.",
    )
    baseline.add_argument("action", choices=["save"], help="what to do (save)")
    baseline.add_argument("directory", metavar="DIR", help="where to write baseline.json")
    _add_study(baseline)
    baseline.add_argument(
        "--results", metavar="DIR", help="use the results stored by `tide report --out DIR`"
    )
    _add_run_options(baseline)
    baseline.set_defaults(handler=_baseline)

    check = commands.add_parser(
        "check",
        help="recompute and compare with a baseline",
        description="Run the study and compare its figures of merit with --baseline: exit "
        "1 with a readable diff when an order leaves its interval or an error grows past "
        "its tolerance. The cases are stored in --out and judged without drawing; `tide "
        "render --study STUDY --out DIR` writes their report.",
    )
    check.add_argument("--baseline", required=True, metavar="DIR", help="a saved baseline")
    _add_study(check)
    check.add_argument(
        "--out",
        default="tide-check",
        metavar="DIR",
        help="where to store the recomputed results (default: tide-check)",
    )
    check.add_argument("--resume", action="store_true", help="reuse stored results in --out")
    _add_run_options(check)
    check.set_defaults(handler=_check)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except TideError as exc:
        print(f"tide: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("tide: interrupted; finished cases are stored (use --resume)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
