"""One post-LN layer step in every number system, against its peers in the same run.

Targets (issue "every scheme at every precision"):
- arb at 50 digits at least 10x faster than mpmath at 50 digits, at (tokens, d, d_ff) =
  (16, 16, 32) and (64, 64, 256);
- the backend abstraction costs float64 at most 5% against the same layer written
  directly in numpy (`plain_post_ln_layer` below), at (256, 256, 1024);
- how arb and mpmath time grows with digits (30, 50, 100, 200), printed.

mpmath's matrix products are exact integer sums on gmpy2 (docs/schemes.md section 6),
which narrows arb's lead; `test_targets` prints the ratios of each run.

    python -m pytest benchmarks/test_backends.py --benchmark-only -s -n 0
"""

from __future__ import annotations

import numpy as np
import pytest

from solvers import LayerWeights, backend
from solvers.methods.transformer_layer import lie_step

HEADS = 4
medians: dict[tuple, float] = {}


def _case(tokens: int, d: int, d_ff: int, heads: int = HEADS):
    rng = np.random.default_rng(tokens + d + d_ff)
    return LayerWeights.random(d, heads, d_ff, rng), rng.standard_normal((tokens, d))


def _step(name: str, digits: int | None, weights: LayerWeights, u: np.ndarray):
    bk = backend(name, digits)
    with bk.active():
        weights.on(bk)  # round the weights into bk once, outside the timing
        state, dt = bk.asarray(u), bk.asarray(1.0)

    def run():
        with bk.active():
            return lie_step(bk, state, weights, dt, "post")

    return run


ROUNDS = {"float64": 50, "arb": 20, "mpmath": 2}


@pytest.mark.parametrize("size", [(16, 16, 32), (64, 64, 256)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize(("name", "digits"), [("float64", None), ("arb", 50), ("mpmath", 50)])
def test_layer_step(benchmark, size, name, digits):
    benchmark.group = f"post-LN layer {'x'.join(map(str, size))}"
    run = _step(name, digits, *_case(*size))
    benchmark.pedantic(run, rounds=ROUNDS[name], warmup_rounds=1)
    medians[(size, name, digits)] = benchmark.stats.stats.median


@pytest.mark.parametrize("digits", [30, 50, 100, 200])
@pytest.mark.parametrize("name", ["arb", "mpmath"])
def test_layer_step_against_digits(benchmark, name, digits):
    benchmark.group = "post-LN layer 16x16x32 against digits"
    run = _step(name, digits, *_case(16, 16, 32))
    benchmark.pedantic(run, rounds=ROUNDS[name], warmup_rounds=1)
    medians[("digits", name, digits)] = benchmark.stats.stats.median


def plain_post_ln_layer(u: np.ndarray, w: dict) -> np.ndarray:
    """The post-LN layer (docs/model.md section 2) in numpy alone, with tide's in-place steps."""

    def layer_norm(x, gain, bias):
        d = x.shape[-1]
        centred = x - x.sum(axis=-1, keepdims=True) / d
        centred /= np.sqrt((centred * centred).sum(axis=-1, keepdims=True) / d)
        centred *= gain
        centred += bias
        return centred

    tokens = u.shape[0]
    heads, d_k = w["heads"], w["d_k"]
    qkv = u @ w["w_qkv"]
    qkv += w["b_qkv"]
    qkv[:, : heads * d_k] *= w["scale"]
    q, k, v = (qkv[:, i * heads * d_k : (i + 1) * heads * d_k] for i in range(3))
    q, k, v = (x.reshape(tokens, heads, d_k).swapaxes(0, 1) for x in (q, k, v))
    scores = q @ k.swapaxes(-1, -2)
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    attended = (scores @ v).swapaxes(0, 1).reshape(tokens, heads * d_k) @ w["w_o"]
    attended += w["b_o"]
    attended += u
    u1 = layer_norm(attended, 1.0, 0.0)
    hidden = u1 @ w["w1"]
    hidden += w["b1"]
    np.maximum(hidden, 0, out=hidden)
    out = hidden @ w["w2"]
    out += w["b2"]
    out += u1
    return layer_norm(out, 1.0, 0.0)


@pytest.mark.parametrize("implementation", ["tide", "plain numpy"])
def test_abstraction_cost(benchmark, implementation):
    benchmark.group = "float64 post-LN layer 256x256x1024: backend abstraction cost"
    weights, u = _case(256, 256, 1024, heads=8)
    if implementation == "tide":
        run = _step("float64", None, weights, u)
    else:
        packed = weights.on(backend("float64"))
        w = {
            name: getattr(packed, name)
            for name in (
                "w_qkv",
                "b_qkv",
                "w_o",
                "b_o",
                "w1",
                "b1",
                "w2",
                "b2",
                "heads",
                "d_k",
                "scale",
            )
        }
        np.testing.assert_allclose(
            plain_post_ln_layer(u, w),
            run_tide := _step("float64", None, weights, u)(),
            rtol=0,
            atol=1e-12,
        )
        del run_tide
        run = lambda: plain_post_ln_layer(u, w)  # noqa: E731
    benchmark.pedantic(run, rounds=60, warmup_rounds=3)
    medians[("abstraction", implementation)] = benchmark.stats.stats.median


@pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")
def test_targets(benchmark):
    """Ratios of the medians above (the fixture keeps this test under --benchmark-only)."""
    sizes = ((16, 16, 32), (64, 64, 256))
    needed = [(size, name, 50) for size in sizes for name in ("arb", "mpmath")]
    needed += [("abstraction", "tide"), ("abstraction", "plain numpy")]
    missing = [key for key in needed if key not in medians]
    if missing:
        pytest.fail(f"run the whole module with --benchmark-only; missing {missing}")
    lines, failures = [], []
    for size in ((16, 16, 32), (64, 64, 256)):
        speedup = medians[(size, "mpmath", 50)] / medians[(size, "arb", 50)]
        lines.append(
            f"{size}: arb is {speedup:.1f}x faster than mpmath at 50 digits (target >= 10)"
        )
        if speedup < 10:
            failures.append(f"arb speedup {speedup:.1f} at {size}")
    cost = medians[("abstraction", "tide")] / medians[("abstraction", "plain numpy")] - 1
    lines.append(f"backend abstraction costs float64 {cost:+.1%} (target <= +5%)")
    if cost > 0.05:
        failures.append(f"abstraction cost {cost:.1%}")
    for name in ("arb", "mpmath"):
        times = [medians.get(("digits", name, digits)) for digits in (30, 50, 100, 200)]
        if None not in times:
            growth = ", ".join(
                f"{d} digits {t * 1e3:.1f} ms"
                for d, t in zip((30, 50, 100, 200), times, strict=True)
            )
            lines.append(f"{name}: {growth}")
    print("\n" + "\n".join(lines))
    assert not failures, failures
