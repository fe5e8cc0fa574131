"""High precision on a trained network: the shipped vit-digits (a pre-LN GELU ViT: 17
tokens, d 32, 4 heads, 3 layers), its first stored input, solve_reference in float64 at
the default tolerance, in float64x3 at tol 1e-30 and in arb at 30 digits (its default
tolerance, 1e-31), in the same run. Target (issue "high precision at compiled speed"):
float64x3 at most 150 times float64. arb's ratio is printed as a figure: issue 32's
target for it (40x) is retired as below the cost of balls (123 s, 874x, when issue 45
was filed).

The ratio comes from three measured parts, each printed: the field evaluations (arb's tolerance is
10^-31 where float64's is 1000 u, so it takes more steps and higher columns; in arb
they include those of certification's attempts that were discarded for wide balls,
which the reference does not count), the seconds of one evaluation (arb's balls at
30 + G digits and certification's guard bits, against BLAS and fused float64 kernels),
and the time outside the field (the tableau, the control, the conversions). The field
is timed inside the timed run (a perf_counter pair per call), so each factor is
measured in the precision the run worked at.

    python -m pytest benchmarks/test_reference_trained.py --benchmark-only -s -n 0
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from solvers import backend, load_model, solve_reference
from solvers.equation.flow import LayerFlow
from tests.hf_models import SHIPPED

TARGET_RATIO = 150
"""float64x3 at tol 1e-30 over float64 at its default tolerance."""
ROUNDS = {"float64": 3, "float64x3": 1, "arb": 1}
TOLERANCES = {"float64": None, "float64x3": 1e-30, "arb": None}
runs: dict[str, dict] = {}


class FieldClock:
    """Counts the calls of LayerFlow.field and the seconds spent inside them."""

    def __init__(self) -> None:
        self.calls, self.seconds, self.wall = 0, 0.0, 0.0

    def wrap(self, field):
        def timed_field(*args, **kwargs):
            start = time.perf_counter()
            try:
                return field(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
                self.calls += 1

        return timed_field


@pytest.fixture(scope="module")
def problem():
    model = load_model(SHIPPED / "vit-digits")
    inputs = np.load(SHIPPED / "vit-digits-inputs.npy")
    return model.problem(inputs[0].astype(np.float64))


@pytest.mark.parametrize(("name", "digits"), [("float64", None), ("float64x3", None), ("arb", 30)])
def test_reference_on_vit_digits(benchmark, monkeypatch, problem, name, digits):
    benchmark.group = "reference, vit-digits input 0, default tolerance"
    bk, clock = backend(name, digits), FieldClock()
    monkeypatch.setattr(LayerFlow, "field", clock.wrap(LayerFlow.field))

    def run():
        clock.calls, clock.seconds = 0, 0.0  # the last round's are kept
        start = time.perf_counter()
        result = solve_reference(problem, backend=bk, tol=TOLERANCES[name])
        clock.wall = time.perf_counter() - start
        return result

    result = benchmark.pedantic(
        run, rounds=ROUNDS[name], iterations=1, warmup_rounds=int(ROUNDS[name] > 1)
    )
    runs[name] = {
        "seconds": benchmark.stats.stats.median,
        "steps": result.accepted,
        "rejected": result.rejected,
        "evaluations": result.evaluations,
        "calls": clock.calls,
        "field": clock.seconds,
        "wall": clock.wall,
        "error": result.error[-1],
        "precision": result.precision,
    }
    assert np.isfinite(result.error[-1]) and clock.calls >= result.evaluations


@pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")
def test_targets(benchmark):
    """The ratios float64x3 / float64 and arb 30 / float64 and their factors, from the runs
    above (the fixture keeps this test under --benchmark-only)."""
    if set(runs) != set(ROUNDS):
        pytest.fail("run the whole module with --benchmark-only")
    lines = [
        f"{name}: {run['seconds']:.3g} s, {run['steps']} steps ({run['rejected']} rejected), "
        f"{run['evaluations']} evaluations counted, {run['calls']} field calls in all, "
        f"{run['field']:.3g} s of the last round's {run['wall']:.3g} s in the field, "
        f"{run['field'] / run['calls'] * 1e3:.3g} ms a call; estimated "
        f"error {run['error']:.1e}, working precision {run['precision']}"
        for name, run in runs.items()
    ]
    float64 = runs["float64"]

    def outside(run: dict) -> float:
        return max(run["wall"] - run["field"], 1e-9)

    def factors(run: dict) -> str:
        return (
            f"field calls {run['calls'] / float64['calls']:.2f}x, seconds a call "
            f"{(run['field'] / run['calls']) / (float64['field'] / float64['calls']):.1f}x, "
            f"so the field alone {run['field'] / float64['field']:.0f}x; time outside the "
            f"field {outside(run) / outside(float64):.0f}x"
        )

    ratio = runs["float64x3"]["seconds"] / float64["seconds"]
    lines.append(
        f"float64x3 at 1e-30 / float64: {ratio:.1f}x (target <= {TARGET_RATIO}x); "
        + factors(runs["float64x3"])
    )
    arb_ratio = runs["arb"]["seconds"] / float64["seconds"]
    lines.append(f"arb 30 digits / float64: {arb_ratio:.1f}x (a figure); " + factors(runs["arb"]))
    print("\n" + "\n".join(lines))
    assert ratio <= TARGET_RATIO, lines
