"""The reference on a stiff field at high precision (issue "the reference at the cost real
networks impose", item 7): the stiff family of tests/stiff_family.py (two layers whose
FFN damps at rates 1 to 80), one call of the method "reference" of `solve` at mpmath 30
digits per norm placement. Target: at most 10 s a call (quiet machine); the float64
call, the peer, and the ratio are printed beside it.

The steps are accuracy-limited, not stability-limited, through most of each layer (the
transient e^(-80 t) is resolved to 1e-31 until t ~ 0.9 of the layer, which an implicit
method would have to resolve too), so the cost is the field evaluation's at 38 working
digits (docs/schemes.md sections 6 and 7).

    python -m pytest benchmarks/test_reference_stiff.py --benchmark-only -s
"""

from __future__ import annotations

import pytest

from solvers import backend, solve
from tests.stiff_family import stiff_problem

NORMS = ("none", "post")
TARGET_SECONDS = 10.0
runs: dict[tuple[str, str], float] = {}


@pytest.mark.parametrize("precision", [("float64",), ("mpmath", 30)], ids=str)
@pytest.mark.parametrize("norm", NORMS)
def test_stiff_call(benchmark, norm, precision):
    benchmark.group = f"reference, stiff family, norm {norm}"
    bk, problem = backend(*precision), stiff_problem(norm)
    benchmark.pedantic(lambda: solve(problem, "reference", 1, bk), rounds=1, iterations=1)
    runs[(norm, repr(bk))] = benchmark.stats.stats.median


@pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")
def test_targets(benchmark):
    """The mpmath-30 calls against TARGET_SECONDS, with the float64 peer (the fixture keeps
    this test under --benchmark-only)."""
    high, low = repr(backend("mpmath", 30)), repr(backend("float64"))
    if any((norm, name) not in runs for norm in NORMS for name in (high, low)):
        pytest.fail("run the whole module with --benchmark-only")
    lines = [
        f"stiff family, norm {norm}: mpmath 30 digits {runs[norm, high]:.2f} s, float64 "
        f"{runs[norm, low]:.3f} s ({runs[norm, high] / runs[norm, low]:.0f}x); "
        f"target <= {TARGET_SECONDS:g} s"
        for norm in NORMS
    ]
    print("\n" + "\n".join(lines))
    assert all(runs[norm, high] <= TARGET_SECONDS for norm in NORMS), lines
