"""How the cost of one post-LN layer (tide's Lie step at dt = 1) grows: with the tokens N,
with the width d, and with the digits of mpmath and arb (issue 17). Each series is timed
here, in one run; its growth exponent q (time ~ C x^q) is fitted over all sizes by the
suite's own order estimator (convergence.order.estimate_order, with its interval) and
taken over the last doubling.

The layer costs O(N^2 d) in attention and O(N d^2) in the maps, so in float64 the
exponent in N lies between 1 and 2 once the products dominate the per-call overhead,
and in d (with d_ff = 4 d) likewise. `test_targets` prints every series and its
exponent and asserts those bounds (with 0.3 of slack for timing noise) on the exponents
fitted over the largest sizes. The digits series are measured and printed, not bounded:
Python's per-number overhead dominates them up to some hundreds of digits, the cost of a
multiplication of n-digit numbers (n^1.58 for Karatsuba, less for FFT products) beyond,
so they run to 5120 digits. When the estimator finds no convergence-like window (a time
that falls as the size grows), it prints its reason instead of an exponent.

    python -m pytest benchmarks/test_cost_growth.py --benchmark-only -s -n 0
"""

from __future__ import annotations

import numpy as np
import pytest

from convergence.order import estimate_order
from solvers import LayerWeights, backend
from solvers.methods.transformer_layer import lie_step

TOKENS = (32, 64, 128, 256, 512)
"""N at d = 64, 4 heads, d_ff = 256."""
WIDTHS = (32, 64, 128, 256, 512)
"""d (4 heads, d_ff = 4 d) at N = 64."""
DIGITS = (20, 40, 80, 160, 320, 640, 1280, 2560, 5120)
"""Digits of mpmath and arb on a layer of (N, d, heads, d_ff) = (4, 8, 2, 16)."""
SLACK = 0.3
"""Timing noise allowed around the exponent bounds [1, 2]."""

series: dict[str, dict[int, float]] = {}


def _time(benchmark, name: str, size: int, bk, tokens: int, d: int, heads: int, d_ff: int):
    rng = np.random.default_rng(size)
    weights = LayerWeights.random(d, heads, d_ff, rng)
    u = rng.standard_normal((tokens, d))
    with bk.active():
        weights.on(bk)  # rounded once, outside the timing
        state, dt = bk.asarray(u), bk.asarray(1)
        rounds = 5 if bk.name.startswith("float") else 1
        benchmark.pedantic(
            lie_step, (bk, state, weights, dt, "post"), rounds=rounds, warmup_rounds=1
        )
    series.setdefault(name, {})[size] = benchmark.stats.stats.median


@pytest.mark.parametrize("tokens", TOKENS)
def test_tokens(benchmark, tokens):
    benchmark.group = "cost growth: tokens N (float64, d = 64)"
    _time(benchmark, "tokens", tokens, backend("float64"), tokens, 64, 4, 256)


@pytest.mark.parametrize("d", WIDTHS)
def test_width(benchmark, d):
    benchmark.group = "cost growth: width d (float64, N = 64, d_ff = 4 d)"
    _time(benchmark, "width", d, backend("float64"), 64, d, 4, 4 * d)


@pytest.mark.parametrize("name", ["mpmath", "arb"])
@pytest.mark.parametrize("digits", DIGITS)
def test_digits(benchmark, name, digits):
    benchmark.group = f"cost growth: digits ({name}, N = 4, d = 8)"
    _time(benchmark, name, digits, backend(name, digits), 4, 8, 2, 16)


@pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")
def test_targets(benchmark):
    """The exponents, fitted and printed; the float64 ones bounded by [1, 2] (with SLACK)."""
    expected = {"tokens": TOKENS, "width": WIDTHS, "mpmath": DIGITS, "arb": DIGITS}
    missing = [k for k, sizes in expected.items() if sorted(series.get(k, {})) != list(sizes)]
    if missing:
        pytest.fail(f"run the whole module with --benchmark-only; missing {missing}")
    failures = []
    print()
    for name, times in series.items():
        sizes = sorted(times)
        whole = estimate_order(sizes, [times[s] for s in sizes])
        tail = np.log(times[sizes[-1]] / times[sizes[-2]]) / np.log(sizes[-1] / sizes[-2])
        cells = ", ".join(f"{s}: {times[s] * 1e3:.3g} ms" for s in sizes)
        fitted = (
            f"{whole.order:.2f} [{whole.interval[0]:.2f}, {whole.interval[1]:.2f}]"
            if np.isfinite(whole.order)
            else f"not fitted ({whole.reason})"
        )
        print(f"{name}: {cells}; exponent over all sizes {fitted}, last doubling {tail:.2f}")
        if name in ("tokens", "width") and not 1 - SLACK <= tail <= 2 + SLACK:
            failures.append(f"{name}: exponent {tail:.2f} outside [1, 2] over its last doubling")
    assert not failures, "; ".join(failures)
