"""What a ReLU kink costs the reference (issue "the reference at the cost real networks
impose", item 1): kinks located on the dense output of accepted steps, then one step to
each (docs/schemes.md section 8).

The case: two random pre-LN ReLU layers (d 32, 4 heads, d_ff 128, 16 tokens, seed 0) to
t = 2 at tol 1e-8. Targets: at most 40 field evaluations per located kink on average,
and the state within the reference's own estimate of scipy's DOP853 at rtol 1e-13 (on
the ReLU field itself, which knows nothing of kinks). The same layers with GELU are the
peer: the price of the kinks is the ratio of the two times.

    python -m pytest benchmarks/test_reference_kinks.py --benchmark-only -s -n 0
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from solvers import LayerWeights, PiecewiseControls, Problem, solve_reference
from tests.scipy_truth import dop853_final_state

TOL = 1e-8
runs: dict[str, dict[str, float]] = {}


def _problem(activation: str) -> Problem:
    rng = np.random.default_rng(0)
    layers = [LayerWeights.random(32, 4, 128, rng, activation="relu") for _ in range(2)]
    layers = [dataclasses.replace(layer, activation=activation) for layer in layers]
    return Problem(rng.standard_normal((16, 32)), PiecewiseControls(layers), 2, norm="pre")


@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_reference_with_kinks(benchmark, activation):
    benchmark.group = "reference, 2 pre-LN layers (32, 4 heads, 128, 16 tokens), tol 1e-8"
    problem = _problem(activation)
    result = benchmark.pedantic(lambda: solve_reference(problem, tol=TOL), rounds=1, iterations=1)
    runs[activation] = {
        "time": benchmark.stats.stats.median,
        "evaluations": result.evaluations,
        "kinks": len(result.events),
        "estimate": result.error[-1],
        "distance": float(np.abs(dop853_final_state(problem, 1e-13) - result.states[-1]).max()),
    }


@pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")
def test_targets(benchmark):
    """Evaluations per kink and the distance to DOP853 (the fixture keeps this test under
    --benchmark-only)."""
    if set(runs) != {"relu", "gelu"}:
        pytest.fail("run the whole module with --benchmark-only")
    relu, gelu = runs["relu"], runs["gelu"]
    per_kink = relu["evaluations"] / max(relu["kinks"], 1)
    lines = [
        f"{name}: {run['time']:.2f} s, {run['evaluations']:.0f} evaluations, "
        f"{run['kinks']:.0f} kinks, estimate {run['estimate']:.2e}, "
        f"distance to DOP853 {run['distance']:.2e}"
        for name, run in runs.items()
    ]
    lines.append(f"evaluations per kink: {per_kink:.1f} (target <= 40)")
    lines.append(f"relu / gelu time: {relu['time'] / gelu['time']:.1f}x")
    print("\n" + "\n".join(lines))
    assert relu["kinks"] > 0 and per_kink <= 40, lines
    assert relu["distance"] <= relu["estimate"], lines
