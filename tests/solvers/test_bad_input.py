"""Bad input is rejected with a TideError whose message names the value."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import torch

from solvers import (
    InvalidInputError,
    LayerWeights,
    PiecewiseControls,
    Problem,
    TideError,
    UndefinedOperationError,
    backend,
    from_torch,
    solve,
)
from solvers.equation.norms import project_to_s1


@pytest.fixture
def layer(rng):
    return LayerWeights.random(8, 2, 16, rng)


@pytest.fixture
def problem(layer, rng):
    return Problem(rng.standard_normal((5, 8)), PiecewiseControls([layer]), 1.0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"bq": np.zeros((2, 3))}, "bq must have shape (2, 4)"),
        ({"wo": np.zeros((2, 4, 7))}, "wo must have shape (2, 4, 8)"),
        ({"w2": np.zeros((15, 8))}, "w2 must have shape (16, 8)"),
        ({"b1": np.full(16, np.nan)}, "b1 must be finite, got nan at index (0,)"),
        ({"wk": np.full((2, 8, 4), np.inf)}, "wk must be finite, got inf"),
        ({"eps": -1e-5}, "eps must be >= 0, got -1e-05"),
        ({"scale": 0.0}, "scale must be > 0, got 0.0"),
        ({"norm1": (np.ones(7), 0.0)}, "norm1 gain must be a scalar or a vector of length d=8"),
        ({"norm2": 1.0}, "norm2 must be a tuple (gain, bias)"),
        ({"wq": np.zeros((2, 8, 0))}, "d_k (from wq.shape) must be a positive integer, got 0"),
        ({"wq": "weights"}, "wq must be an array of real numbers"),
    ],
)
def test_layer_weights_reject(layer, change, message):
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        dataclasses.replace(layer, **change)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"d": 0, "heads": 1, "d_ff": 4}, "d must be a positive integer, got 0"),
        ({"d": 8, "heads": -2, "d_ff": 4}, "heads must be a positive integer, got -2"),
        ({"d": 8, "heads": 3, "d_ff": 4}, "heads=3 does not divide d=8"),
        ({"d": 8, "heads": 2, "d_ff": 2.5}, "d_ff must be a positive integer, got 2.5"),
    ],
)
def test_random_weights_reject(kwargs, message):
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        LayerWeights.random(**kwargs)


def test_controls_reject(layer, rng):
    with pytest.raises(InvalidInputError, match="at least one layer"):
        PiecewiseControls([])
    with pytest.raises(InvalidInputError, match="layer 1 has d=16 but layer 0 has d=8"):
        PiecewiseControls([layer, LayerWeights.random(16, 2, 16, rng)])
    with pytest.raises(InvalidInputError, match="layer 0 must be a LayerWeights, got dict"):
        PiecewiseControls([{}])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"u0": np.zeros((5, 7))}, "u0 must have shape (N, d) or (B, N, d) with d=8"),
        ({"u0": np.zeros((0, 8))}, "N, B >= 1, got (0, 8)"),
        ({"u0": np.zeros(8)}, "got (8,)"),
        ({"u0": np.array([[np.nan] * 8])}, "u0 must be finite, got nan at index (0, 0)"),
        ({"t_final": 0.0}, "t_final must lie in (0, 1]"),
        ({"t_final": 2.0}, "t_final must lie in (0, 1]"),
        ({"t_final": np.inf}, "t_final must be finite"),
        ({"norm": "middle"}, "unknown norm 'middle'; allowed: 'post', 'pre', 'none'"),
        ({"causal": "yes"}, "causal must be True or False"),
        ({"token_weights": np.ones(4)}, "token_weights must have shape (5)"),
        (
            {"token_weights": np.array([1, 1, 0, 1, 1.0])},
            "token_weights must be > 0, got 0.0 at token 2",
        ),
    ],
)
def test_problem_rejects(layer, rng, kwargs, message):
    arguments = {
        "u0": rng.standard_normal((5, 8)),
        "controls": PiecewiseControls([layer]),
        "t_final": 1,
    }
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        Problem(**{**arguments, **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "rk45"}, "unknown method 'rk45'; allowed: 'lie'"),
        ({"steps_per_unit": 0}, "steps_per_unit must be a positive integer, got 0"),
        ({"steps_per_unit": 1.5}, "steps_per_unit must be a positive integer, got 1.5"),
        ({"backend": "float128x"}, "unknown backend 'float128x'"),
    ],
)
def test_solve_rejects(problem, kwargs, message):
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        solve(problem, **kwargs)
    with pytest.raises(InvalidInputError, match="problem must be a Problem, got dict"):
        solve({})


def test_backend_rejects_digits_for_fixed_precision():
    with pytest.raises(
        InvalidInputError, match="has a fixed precision; digits must be None, got 30"
    ):
        backend("float64", digits=30)


def test_projection_names_the_constant_row(rng):
    u = rng.standard_normal((3, 4, 8))
    u[1, 2] = 0.25
    bk = backend("float64")
    with pytest.raises(
        UndefinedOperationError, match=r"token 2 in batch entry \(1,\) has variance 0"
    ):
        project_to_s1(bk, u, 0.0, 1.0)
    with pytest.raises(
        InvalidInputError, match="sigma2 must be > 0 for a projection onto S1, got -1"
    ):
        project_to_s1(bk, rng.standard_normal((4, 8)), 0.0, -1)


def test_solve_reports_a_constant_row_reached_inside_a_post_ln_problem(rng):
    # a layer whose attention + FFN map every row to a constant row: zero value and FFN maps
    # with equal biases, and a constant initial row
    d = 4
    zero = np.zeros
    layer = LayerWeights(
        wq=zero((1, d, d)),
        bq=zero((1, d)),
        wk=zero((1, d, d)),
        bk=zero((1, d)),
        wv=zero((1, d, d)),
        bv=zero((1, d)),
        wo=zero((1, d, d)),
        bo=np.ones(d),
        w1=zero((d, d)),
        b1=zero(d),
        w2=zero((d, d)),
        b2=zero(d),
    )
    u0 = rng.standard_normal((3, d))
    u0[1] = 2.0
    with pytest.raises(TideError, match="token 1 has variance 0"):
        solve(Problem(u0, PiecewiseControls([layer]), 1.0))
    # with eps > 0 the same layer is defined everywhere
    eps_layer = dataclasses.replace(layer, eps=1e-5)
    assert np.isfinite(solve(Problem(u0, PiecewiseControls([eps_layer]), 1.0))).all()


def test_from_torch_rejects():
    tanh_gelu = torch.nn.TransformerEncoderLayer(
        8, 2, 16, activation=torch.nn.GELU(approximate="tanh")
    )
    with pytest.raises(
        InvalidInputError, match=r"layer 0: activation .* is not supported; only relu"
    ):
        from_torch(tanh_gelu)
    with pytest.raises(InvalidInputError, match="activation must be one of relu, gelu"):
        dataclasses.replace(
            from_torch(torch.nn.TransformerEncoderLayer(8, 2, 16))[0], activation="swish"
        )
    with pytest.raises(InvalidInputError, match="got Linear"):
        from_torch(torch.nn.Linear(3, 3))
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16)
    encoder = torch.nn.TransformerEncoder(
        layer, 2, norm=torch.nn.LayerNorm(8), enable_nested_tensor=False
    )
    with pytest.raises(InvalidInputError, match="final layer norm"):
        from_torch(encoder)
    layer.norm2.eps = 1e-3
    with pytest.raises(
        InvalidInputError, match=re.escape("norm1.eps=1e-05 differs from norm2.eps=0.001")
    ):
        from_torch(layer)


def test_continuous_methods_name_a_constant_initial_row(layer, rng):
    u0 = rng.standard_normal((4, 8))
    u0[2] = 1.5
    problem = Problem(u0, PiecewiseControls([layer]), 1, norm="post")
    for method in ("projected-rk4", "strang-rk2", "reference"):
        with pytest.raises(UndefinedOperationError, match="token 2 has variance 0"):
            solve(problem, method, 2)


def test_non_finite_kernel_values_name_the_weight():
    from solvers.space.grids import Grid, discretize
    from solvers.space.kernels import ContinuousLayer

    layer = ContinuousLayer.random(0)
    broken = dataclasses.replace(layer, k1=lambda z, y: np.log(z - 0.5))  # NaN below z = 1/2
    with pytest.raises(InvalidInputError, match=r"w1 must be finite, got nan"):
        discretize(broken, Grid(4, 4, 4, 4))


def test_problem_keeps_its_own_copy_of_the_data(layer, rng):
    u0 = rng.standard_normal((5, 8))
    problem = Problem(u0, PiecewiseControls([layer]), 1)
    before = solve(problem)
    u0 += 1.0
    assert np.array_equal(solve(problem), before)
    assert not problem.u0.flags.writeable


def test_manufactured_solutions_need_the_uniform_feature_grid(layer):
    from solvers.equation.manufactured import ManufacturedSolution

    star = ManufacturedSolution(4, 8)
    weights = np.linspace(1, 2, 8) / np.linspace(1, 2, 8).sum()
    with pytest.raises(InvalidInputError, match="cannot be combined with feature_weights"):
        Problem(
            star.initial(),
            PiecewiseControls([layer]),
            1,
            feature_weights=weights,
            manufactured=star,
        )


def test_the_flow_methods_refuse_post_ln_norms_without_a_flow(rng):
    """Per-feature gains or biases (the layers collapse), a gain <= 0 (no projection) and
    two norms with eps > 0 (the flow is lie_limit's) are refused by every method but the
    Transformer's own, with a message that says where to go instead."""
    base = LayerWeights.random(8, 2, 16, rng)
    u0 = rng.standard_normal((4, 8))
    per_feature = dataclasses.replace(base, norm1=(np.linspace(0.5, 1.5, 8), 0.0))
    negative = dataclasses.replace(base, norm2=(-1.0, 0.0))
    two_with_eps = dataclasses.replace(base, norm2=(2.0, 0.5), eps=1e-5)
    for layer, message in (
        (per_feature, "per-feature gain or bias.*collapse.*limit_check"),
        (negative, "gain -1.0 <= 0"),
        (two_with_eps, "two different norms and eps.*lie_limit"),
    ):
        problem = Problem(u0, PiecewiseControls([layer]), 1)
        assert np.isfinite(solve(problem, "lie")).all()  # the Transformer takes any norms
        with pytest.raises(InvalidInputError, match=message):
            solve(problem, "strang-rk2")


def test_projection_takes_high_precision_sigmas():
    import mpmath

    bk = backend("mpmath", 30)
    with bk.active():
        u = bk.asarray(np.array([[1.0, 2.0, 4.0]]))
        p = project_to_s1(bk, u, mpmath.mpf("0.5"), mpmath.mpf(2))
    assert np.allclose(bk.to_float64(p).mean(), 0.5) and np.allclose(bk.to_float64(p).std(), 2)
