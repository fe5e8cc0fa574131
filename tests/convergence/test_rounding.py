"""Rounding error against depth stays within the documented 8 sqrt(n) u
(convergence.rounding_by_depth)."""

from __future__ import annotations

import numpy as np
import pytest

from convergence.rounding_by_depth import BOUND_CONSTANT, rounding_error_by_depth
from solvers import LayerWeights, PiecewiseControls, Problem, backend
from tests.convergence.round_trip import round_trip


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_four_float_formats_stay_within_the_sqrt_depth_bound_over_48_layers(norm):
    rng = np.random.default_rng(7)
    layers = [LayerWeights.random(16, 4, 32, rng) for _ in range(48)]
    problem = Problem(rng.standard_normal((16, 16)), PiecewiseControls(layers), 48, norm=norm)
    study = rounding_error_by_depth(
        problem, ["float64", "float32", "float16", "bfloat16"], configuration={"seed": 7}
    )
    assert study.depths == list(range(1, 49))
    assert study.reference == "backend('mpmath', digits=50)"
    for name, errors in study.errors.items():
        u = study.unit_roundoff[name]
        bound = BOUND_CONSTANT * np.sqrt(study.depths) * u
        assert np.all(np.asarray(errors) <= bound), (name, np.asarray(errors) / u)
        assert study.within_bound[name]
        # errors are rounding, not truncation: at least a fraction of u after a few layers
        assert max(errors) > 0.5 * u
    record = round_trip(study)
    assert float(record["errors"]["backend('float16')"][0]) == study.errors["backend('float16')"][0]
    assert record["configuration"] == {"norm": norm, "seed": 7}


def test_the_bound_flags_a_format_that_breaks_it():
    rng = np.random.default_rng(8)
    layers = [LayerWeights.random(8, 2, 16, rng) for _ in range(3)]
    problem = Problem(rng.standard_normal((4, 8)), PiecewiseControls(layers), 3)
    # float32 measured against a float16 "reference" sees float16's error, hundreds of
    # float32 roundoffs: the bound must say it fails
    study = rounding_error_by_depth(problem, ["float32"], reference=backend("float16"))
    assert not study.within_bound["backend('float32')"]
