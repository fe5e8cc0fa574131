"""The built-in precision study: rounding error against depth for the float formats."""

from __future__ import annotations

import numpy as np

from convergence.rounding import RoundingByDepth, rounding_error_by_depth
from solvers import LayerWeights, PiecewiseControls, Problem

FORMATS = ("float64", "float32", "float16", "bfloat16")
DEPTH, D, HEADS, D_FF, TOKENS, SEED = 24, 16, 4, 32, 16, 7


def run_precision_study(norm: str = "post") -> RoundingByDepth:
    """24 seeded random layers (d 16, 4 heads, d_ff 32, 16 tokens) against mpmath at 50 digits."""
    rng = np.random.default_rng(SEED)
    layers = [LayerWeights.random(D, HEADS, D_FF, rng) for _ in range(DEPTH)]
    problem = Problem(rng.standard_normal((TOKENS, D)), PiecewiseControls(layers), DEPTH, norm=norm)
    configuration = {"seed": SEED, "d": D, "heads": HEADS, "d_ff": D_FF, "tokens": TOKENS}
    return rounding_error_by_depth(problem, FORMATS, configuration=configuration)
