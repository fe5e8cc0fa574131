"""Regenerate docs/reference-figures.md: the measured figures behind the error-controlled
reference's design (docs/schemes.md sections 7 and 8), each computed here from problems
defined here, against truths the reference did not produce.

    python -m benchmarks.reference_figures            # writes docs/reference-figures.md
    python -m benchmarks.reference_figures --quick    # fewer seeds, to a file of your own

1. The calibration of a step's estimate: seeded two-layer flows of every smooth kind
   (GELU, SiLU and gated SiLU; post-LN, pre-LN and no norm) and pre-LN ReLU, at five
   tolerances, against arb at 22 digits: how often the reported error falls below the
   true one, and how cautious it is.
2. The softmax's reach: a flow without norms whose state grows and whose attention
   switches keys within 1e-5 of time, with and without the cap on the steps, against
   arb at 22 digits.
3. The global estimate through depth: six-layer flows, carried alone and assessed
   (`assess=True`), against arb at 22 digits, and what the assessment costs.

Each section counts the runs it measured and the script fails if one measured none.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from solvers import LayerWeights, PiecewiseControls, Problem, backend, solve_reference
from solvers.equation.flow import LayerFlow
from solvers.errors import TideError
from solvers.methods.driver import integrate
from solvers.reference.controller import Work
from solvers.reference.layer_system import layer_system
from solvers.reference.method import ControlledReference, ReferenceRun
from tests.switching_flow import growing_gated_flow

SEEDS = 4
"""Seeds a kind in the calibration sweep (half as many in the depth sweep); --quick: 1."""
TRUTH = ("arb", 22)
"""The truth every sweep is measured against: the reference in arb at 22 digits (its
default tolerance, 1e-23), ten orders below the tightest tolerance measured."""
CALIBRATION_TOLERANCES = (1e-6, 1e-8, 1e-10, 1e-12, None)
DEPTH_TOLERANCES = (1e-6, 1e-8, 1e-10, None)
REACH_TOLERANCES = (1e-6, 1e-8, 1e-10, 1e-12)
KINDS = (
    ("gelu", "post", False),
    ("gelu", "pre", False),
    ("gelu", "none", False),
    ("silu", "post", False),
    ("silu", "pre", False),
    ("silu", "none", False),
    ("silu", "pre", True),
    ("silu", "none", True),
    ("relu", "pre", False),
)
"""(activation, placement, gated) of the calibration sweep."""
DEPTH_KINDS = (
    ("gelu", "none", False),
    ("silu", "none", False),
    ("gelu", "pre", False),
    ("gelu", "post", False),
    ("silu", "pre", True),
    ("relu", "pre", False),
)
"""The kinds of the depth sweep: the flows without norms, whose states grow, and one of
each norm placement and FFN form."""


def _problem(kind: tuple[str, str, bool], layers: int, d: int, tokens: int, seed: int):
    activation, norm, gated = kind
    rng = np.random.default_rng(seed)
    weights = [
        LayerWeights.random(d, 2, 2 * d, rng, activation=activation, gated=gated)
        for _ in range(layers)
    ]
    return Problem(rng.standard_normal((tokens, d)), PiecewiseControls(weights), layers, norm)


def _label(kind: tuple[str, str, bool]) -> str:
    activation, norm, gated = kind
    return f"{'gated ' if gated else ''}{activation}, {norm}"


def _errors(states: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """max |state - truth| at each layer boundary after the first."""
    gap = np.abs(np.asarray(states, dtype=np.float64) - truth)
    return gap.reshape(len(gap), -1).max(axis=1)[1:]


def _truths(problems: list[Problem], section: str) -> list[np.ndarray | None]:
    """The arb truth of each problem (None where the reference refuses it: it then says
    why on stderr and the problem is left out), with progress on stderr."""
    truths = []
    for k, problem in enumerate(problems, start=1):
        print(f"{section}: truth {k} of {len(problems)}", file=sys.stderr, flush=True)
        try:
            states = solve_reference(problem, backend=backend(*TRUTH)).states
        except TideError as error:
            print(f"{section}: problem {k} left out, its truth refused: {error}", file=sys.stderr)
            truths.append(None)
            continue
        truths.append(np.asarray(states, dtype=np.float64))
    return truths


def _measured(problems: list[Problem], section: str) -> list[tuple[Problem, np.ndarray]]:
    """The problems whose truth the reference gave, with it; fails if none did."""
    pairs = [(p, t) for p, t in zip(problems, _truths(problems, section), strict=True)]
    kept = [(p, t) for p, t in pairs if t is not None]
    if not kept:
        raise RuntimeError(f"{section}: no problem has a truth")
    return kept


def _ratios(problem, truth, tol, assess) -> tuple[np.ndarray | None, int]:
    """True error / reported error at each boundary of one float64 run, and its field
    evaluations; None and 0 where the run refuses (an IntegrationError, say)."""
    try:
        run = solve_reference(problem, tol, assess=assess)
    except TideError:
        return None, 0
    return _errors(run.states, truth) / np.asarray(run.error[1:]), run.evaluations


def _summary(measured: list[np.ndarray | None]) -> list[str]:
    """The sweep columns over the runs' boundaries: runs refused, boundaries, how many
    report less than their true error, the largest true / reported and the median
    reported / true."""
    refused = sum(r is None for r in measured)
    ratios = np.concatenate([r for r in measured if r is not None])
    below = int(np.sum(ratios > 1))
    with np.errstate(divide="ignore"):  # a boundary without error: reported / true is inf
        caution = float(np.median(1 / ratios))
    return [
        f"{refused}",
        f"{len(ratios)}",
        f"{below}",
        f"{np.max(ratios):.3g}",
        f"{caution:.3g}",
    ]


def calibration(seeds: range) -> Iterator[list[str]]:
    """Section 1: rows per tolerance over every kind and seed (two layers, d 4, 3 tokens)."""
    problems = [_problem(kind, 2, 4, 3, seed) for kind in KINDS for seed in seeds]
    measured = _measured(problems, "calibration")
    yield [f"{len(measured)} of {len(problems)}"]
    for tol in CALIBRATION_TOLERANCES:
        ratios, evaluations = [], 0
        for problem, truth in measured:
            r, e = _ratios(problem, truth, tol, assess=False)
            ratios.append(r)
            evaluations += e
        name = _tolerance(tol)
        yield [name, *_summary(ratios), f"{evaluations:,}"]


def _uncapped(problem: Problem, tol: float) -> tuple[np.ndarray, float, int]:
    """The reference's controller across the layers with the softmax's reach taken out of
    each layer's System: its final state, estimate and field evaluations."""
    bk = backend("float64")
    flow = LayerFlow.from_problem(problem, bk)
    run = ReferenceRun(
        ControlledReference(tol=tol).controller(bk, Work()),
        lambda flow, n: dataclasses.replace(layer_system(flow, n), caps=()),
    )
    states = integrate(problem, run, 1, flow)
    return np.asarray(states[-1]), run.errors[-1], run.work.evaluations


def reach() -> Iterator[list[str]]:
    """Section 2: rows per tolerance, with the cap and without it."""
    problem = growing_gated_flow()
    truth = _truths([problem], "reach")[0][-1]
    for tol in REACH_TOLERANCES:
        capped = solve_reference(problem, tol)
        state, estimate, evaluations = _uncapped(problem, tol)
        yield [
            _tolerance(tol),
            f"{np.abs(capped.states[-1] - truth).max():.2g}",
            f"{capped.error[-1]:.2g}",
            f"{capped.evaluations:,}",
            f"{np.abs(state - truth).max():.2g}",
            f"{estimate:.2g}",
            f"{evaluations:,}",
        ]


def depth(seeds: range) -> Iterator[list[str]]:
    """Section 3: rows per tolerance, carried alone and assessed (six layers, d 4 and 8,
    4 tokens), with the assessed runs' evaluations over the carried ones'."""
    problems = [_problem(k, 6, d, 4, seed) for k in DEPTH_KINDS for d in (4, 8) for seed in seeds]
    measured = _measured(problems, "depth")
    yield [f"{len(measured)} of {len(problems)}"]
    for tol in DEPTH_TOLERANCES:
        rows, costs = {False: [], True: []}, []
        for problem, truth in measured:
            evaluations = {}
            for assess in (False, True):
                ratios, evaluations[assess] = _ratios(problem, truth, tol, assess)
                rows[assess].append(ratios)
            if evaluations[True] and evaluations[False]:
                costs.append(evaluations[True] / evaluations[False])
        name = _tolerance(tol)
        for assess in (False, True):
            cost = (
                f"{np.median(costs):.2f} ({np.percentile(costs, 10):.2f} to "
                f"{np.percentile(costs, 90):.2f})"
                if assess
                else "1"
            )
            mode = "assessed" if assess else "carried"
            yield [name, mode, *_summary(rows[assess]), cost]


def _tolerance(tol: float | None) -> str:
    """A tolerance as the tables print it: 1e-8, or "default"."""
    return "default" if tol is None else f"{tol:.0e}".replace("e-0", "e-")


def _table(headers: list[str], rows: list[list[str]]) -> str:
    if not rows:
        raise RuntimeError(f"no runs measured for the table {headers}")
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


REACH_HEADERS = [
    "tol",
    "error",
    "estimate",
    "evaluations",
    "error, no cap",
    "estimate, no cap",
    "evaluations, no cap",
]
SWEEP_HEADERS = [
    "runs refused",
    "boundaries",
    "reported below true",
    "largest true / reported",
    "median reported / true",
]


def _machine() -> str:
    """The processor's model name (Linux's /proc/cpuinfo) and the number of cores."""
    name = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        models = [
            line for line in cpuinfo.read_text().splitlines() if line.startswith("model name")
        ]
        if models:
            name = models[0].split(":", 1)[1].strip()
    return f"{name}, {os.cpu_count()} cores"


def page(seeds: int) -> str:
    """The whole page, every figure measured now."""
    started = time.time()
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty"], capture_output=True, text=True, check=False
    ).stdout.strip()
    (calibration_count, *calibrated) = calibration(range(seeds))
    reached = list(reach())
    depth_seeds = max(1, seeds // 2)
    (depth_count, *deep) = depth(range(depth_seeds))
    depth_kinds = "; ".join(_label(k) for k in DEPTH_KINDS)
    quick = "" if seeds == SEEDS else " --quick"
    return f"""# The reference's measured figures

Generated by `python -m benchmarks.reference_figures{quick}` at commit {commit or "?"} on
{_machine()}, in {time.time() - started:.0f} s. Every figure below is measured by that
command; the derivations they check are in docs/schemes.md sections 7 and 8.

## 1. A step's estimate (docs/schemes.md section 7, "A step")

Two layers, d 4, two heads, d_ff 8, 3 tokens, t_final 2, seeds 0 to {seeds - 1}, for each of
{len(KINDS)} kinds ({"; ".join(_label(k) for k in KINDS)}): the float64 reference at each
tolerance against the reference in arb at 22 digits, at every layer boundary
({calibration_count[0]} problems had a truth; a run the float64 reference refuses is
counted, not measured).

{_table(["tol", *SWEEP_HEADERS, "field evaluations"], calibrated)}

## 2. The softmax's reach (docs/schemes.md section 7, "The softmax's reach")

Two gated ReLU layers without norms (d 4, d_ff 8, 3 tokens; the state grows to about 160
and the scores to about 3000): the final state's error against the reference in arb at 22
digits, with the steps capped at half the reach (as `solve_reference` runs) and without the cap
(the same controller, the cap taken out of each layer's System).

{_table(REACH_HEADERS, reached)}

## 3. Through depth: carried and assessed (docs/schemes.md section 7, "The assessment")

Six layers, d 4 and 8 (d_ff 2d, two heads), 4 tokens, t_final 6, seeds 0 to
{depth_seeds - 1}, for {len(DEPTH_KINDS)} kinds ({depth_kinds}); every layer boundary,
against arb at 22 digits ({depth_count[0]} problems had a truth). "carried": the global
estimate alone; "assessed": `assess=True`, with its field evaluations over the carried
run's (median, 10th to 90th percentile over the problems).

{_table(["tol", "estimate", *SWEEP_HEADERS, "evaluations / carried"], deep)}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one seed a kind instead of four")
    parser.add_argument(
        "--out", type=Path, default=Path("docs/reference-figures.md"), help="the page to write"
    )
    args = parser.parse_args(argv)
    text = page(1 if args.quick else SEEDS)
    args.out.write_text(text)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
