"""High precision on a trained network (issue "the reference at the cost real networks
impose", item 4): the shipped vit-digits (a pre-LN GELU ViT: 17 tokens, d 32, 4 heads,
3 layers), its first stored input, solve_reference at the default tolerance in float64
and in arb at 30 digits, in the same run. Target: arb 30 at most 40 times float64.

The ratio is the product of two: the evaluations (arb's tolerance is 10^-31 where
float64's is 1000 u, so it takes more steps and higher columns) and the cost of one
field evaluation (arb's balls at 30 + G digits against BLAS and fused float64 kernels).
Both are printed, with one evaluation of the field timed alone in each number system, so
that a change can be placed in one or the other.

    python -m pytest benchmarks/test_reference_trained.py --benchmark-only -s
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from solvers import backend, load_model, solve_reference
from solvers.equation.flow import LayerFlow
from solvers.reference.guard_digits import reference_precision
from tests.hf_models import SHIPPED

TARGET_RATIO = 40
ROUNDS = {"float64": 3, "arb": 1}
FIELD_CALLS = {"float64": 200, "arb": 10}
runs: dict[str, dict[str, float]] = {}


@pytest.fixture(scope="module")
def problem():
    model = load_model(SHIPPED / "vit-digits")
    inputs = np.load(SHIPPED / "vit-digits-inputs.npy")
    return model.problem(inputs[0].astype(np.float64))


def _field_seconds(problem, bk) -> float:
    """One evaluation of the flow's field at the initial state in bk, the median of
    FIELD_CALLS[bk.name] calls."""
    with bk.active():
        flow = LayerFlow.from_problem(problem, bk)
        u, t = bk.asarray(np.asarray(problem.u0)), bk.asarray(0.5)
        flow.field(0, t, u)  # warm-up
        times = []
        for _ in range(FIELD_CALLS[bk.name]):
            start = time.perf_counter()
            flow.field(0, t, u)
            times.append(time.perf_counter() - start)
    return float(np.median(times))


@pytest.mark.parametrize(("name", "digits"), [("float64", None), ("arb", 30)])
def test_reference_on_vit_digits(benchmark, problem, name, digits):
    benchmark.group = "reference, vit-digits input 0, default tolerance"
    bk = backend(name, digits)
    working, _ = reference_precision(bk, None)  # bk with its guard digits
    result = benchmark.pedantic(
        lambda: solve_reference(problem, backend=bk),
        rounds=ROUNDS[name],
        iterations=1,
        warmup_rounds=int(ROUNDS[name] > 1),
    )
    runs[name] = {
        "seconds": benchmark.stats.stats.median,
        "steps": result.accepted,
        "rejected": result.rejected,
        "evaluations": result.evaluations,
        "error": result.error[-1],
        "field": _field_seconds(problem, working),
        "precision": result.precision,
    }
    assert np.isfinite(result.error[-1])


@pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")
def test_targets(benchmark):
    """The ratio arb 30 / float64 and its two factors, from the runs above (the fixture
    keeps this test under --benchmark-only)."""
    if set(runs) != {"float64", "arb"}:
        pytest.fail("run the whole module with --benchmark-only")
    lines = [
        f"{name}: {run['seconds']:.3g} s, {run['steps']} steps ({run['rejected']} rejected), "
        f"{run['evaluations']} evaluations, estimated error {run['error']:.1e}, one field "
        f"evaluation {run['field'] * 1e3:.3g} ms in {run['precision']}"
        for name, run in runs.items()
    ]
    arb, float64 = runs["arb"], runs["float64"]
    ratio = arb["seconds"] / float64["seconds"]
    lines.append(
        f"arb 30 digits / float64: {ratio:.1f}x (target <= {TARGET_RATIO}x) = evaluations "
        f"{arb['evaluations'] / float64['evaluations']:.2f}x, one evaluation "
        f"{arb['field'] / float64['field']:.1f}x"
    )
    print("\n" + "\n".join(lines))
    assert ratio <= TARGET_RATIO, lines
