"""Well-posedness (issue 6): measured Lipschitz constants of u0 -> u(T) and theta -> u(T)
against the Gronwall bounds derived from the weights, and bad input.

Truths the module did not produce: the field's Lipschitz constant and weight sensitivity
measured directly (central-difference Jacobians, weight changes) on the sets the
derivation covers; linear problems whose Lipschitz constants are known in closed form
(uniform attention: u(T) = (u0 - ubar0) + ubar0 expm(T M); a zero field on S1: u(T) =
P(u0), whose constant is R / r); and the exact uniform-attention solution as the common
limit of every method.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from properties.claim_check import CheckVerdict
from properties.well_posedness.continuous_dependence import (
    QUOTIENT_AGREEMENT,
    continuous_dependence,
)
from properties.well_posedness.dependence_sweep import (
    Configuration,
    DependenceSweep,
    continuous_dependence_sweep,
)
from properties.well_posedness.gronwall import GronwallBound, LayerBound, gronwall_bound
from properties.well_posedness.layer_bounds import WeightNorms
from properties.well_posedness.perturbations import PERTURBED_ARRAYS
from solvers import InvalidInputError, LayerWeights, PiecewiseControls, Problem, TideError, backend
from solvers.equation.exact import uniform_attention_solution
from solvers.equation.flow import LayerFlow
from solvers.equation.norms import project_to_s1
from solvers.equation.operators import feed_forward
from solvers.results.records import from_json, to_json
from solvers.solving import solve
from tests.exact_layers import uniform_attention_layer

FLOAT64 = backend("float64")
UNIT = FLOAT64.unit_roundoff

# ------------------------------------------------------------------ the seeded sweep


@pytest.fixture(scope="module")
def sweep():
    return continuous_dependence_sweep()


def test_measured_lipschitz_constants_never_exceed_the_gronwall_bounds(sweep):
    assert len(sweep.results) >= 20
    assert {c.norm for c in sweep.configurations} == {"post", "pre", "none"}
    assert len({(c.d, c.tokens, c.heads, c.weight_scale) for c in sweep.configurations}) >= 12
    for result in sweep.results:
        for estimate in (result.initial, result.controls):
            assert math.isfinite(estimate.bound) and estimate.bound > 0
            assert 0 < estimate.measured <= estimate.bound
            assert estimate.ratio == pytest.approx(estimate.measured / estimate.bound)
            assert all(check.verdict == CheckVerdict.HOLDS for check in estimate.checks), (
                estimate.checks
            )
    assert sweep.verdict == CheckVerdict.HOLDS
    for summary, ratios in (
        (sweep.initial_summary, sweep.initial_ratios),
        (sweep.control_summary, sweep.control_ratios),
    ):
        assert 0 < summary["min"] <= summary["median"] <= summary["max"] <= 1
        assert summary["median"] == pytest.approx(float(np.median(ratios)))
    json.dumps(to_json(sweep), allow_nan=False)


def test_difference_quotients_are_converged_in_the_step(sweep):
    for result in sweep.results:
        for estimate in (result.initial, result.controls):
            q = np.array(estimate.quotients)
            assert q.shape == (3, 3)
            # the quotients change by O(step) relative: at most 1% between the finest two
            assert estimate.quotient_change <= QUOTIENT_AGREEMENT
            assert np.max(np.abs(q[-1] - q[-2])) <= 1e-2 * np.max(q)


def test_the_bound_is_the_product_of_its_layer_factors(sweep):
    """Recompute the initial-data bound from the per-layer figures (docs/well-posedness.md
    section 3)."""
    for result in sweep.results:
        bound = result.initial_bound
        assert bound.control_radius == 0 and result.control_bound.initial_radius == 0
        product = math.prod(layer.start_factor * layer.growth for layer in bound.layers)
        assert bound.initial_data == pytest.approx(product, rel=1e-12)
        for layer in bound.layers:
            assert layer.growth == pytest.approx(math.exp(layer.mean_lipschitz * layer.length))
            assert layer.mean_lipschitz <= layer.field_lipschitz * (1 + 1e-12)
            # the controls' term is at least the one-piece form with the smallest constant
            assert layer.control_factor > 0


def _same(a: object, b: object) -> bool:
    """Equal values of the same types, field by field (nan equals nan); a string enum in a
    field or dict typed str (a norm placement in a configuration) comes back as its value."""
    if isinstance(a, enum.Enum) and isinstance(a, str) and type(b) is str:
        return a.value == b
    if isinstance(b, enum.Enum) and isinstance(b, str) and type(a) is str:
        return _same(b, a)
    if type(a) is not type(b):
        return False
    if dataclasses.is_dataclass(a):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


def test_a_sweep_result_round_trips_through_json(sweep):
    """to_json -> json text -> from_json gives back every field, nested results included."""
    text = json.dumps(to_json(sweep), allow_nan=False)
    back = from_json(DependenceSweep, json.loads(text))
    assert _same(back, sweep)
    assert isinstance(back.configurations[0], Configuration)
    assert isinstance(back.results[0].initial_bound.layers[0], LayerBound)
    assert back.verdict is CheckVerdict.HOLDS
    # the keys the report reads
    record = json.loads(text)["results"][0]
    assert record["verdict"] == "holds"
    for estimate in (record["initial"], record["controls"]):
        assert float(estimate["ratio"]) == pytest.approx(
            float(estimate["measured"]) / float(estimate["bound"])
        )


# ------------------------------------------------------------------ the field's constants


def _sample_states(rng, bound: GronwallBound, problem: Problem, count: int) -> np.ndarray:
    """States in the set on which the last piece of layer 0's constants hold."""
    tokens, d = problem.u0.shape
    layer = bound.layers[0]
    rows = rng.standard_normal((count, tokens, d))
    if problem.norm.constrained:
        return project_to_s1(FLOAT64, rows, 0.0, 1.0)
    if problem.norm.normalises_inputs:  # centred rows of norm >= rmin (> 0: P is defined), any mean
        centred = rows - rows.mean(-1, keepdims=True)
        centred /= np.linalg.norm(centred, axis=-1, keepdims=True)
        spread = max(layer.min_centred_norm, 0.1) * rng.uniform(1, 2, (count, tokens, 1))
        return centred * spread + rng.standard_normal((count, tokens, 1))
    radius = layer.state_radius * rng.uniform(0, 1, (count, tokens, 1)) ** (1 / d)
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True) * radius


def _field(problem: Problem, states: np.ndarray) -> np.ndarray:
    flow = LayerFlow.from_problem(problem, FLOAT64)
    with FLOAT64.active():
        t = FLOAT64.asarray(0)
        return flow.field(0, t, states)


@settings(max_examples=25, deadline=None)
@given(
    norm=st.sampled_from(["post", "pre", "none"]),
    d=st.sampled_from([4, 6, 8]),
    tokens=st.integers(1, 6),
    heads=st.sampled_from([1, 2]),
    weight_scale=st.floats(0.1, 1.5),
    causal=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_field_is_lipschitz_with_the_derived_constant(
    norm, d, tokens, heads, weight_scale, causal, seed
):
    """Jacobian spectral norms (none, pre) and secant ratios on S1 (post) never exceed L."""
    configuration = Configuration(
        d=d,
        tokens=tokens,
        heads=heads,
        d_ff=2 * d,
        layers=1,
        norm=norm,
        weight_scale=weight_scale,
        input_scale=5.0 if norm == "pre" else 1.0,
        seed=seed % 1000,
    )
    problem = dataclasses.replace(configuration.problem(), causal=causal)
    bound = gronwall_bound(problem)
    lipschitz = bound.layers[0].field_lipschitz
    if not math.isfinite(lipschitz):
        return  # pre-LN rows that may reach zero spread: no bound is claimed
    rng = np.random.default_rng(seed)
    states = _sample_states(rng, bound, problem, 4)
    n = tokens * d
    if norm == "post":  # secants between points of S1, from close to far
        for distance in (1e-4, 1e-2, 0.3):
            others = project_to_s1(
                FLOAT64, states + distance * rng.standard_normal(states.shape), 0.0, 1.0
            )
            change = _field(problem, others) - _field(problem, states)
            ratio = np.linalg.norm(change, axis=(-2, -1)) / np.linalg.norm(
                others - states, axis=(-2, -1)
            )
            assert np.all(ratio <= lipschitz * (1 + 1e-6)), (ratio.max(), lipschitz)
        return
    step = 1e-6 * max(1.0, float(np.max(np.abs(states))))
    basis = np.eye(n).reshape(n, tokens, d) * step
    for x in states:
        columns = (_field(problem, x + basis) - _field(problem, x - basis)) / (2 * step)
        jacobian = columns.reshape(n, n).T
        measured = float(np.linalg.norm(jacobian, 2))
        assert measured <= lipschitz * (1 + 1e-6), (measured, lipschitz)


@settings(max_examples=20, deadline=None)
@given(
    norm=st.sampled_from(["post", "pre", "none"]),
    d=st.sampled_from([4, 8]),
    tokens=st.integers(1, 6),
    weight_scale=st.floats(0.1, 1.0),
    relative=st.sampled_from([1e-6, 1e-3, 1e-1]),
    seed=st.integers(0, 2**32 - 1),
)
def test_the_field_moves_with_the_weights_at_most_by_the_derived_sensitivity(
    norm, d, tokens, weight_scale, relative, seed
):
    """|f_theta(X) - f_theta'(X)| <= K |theta' - theta| on the set, for near and far theta'."""
    configuration = Configuration(
        d=d,
        tokens=tokens,
        heads=2,
        d_ff=d,
        layers=1,
        norm=norm,
        weight_scale=weight_scale,
        input_scale=5.0 if norm == "pre" else 1.0,
        seed=seed % 1000,
    )
    problem = configuration.problem()
    rng = np.random.default_rng(seed)
    layer = problem.controls.layers[0]
    changes = {name: rng.standard_normal(getattr(layer, name).shape) for name in PERTURBED_ARRAYS}
    size = math.sqrt(sum(float(np.sum(x * x)) for x in changes.values()))
    theta = math.sqrt(sum(float(np.sum(getattr(layer, k) ** 2)) for k in PERTURBED_ARRAYS))
    step = relative * theta / size
    moved = dataclasses.replace(
        layer, **{k: getattr(layer, k) + step * x for k, x in changes.items()}
    )
    bound = gronwall_bound(problem, control_radius=step * size)
    sensitivity = bound.layers[0].control_sensitivity
    states = _sample_states(rng, bound, problem, 6)
    other = dataclasses.replace(problem, controls=PiecewiseControls([moved]))
    change = np.linalg.norm(_field(other, states) - _field(problem, states), axis=(-2, -1))
    assert np.all(change <= sensitivity * step * size * (1 + 1e-9)), (
        change.max() / (step * size),
        sensitivity,
    )


# ------------------------------------------------------------------ known constants


@pytest.mark.parametrize(("rates", "tokens"), [([(0.7,)], 4), ([(0.4, 0.3), (0.9,)], 3)])
def test_uniform_attention_has_the_lipschitz_constant_exp_of_the_trace_rate(rates, tokens, rng):
    """u(T) = (u0 - ubar0) + ubar0 e^{T a}: constant max(1, e^{sum a}) along the token-mean
    direction, which the bound e^{L T} with L = sum_h ||Wo_h|| ||Wv_h|| attains exactly."""
    d = 3
    layers = [uniform_attention_layer(d, r, rng) for r in rates]
    u0 = rng.standard_normal((tokens, d))
    problem = Problem(u0, PiecewiseControls(layers), float(len(layers)), norm="none")
    exact = math.exp(sum(sum(r) for r in rates))
    mean_direction = np.ones((tokens, 1)) * rng.standard_normal(d)
    result = continuous_dependence(
        problem, initial_directions=[mean_direction, rng.standard_normal((tokens, d))]
    )
    assert result.initial_bound.initial_data == pytest.approx(exact, rel=1e-12)
    # RK4 at 32 steps is 1e-9 relative off e^{a T}; rounding 1e-16 / 1e-6
    assert result.initial.measured == pytest.approx(exact, rel=1e-7)
    assert result.initial.ratio == pytest.approx(1, rel=1e-7)
    assert result.initial.verdict == CheckVerdict.HOLDS
    # the solve agrees with the exact solution (so the map measured is the flow's) to RK4's
    # truncation: per layer of rate a, m steps miss e^a by m (a / m)^5 / 120 relatively
    reference = uniform_attention_solution(problem, FLOAT64)
    truncation = sum(32 * (sum(r) / 32) ** 5 / 120 for r in rates) * exact
    error = np.max(np.abs(solve(problem, "projected-rk4", 32) - reference))
    assert error <= 2 * truncation * np.max(np.abs(u0)) + 1e-13


def test_uniform_attention_control_constant_is_sqrt_n_ubar_t_exp(rng):
    """Changing Wv = a I to a I + h E (Wo = I) gives ubar(T) = ubar0 e^{a T} e^{T h E};
    with E = ubar0^T ubar0 / |ubar0|^2 (a projector of Frobenius norm 1) every row moves
    by e^{a T} (e^{T h} - 1) ubar0: the constant sqrt(N) |ubar0| T e^{a T}, which no unit
    direction of Wv exceeds."""
    d, tokens, a = 3, 5, 0.6
    layer = uniform_attention_layer(d, (a,), rng)
    u0 = rng.standard_normal((tokens, d)) + 1.0
    problem = Problem(u0, PiecewiseControls([layer]), 1.0, norm="none")
    mean = u0.mean(axis=0)
    projector = np.outer(mean, mean) / (mean @ mean)
    result = continuous_dependence(
        problem,
        arrays=("wv",),
        control_directions=[[{"wv": projector[None]}], [{"wv": rng.standard_normal((1, d, d))}]],
        relative_steps=(1e-5, 1e-6, 1e-7),
    )
    exact = math.sqrt(tokens) * np.linalg.norm(mean) * math.exp(a)
    # the quotient at step s is exact (e^s - 1) / s: relative excess s / 2 <= 1e-5
    assert result.controls.measured == pytest.approx(exact, rel=1e-5)
    assert result.controls.measured <= result.controls.bound == result.control_bound.controls
    assert result.controls.verdict == CheckVerdict.HOLDS


def test_the_projection_of_the_initial_data_has_constant_r_over_min_row_norm(rng):
    """A zero field on S1 (Wv = Wo = 0, no biases): u(T) = P(u0). A tangent change of the
    row of smallest centred norm r is stretched by R / r = sigma2 sqrt(d) / r, the largest
    stretch of P at u0; the bound is R / (r (r - eps))^{1/2}."""
    d, tokens = 5, 4
    zeros = np.zeros
    layer = LayerWeights(
        wq=rng.standard_normal((1, d, d)),
        bq=zeros((1, d)),
        wk=rng.standard_normal((1, d, d)),
        bk=zeros((1, d)),
        wv=zeros((1, d, d)),
        bv=zeros((1, d)),
        wo=zeros((1, d, d)),
        bo=zeros(d),
        w1=zeros((d, 3)),
        b1=zeros(3),
        w2=zeros((3, d)),
        b2=zeros(d),
        norm1=(2.0, 0.5),
        norm2=(2.0, 0.5),
    )
    u0 = rng.standard_normal((tokens, d)) * np.array([[1.0], [0.3], [2.0], [1.0]])
    problem = Problem(u0, PiecewiseControls([layer]), 1.0, norm="post")
    centred = u0 - u0.mean(-1, keepdims=True)
    norms = np.linalg.norm(centred, axis=-1)
    row = int(np.argmin(norms))
    tangent = rng.standard_normal(d)
    tangent -= tangent.mean()
    tangent -= (tangent @ centred[row]) / (centred[row] @ centred[row]) * centred[row]
    direction = np.zeros((tokens, d))
    direction[row] = tangent
    result = continuous_dependence(
        problem, arrays=("wq",), initial_directions=[direction, rng.standard_normal((tokens, d))]
    )
    radius = 2.0 * math.sqrt(d)
    exact = radius / norms[row]
    assert result.initial.measured == pytest.approx(exact, rel=1e-6)
    eps = result.initial_bound.initial_radius
    assert result.initial_bound.initial_data == pytest.approx(
        radius / math.sqrt(norms[row] * (norms[row] - eps)), rel=1e-12
    )
    assert result.initial.verdict == CheckVerdict.HOLDS
    assert result.controls.measured <= 1e-8  # wq changes nothing when Wv = Wo = 0


# ------------------------------------------------------------------ bad input


@pytest.fixture(scope="module")
def small_problem():
    return Configuration(
        d=4, tokens=3, heads=1, d_ff=4, layers=1, norm="post", weight_scale=0.3
    ).problem()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(relative_steps=[1e-4, 0.0]), "relative_steps .*must be > 0, got 0.0"),
        (dict(relative_steps=[-1e-3]), "relative_steps .*must be > 0, got -0.001"),
        (dict(relative_steps=[]), "relative_steps must be a non-empty"),
        (dict(relative_steps=[math.nan]), "relative_steps must be finite"),
        (dict(directions=0), "directions must be a positive integer, got 0"),
        (dict(initial_directions=[]), "initial_directions must hold at least one"),
        (dict(control_directions=[]), "control_directions must hold at least one"),
        (dict(initial_directions=[np.full((3, 4), np.inf)]), "initial direction 0 must be finite"),
        (
            dict(control_directions=[[{"wq": np.full((1, 4, 4), np.nan)}]]),
            "control direction 0 layer 0 wq must be finite",
        ),
        (dict(control_directions=[[{"norm1": 1.0}]]), "unknown weights \\['norm1'\\]"),
        (dict(arrays=()), "arrays must name at least one weight"),
        (dict(arrays=("gain",)), "unknown perturbed array 'gain'"),
        (dict(steps_per_unit=0), "steps_per_unit must be a positive integer"),
        (dict(method="euler-ish"), "unknown method 'euler-ish'"),
    ],
)
def test_bad_continuous_dependence_input_is_named(small_problem, options, message):
    with pytest.raises(InvalidInputError, match=message):
        continuous_dependence(small_problem, **options)


def test_bad_bound_and_sweep_input_is_named(small_problem):
    with pytest.raises(InvalidInputError, match="initial_radius and control_radius must be >= 0"):
        gronwall_bound(small_problem, initial_radius=-1.0)
    with pytest.raises(InvalidInputError, match="control_radius must be finite"):
        gronwall_bound(small_problem, control_radius=math.inf)
    with pytest.raises(InvalidInputError, match="configurations must hold at least one"):
        continuous_dependence_sweep([])
    with pytest.raises(InvalidInputError, match="weight_scale must be finite"):
        Configuration(d=4, tokens=3, heads=1, d_ff=4, layers=1, norm="none", weight_scale=math.nan)
    with pytest.raises(InvalidInputError, match="weight_scale must be > 0"):
        Configuration(d=4, tokens=3, heads=1, d_ff=4, layers=1, norm="none", weight_scale=0)
    with pytest.raises(InvalidInputError, match="unknown norm 'mid'"):
        Configuration(d=4, tokens=3, heads=1, d_ff=4, layers=1, norm="mid", weight_scale=1)
    with pytest.raises(InvalidInputError, match="no batch axis"):
        gronwall_bound(dataclasses.replace(small_problem, u0=small_problem.u0[None]))
    layer = small_problem.controls.layers[0]
    with pytest.raises(InvalidInputError, match="post-LN bound needs the projection"):
        gronwall_bound(
            dataclasses.replace(
                small_problem, controls=PiecewiseControls([dataclasses.replace(layer, eps=1e-5)])
            )
        )


@pytest.mark.parametrize("name", ["w1", "bq", "wo"])
def test_a_non_finite_weight_is_named(small_problem, name):
    layer = small_problem.controls.layers[0]
    broken = np.array(getattr(layer, name))
    broken.flat[0] = np.nan
    with pytest.raises(InvalidInputError, match=f"{name} must be finite"):
        dataclasses.replace(layer, **{name: broken})
    with pytest.raises(TideError, match=f"{name} must be finite"):
        continuous_dependence(
            small_problem, control_directions=[[{name: broken - getattr(layer, name)}]]
        )


STEEPEST = {"gelu": math.sqrt(2), "gelu-tanh": 1.4185040, "silu": 2.3993573}
"""Where each smooth activation's slope is largest (sup sigma', a root of sigma'')."""


@pytest.mark.parametrize("activation", sorted(STEEPEST))
def test_the_ffn_lipschitz_constant_covers_a_smooth_activations_steepest_slope(activation):
    """F(x) = sigma(x W1 + b1) W2 with d = d_ff = 1, W1 = W2 = 1 and b1 at the steepest
    point: F's slope at 0 is sup sigma' > 1 = ||W1|| ||W2||, the relu constant. The field's
    Lipschitz constant the bounds use covers it."""
    layer = dataclasses.replace(
        LayerWeights.random(1, 1, 1, 0, activation=activation),
        w1=np.ones((1, 1)),
        b1=np.array([STEEPEST[activation]]),
        w2=np.ones((1, 1)),
        b2=np.zeros(1),
    )
    bk, h = backend("float64"), 1e-6
    w = layer.on(bk)
    slope = feed_forward(bk, np.full((1, 1), h), w) - feed_forward(bk, np.full((1, 1), -h), w)
    slope = float(slope[0, 0]) / (2 * h)
    assert slope > 1.09 * np.linalg.norm(layer.w1, 2) * np.linalg.norm(layer.w2, 2)
    assert slope <= WeightNorms(layer, 0.0).ffn_lipschitz
