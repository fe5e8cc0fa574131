"""Steps per second of the order-24 extrapolation reference at 50 digits, arb against mpmath.

One reference step (h = 1/4, no ReLU event in the step: the FFN bias keeps every
pre-activation positive) of a post-LN problem with (tokens, d, d_ff) = (16, 16, 32).

    python -m pytest benchmarks/test_reference.py --benchmark-only -s -n 0
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from solvers import LayerWeights, PiecewiseControls, Problem, backend
from solvers.equation.flow import LayerFlow
from solvers.methods.extrapolation import Extrapolation

medians: dict[str, float] = {}


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    layer = LayerWeights.random(16, 4, 32, rng)
    layer = dataclasses.replace(layer, b1=layer.b1 + 10.0)
    return Problem(rng.standard_normal((16, 16)), PiecewiseControls([layer]), 1, norm="post")


@pytest.mark.parametrize("name", ["arb", "mpmath"])
def test_reference_step(benchmark, problem, name):
    benchmark.group = "reference step, 16x16x32, 50 digits"
    bk = backend(name, 50)
    method = Extrapolation()
    with bk.active():
        flow = LayerFlow.from_problem(problem, bk)
        u = flow.project(0, bk.asarray(0), bk.asarray(problem.u0))
        t, h = bk.asarray(0), bk.asarray(1) / 4

    def run():
        with bk.active():
            return method.step(flow, 0, t, u, h)

    benchmark.pedantic(run, rounds=3 if name == "arb" else 1, warmup_rounds=1)
    medians[name] = benchmark.stats.stats.median


@pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")
def test_targets(benchmark):
    """Steps per second and the arb / mpmath ratio (the fixture keeps this test running)."""
    if set(medians) != {"arb", "mpmath"}:
        pytest.fail(f"run the whole module with --benchmark-only; measured {sorted(medians)}")
    print(
        f"\nreference steps per second at 50 digits: arb {1 / medians['arb']:.2f}, "
        f"mpmath {1 / medians['mpmath']:.3f}; "
        f"arb is {medians['mpmath'] / medians['arb']:.1f}x faster"
    )
    assert medians["arb"] < medians["mpmath"]
