"""References in the multi-float formats hold every digit they are asked for (issue 45,
"every digit"): on a pre-LN GELU flow (2 layers, d 8, 2 heads, d_ff 16, 4 tokens, t_final
2), float64x3 at tol 1e-32 against arb at 45 digits and float64x4 at tol 1e-50 against arb
at 70, both arb runs at their default tolerance (1e-46, 1e-71). At every layer boundary the
multi-float states are within the tolerance of the arb states, relatively to max(1, |u|),
and within the sum of the two runs' own error estimates (docs/schemes.md section 7)."""

from __future__ import annotations

import numpy as np
import pytest

from solvers import LayerWeights, PiecewiseControls, Problem, backend, solve_reference


@pytest.fixture(scope="module")
def flow() -> Problem:
    layers = [LayerWeights.random(8, 2, 16, seed, activation="gelu") for seed in range(2)]
    u0 = np.random.default_rng(0).standard_normal((4, 8))
    return Problem(u0, PiecewiseControls(layers), 2, norm="pre")


@pytest.mark.parametrize(
    ("name", "tol", "digits"), [("float64x3", 1e-32, 45), ("float64x4", 1e-50, 70)]
)
def test_a_multi_float_reference_is_within_its_tolerance_and_its_estimate(flow, name, tol, digits):
    result = solve_reference(flow, tol=tol, backend=name)
    truth = solve_reference(flow, backend=backend("arb", digits))
    wide = backend("arb", digits)
    assert result.tolerance == tol and len(result.states) == len(truth.states) == 3
    with wide.active():
        for n, (ours, exact) in enumerate(zip(result.states, truth.states, strict=True)):
            difference = wide.asarray(ours) - wide.asarray(exact)
            distance = float(np.max(np.abs(wide.to_float64(difference))))
            size = max(1.0, float(np.max(np.abs(wide.to_float64(exact)))))
            assert distance <= tol * size, f"boundary {n}: {distance:.3g} relative to {size:.3g}"
            assert distance <= result.error[n] + truth.error[n], f"boundary {n}"
    assert result.error[-1] > 0 and np.isfinite(result.error[-1])
