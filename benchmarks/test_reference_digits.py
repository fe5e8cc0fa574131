"""The reference's cost as the digits grow (issue "the reference at the cost real networks
impose", item 2): with guard digits the order grows with the digits, so more digits cost
more work per step rather than more steps (docs/schemes.md section 7, "Guard digits").

The case: a pre-LN GELU encoder (2 layers, d 8, 2 heads, FFN 16, 4 tokens) to t = 2 at
the default tolerance (10^-D / 10 at D digits). Target: arb at 45 digits at most 2.5
times arb at 30 in the same run; the 60-digit run is printed.

    python -m pytest benchmarks/test_reference_digits.py --benchmark-only -s -n 0
"""

from __future__ import annotations

import numpy as np
import pytest

from solvers import LayerWeights, PiecewiseControls, Problem, backend, solve_reference

runs: dict[tuple[str, int], tuple[float, int, int, float]] = {}


@pytest.fixture(scope="module")
def problem():
    layers = [LayerWeights.random(8, 2, 16, seed, activation="gelu") for seed in range(2)]
    u0 = np.random.default_rng(0).standard_normal((4, 8))
    return Problem(u0, PiecewiseControls(layers), 2, norm="pre")


@pytest.mark.parametrize(
    ("name", "digits"), [("arb", 30), ("arb", 45), ("arb", 60), ("mpmath", 30)]
)
def test_reference_at_digits(benchmark, problem, name, digits):
    benchmark.group = "reference, pre-LN GELU encoder 2 x (8, 4 tokens), default tolerance"
    result = benchmark.pedantic(
        lambda: solve_reference(problem, backend=backend(name, digits)), rounds=1, iterations=1
    )
    runs[(name, digits)] = (
        benchmark.stats.stats.median,
        result.accepted,
        result.evaluations,
        result.error[-1],
    )


@pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")
def test_targets(benchmark):
    """The ratio arb 45 / arb 30 from the runs above (the fixture keeps this test under
    --benchmark-only)."""
    needed = [("arb", 30), ("arb", 45), ("arb", 60), ("mpmath", 30)]
    if any(key not in runs for key in needed):
        pytest.fail("run the whole module with --benchmark-only")
    lines = [
        f"{name} {digits} digits: {time:.2f} s, {steps} steps, {evaluations} evaluations, "
        f"estimated error {error:.1e}"
        for (name, digits), (time, steps, evaluations, error) in runs.items()
    ]
    ratio = runs[("arb", 45)][0] / runs[("arb", 30)][0]
    lines.append(f"arb 45 digits / arb 30 digits: {ratio:.2f}x (target <= 2.5)")
    print("\n" + "\n".join(lines))
    assert ratio <= 2.5, lines
