"""A manufactured flow keeps its latest forcing values g(n, t) (LayerFlow.forcing): the kept
value is the one computed afresh, bit for bit, in every number system, and read-only."""

from __future__ import annotations

import numpy as np
import pytest

from solvers import LayerWeights, PiecewiseControls, Problem, backend
from solvers.equation.flow import FORCING_CACHE, LayerFlow
from solvers.equation.manufactured import ManufacturedSolution


@pytest.mark.parametrize("name, digits", [("float64", None), ("mpmath", 20), ("arb", 20)])
def test_a_kept_forcing_is_the_one_computed_afresh(name, digits):
    bk = backend(name, digits) if digits else backend(name)
    star = ManufacturedSolution(tokens=4, d=6)
    layers = [LayerWeights.random(6, 2, 8, np.random.default_rng(3)) for _ in range(2)]
    problem = Problem(star.initial(), PiecewiseControls(layers), 2, norm="post", manufactured=star)
    with bk.active():
        flow = LayerFlow.from_problem(problem, bk)
        times = [bk.asarray(k) / bk.asarray(64) for k in range(FORCING_CACHE + 5)]  # exact
        first = [flow.forcing(1, t) for t in times]
        again = [flow.forcing(1, t) for t in times[-3:]]  # kept (the oldest were let go)
        for kept, t in zip(again, times[-3:], strict=True):
            fresh = flow._manufactured_forcing(1, t)
            assert bk.to_strings(kept).tolist() == bk.to_strings(fresh).tolist()
            assert not kept.flags.writeable
        assert all(a is b for a, b in zip(again, first[-3:], strict=True))
        assert len(flow._forcing) == FORCING_CACHE
