"""Every digit at compiled speed (issue 45, acceptance "every digit"): on a pre-LN GELU
flow (2 layers, d 8, 2 heads, d_ff 16, 4 tokens, t_final 2), solve_reference in
float64x3 at tol 1e-32 and in float64x4 at tol 1e-50, each under TARGET_SECONDS on a quiet
2-core machine (the issue's target is a wall time, not a ratio: state the machine with
the figure). Their accuracy against arb at 45 and 70 digits is a test
(tests/solvers/reference/test_multifloat_reference.py); here the time, the field
evaluations and the estimate are printed.

    python -m pytest benchmarks/test_every_digit.py --benchmark-only -s -n 0
"""

from __future__ import annotations

import numpy as np
import pytest

from solvers import LayerWeights, PiecewiseControls, Problem, solve_reference

TARGET_SECONDS = 10.0
"""The largest median wall time of either run."""


def _flow() -> Problem:
    layers = [LayerWeights.random(8, 2, 16, seed, activation="gelu") for seed in range(2)]
    u0 = np.random.default_rng(0).standard_normal((4, 8))
    return Problem(u0, PiecewiseControls(layers), 2, norm="pre")


@pytest.mark.parametrize(("name", "tol"), [("float64x3", 1e-32), ("float64x4", 1e-50)])
def test_every_digit(benchmark, name, tol):
    flow = _flow()
    solve_reference(flow, tol=1e-10, backend=name)  # compiled kernels and tables out of it
    benchmark.group = "every digit"
    result = benchmark.pedantic(
        lambda: solve_reference(flow, tol=tol, backend=name), rounds=2, iterations=1
    )
    seconds = benchmark.stats.stats.median
    print(
        f"\n{name} at tol {tol:g}: {seconds:.2f} s, {result.evaluations} field evaluations, "
        f"estimate {result.error[-1]:.3g} (target < {TARGET_SECONDS:g} s)"
    )
    assert seconds < TARGET_SECONDS, f"{name}: {seconds:.2f} s"
