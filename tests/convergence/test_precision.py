"""The precision ladder finds float32's and float64's floors, and none above 1e-40 at 50 digits."""

from __future__ import annotations

import dataclasses

import numpy as np

from convergence.precision import precision_ladder
from solvers import LayerWeights, PiecewiseControls, Problem, backend
from tests.convergence.round_trip import round_trip


def _uniform_problem() -> Problem:
    rng = np.random.default_rng(3)
    d = 8

    def uniform(w):
        zero = np.zeros
        return dataclasses.replace(
            w,
            wk=zero(w.wk.shape),
            bv=zero(w.bv.shape),
            bo=zero(d),
            w2=zero(w.w2.shape),
            b2=zero(d),
        )

    layers = [uniform(LayerWeights.random(d, 2, 16, rng)) for _ in range(2)]
    return Problem(rng.standard_normal((8, d)), PiecewiseControls(layers), 2, norm="none")


def test_float32_and_float64_floors_are_found():
    steps = [4 * 2**k for k in range(12)]  # 4 .. 8192
    ladder = precision_ladder(_uniform_problem(), "projected-rk4", steps, ["float32", "float64"])
    float32, float64 = ladder.floors["backend('float32')"], ladder.floors["backend('float64')"]
    assert float32 is not None and 1e-8 < float32 < 1e-5
    assert float64 is not None and float64 < 1e-13
    assert ladder.reference.startswith("uniform-attention solution")
    round_trip(ladder)


def test_no_floor_above_1e_40_at_50_digits():
    ladder = precision_ladder(
        _uniform_problem(),
        "extrapolation",
        [2, 4, 8],
        [backend("arb", 50)],
        reference_precision=backend("arb", 60),
    )
    errors = ladder.errors["backend('arb', digits=50)"]
    assert ladder.floors["backend('arb', digits=50)"] is None
    assert min(errors) < 1e-40
