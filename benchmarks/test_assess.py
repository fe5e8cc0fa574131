"""What the assessment costs (issue 45, item 4): solve_reference(p, assess=True) against
solve_reference(p) on a Qwen2-like decoder (6 layers, d 256, 8 heads / 2 key-value heads,
d_ff 704, 64 tokens, random weights perturbed from Hugging Face's initialisation), float64
at its default tolerance, timed in one run. The tighter run goes to the cheapest format
whose floor allows tol / 100 (solvers.reference.guard_digits.tighter_precision,
docs/schemes.md section 7): float64x2, where it was long double.

Target: the assessed run at most 4 times the plain one. Printed beside it: the tighter
run's format, its field evaluations against the plain run's, and the seconds each.

    python -m pytest benchmarks/test_assess.py --benchmark-only -s -n 0
"""

from __future__ import annotations

import numpy as np
import pytest

from solvers import load_model, solve, solve_reference

TARGET_RATIO = 4.0
"""The assessed run's time over the plain run's."""
medians: dict[bool, float] = {}
results: dict[bool, object] = {}


@pytest.fixture(scope="module")
def decoder():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tests.hf_models import perturbed, tiny_decoder

    torch.manual_seed(0)
    config = tiny_decoder(
        "qwen2",
        layers=6,
        d=256,
        num_attention_heads=8,
        num_key_value_heads=2,
        intermediate_size=704,
        vocab_size=64,
    )
    model = load_model(perturbed(transformers.Qwen2ForCausalLM(config), 0, 0.02))
    ids = np.arange(64) % 64
    return model.problem(model.embed(ids[None])[0])


@pytest.mark.parametrize("assess", [False, True], ids=["plain", "assessed"])
def test_reference(benchmark, decoder, assess):
    benchmark.group = "solve_reference, Qwen2-like decoder, float64"
    solve(decoder, "lie", 1, backend="float64x2")  # its compiled kernels out of the timing
    result = benchmark.pedantic(
        lambda: solve_reference(decoder, assess=assess), rounds=1 if assess else 3, iterations=1
    )
    assert np.isfinite(np.asarray(result.error)).all()
    medians[assess], results[assess] = benchmark.stats.stats.median, result


@pytest.mark.filterwarnings("ignore:Benchmark fixture was not used")
def test_target(benchmark):
    if set(medians) != {False, True}:
        pytest.fail("run the whole module with --benchmark-only")
    plain, assessed = results[False], results[True]
    ratio = medians[True] / medians[False]
    print(
        f"\nplain: {medians[False]:.2f} s, {plain.evaluations} evaluations, {plain.precision}"
        f"\nassessed: {medians[True]:.2f} s, tighter run in {assessed.precision} "
        f"({assessed.evaluations} evaluations, tol {assessed.tolerance:.2g}), check "
        f"{assessed.check.evaluations} evaluations"
        f"\nassessed / plain: {ratio:.1f}x (target <= {TARGET_RATIO:g}x)"
    )
    assert ratio <= TARGET_RATIO, f"the assessment costs {ratio:.1f}x the plain run"
