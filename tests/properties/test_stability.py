"""Stability (issue 6): per-layer amplification and FTLEs against exactly known linear
flows, FTLE convergence as dt -> 0, stability functions, step-size stability maps against
the linear prediction (and where it does not apply), and bad input."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st

from convergence.order import estimate_order
from properties.claim_check import CheckVerdict
from properties.stability.damped_attention import damped_attention_layer
from properties.stability.linearisation import layer_trajectory, linearise, perturbation_size
from properties.stability.lyapunov import ftle_convergence, perturbation_growth
from properties.stability.stability_map import StabilityMap, stability_map, varied_problem
from properties.stability.stability_point import OFFSET_LIMIT, PointVerdict
from solvers import (
    InvalidInputError,
    LayerWeights,
    PiecewiseControls,
    Problem,
    TideError,
    backend,
    solve,
    solve_reference,
)
from solvers.equation.flow import LayerFlow
from solvers.integrators.tableaux import EULER, RK2, RK4, ray_boundary, stability_function
from solvers.methods.extrapolation import Extrapolation
from solvers.results.records import from_json, to_json
from solvers.solving import resolve_method

ORDER_12 = Extrapolation(name="extrapolation-order-12", levels=6, events=False)
"""The extrapolation reference at order 12 for analytic fields: 3.5 times cheaper per step
than the default order 24, and converged to the maps' 1e-4 at the steps they use."""
ORDER_12_EVENTS = Extrapolation(name="extrapolation-order-12-events", levels=6, events=True)


def same(a: object, b: object) -> bool:
    """Equal field by field, nan equal to nan, types of dataclasses, enums and
    containers included (dataclass == says nan != nan)."""
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(
            same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
        )
    if isinstance(a, enum.Enum):
        return type(a) is type(b) and a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return (
            type(a) is type(b)
            and len(a) == len(b)
            and all(same(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


def assert_round_trips(result: object) -> None:
    """The result as strict JSON (nan and inf as strings) reads back into an equal one."""
    data = json.loads(json.dumps(to_json(result), allow_nan=False))
    assert same(from_json(type(result), data), result)


# ------------------------------------------------------------------ exactly known flows


def uniform_attention_layer(generator: np.ndarray, rng: np.random.Generator) -> LayerWeights:
    """Wk = 0 (every score row constant: uniform attention), bv = bo = 0, FFN off: with
    norm "none" the flow is ubar' = ubar M, u_i - ubar constant (M = Wv Wo = generator)."""
    d = generator.shape[0]
    zeros = np.zeros
    return LayerWeights(
        wq=rng.standard_normal((1, d, d)),
        bq=zeros((1, d)),
        wk=zeros((1, d, d)),
        bk=rng.standard_normal((1, d)),
        wv=generator[None],
        bv=zeros((1, d)),
        wo=np.eye(d)[None],
        bo=zeros(d),
        w1=rng.standard_normal((d, 2)),
        b1=zeros(2),
        w2=zeros((2, d)),
        b2=zeros(d),
    )


def linear_problem(generators, rng, tokens=2) -> Problem:
    layers = [uniform_attention_layer(m, rng) for m in generators]
    d = generators[0].shape[0]
    return Problem(
        rng.standard_normal((tokens, d)), PiecewiseControls(layers), len(layers), norm="none"
    )


def spectral(matrix: np.ndarray) -> float:
    return float(np.linalg.norm(matrix, 2))


def test_lie_amplification_and_ftle_are_exact_in_mpmath(rng):
    """For ubar' = ubar M the Lie layer's Jacobian is I on the token deviations and I + M
    on the mean, so sigma_max(J_n) = max(1, ||I + M_n||) and G(2) = max(1, ||(I + M_0)
    (I + M_1)||), here computed to 30 digits by mpmath's symmetric eigensolver. The
    central differences (h = u^(1/3)) and the Rayleigh quotient leave ~u^(2/3) ~ 1e-21."""
    generators = [0.6 * rng.standard_normal((3, 3)) for _ in range(2)]
    problem = linear_problem(generators, rng)
    bk = backend("mpmath", 30)
    result = perturbation_growth(problem, "lie", 1, precision=bk)
    identity = np.eye(3)
    for n, m in enumerate(generators):
        assert result.amplification[n] == pytest.approx(max(1, spectral(identity + m)), rel=1e-13)
    ctx = mpmath.mp.clone()
    ctx.dps = 30
    first, second = (ctx.eye(3) + ctx.matrix(m.tolist()) for m in generators)  # exact sums
    product = first * second
    exact = max(ctx.mpf(1), ctx.sqrt(max(ctx.eigsy(product.T * product)[0])))
    measured = ctx.mpf(result.growth_digits[-1])
    assert abs(measured / exact - 1) < 1e-19
    assert abs(ctx.mpf(result.ftle_digits[-1]) - ctx.log(exact) / 2) < 1e-19
    assert result.times == [1.0, 2.0]
    assert result.jacobian_error < 1e-19
    assert_round_trips(result)


def test_flow_amplification_matches_the_matrix_exponential(rng):
    """The reference's flow-map Jacobian is I + P_mean (expm(t M) - I): growth
    max(1, ||expm(M_0) expm(M_1)||). Float64: the error is within 3 times the reported
    Richardson estimate of the Jacobians' truncation error plus the rounding of the
    difference quotient: the reference's own error estimate of the map over the
    difference step (the map is linear, so the quotient truncates nothing; the rounding
    of a high-column step, some 1e-14, over a step of 6e-6 is some 1e-9)."""
    generators = [0.6 * rng.standard_normal((3, 3)) for _ in range(2)]
    problem = linear_problem(generators, rng)
    result = perturbation_growth(problem, "reference", 2, precision="float64")
    flows = [scipy.linalg.expm(m) for m in generators]
    exact_layers = [max(1, spectral(f)) for f in flows]
    exact_growth = max(1, spectral(flows[0] @ flows[1]))
    mapped = solve_reference(problem, steps_per_unit=2)
    step = perturbation_size(backend("float64"), None) * max(1, np.abs(mapped.states).max())
    bound = 3 * result.jacobian_error + mapped.error[-1] / step  # per layer Jacobian
    assert result.jacobian_error < 1e-6
    np.testing.assert_allclose(result.amplification, exact_layers, rtol=bound)
    assert result.growth[-1] == pytest.approx(exact_growth, rel=2 * bound)  # two layers
    # d log G = dG / G: an absolute error in the FTLE of at most 2 bound / t
    assert result.ftle[-1] == pytest.approx(math.log(exact_growth) / 2, abs=bound)


def test_post_ln_jacobians_live_in_the_tangent_space(rng):
    """The post-LN layer ends with P, so its Jacobian maps into the tangent space of S1:
    2 directions per token (mean, radial) are annihilated: rank <= N (d - 2)."""
    layers = [LayerWeights.random(4, 2, 8, rng=3)]
    problem = Problem(rng.standard_normal((2, 4)), PiecewiseControls(layers), 1, norm="post")
    bk = backend("float64")
    linearisation = linearise(problem, resolve_method("lie"), 1, bk, 1e-6)
    singular = np.linalg.svd(linearisation.jacobians[0], compute_uv=False)
    assert np.all(singular[-4:] < 1e-8 * singular[0])
    assert singular[-5] > 1e-3 * singular[0]


def test_replayed_events_give_the_derivative_of_the_solve_with_events(rng):
    """With ReLU kinks the reference steps to each crossing; the perturbed states replay
    the unperturbed step sequence and patterns. Their Jacobian applied to a direction v
    must equal the central difference of two independent solves with their own events."""
    layer = LayerWeights.random(3, 1, 6, rng=8, bias_scale=0.3)
    problem = Problem(rng.standard_normal((2, 3)), PiecewiseControls([layer]), 1, norm="pre")
    bk = backend("float64")
    method = ORDER_12_EVENTS
    with bk.active():
        _, committed = layer_trajectory(problem, method, 2, LayerFlow.from_problem(problem, bk))
    assert len(committed[0]) > 2  # pre-activations cross zero: event location split the 2 steps
    linearisation = linearise(problem, method, 2, bk, 1e-5)
    direction = rng.standard_normal((2, 3))
    h = 1e-5
    plus = solve(dataclasses.replace(problem, u0=problem.u0 + h * direction), method, 2)
    minus = solve(dataclasses.replace(problem, u0=problem.u0 - h * direction), method, 2)
    independent = ((plus - minus) / (2 * h)).ravel()
    replayed = linearisation.jacobians[0] @ direction.ravel()
    assert np.linalg.norm(replayed - independent) <= 1e-6 * np.linalg.norm(independent)


def test_mpmath_and_float64_agree_on_a_nonlinear_post_ln_problem(rng):
    """The same FTLEs in two precisions: mpmath's Jacobians are good to ~1e-27 (its
    Richardson estimate says so), float64's to its estimate; they agree within it."""
    layers = [LayerWeights.random(4, 2, 8, rng=s) for s in (1, 2)]
    problem = Problem(rng.standard_normal((2, 4)), PiecewiseControls(layers), 2, norm="post")
    for method, steps in (("lie", 1), ("projected-rk4", 2)):
        fine = perturbation_growth(problem, method, steps)  # mpmath, 40 digits
        coarse = perturbation_growth(problem, method, steps, precision="float64")
        assert fine.jacobian_error < 1e-24 and coarse.jacobian_error < 1e-8
        tolerance = 2 * 3 * coarse.jacobian_error + 1e-13  # two layers
        np.testing.assert_allclose(coarse.growth, fine.growth, rtol=tolerance)
        np.testing.assert_allclose(coarse.amplification, fine.amplification, rtol=tolerance)
        assert len(fine.ftle_digits[-1]) > 35  # the working precision, losslessly


# ------------------------------------------------------------------ FTLE convergence


@pytest.fixture(scope="module")
def smooth_post_ln_problem() -> Problem:
    """Two post-LN layers whose FFN pre-activations stay positive (b1 + 4): a smooth field."""
    rng = np.random.default_rng(7)
    layers = [LayerWeights.random(4, 2, 8, rng=s) for s in (11, 12)]
    layers = [dataclasses.replace(layer, b1=layer.b1 + 4.0) for layer in layers]
    return Problem(rng.standard_normal((2, 4)), PiecewiseControls(layers), 2, norm="post")


@pytest.mark.parametrize(
    ("method", "steps", "precision"),
    [
        ("lie", (4, 8, 16, 32, 64, 128), "float64"),
        ("strang-rk2", (2, 4, 8, 16, 32), "float64"),
        # order 4 reaches float64's floor (~1e-7: the reference's FTLE moves by 4e-8
        # between 4 and 8 steps per unit in float64) at m = 16; longdouble moves it to 1e-9
        ("projected-rk4", (1, 2, 4, 8, 16, 32), "longdouble"),
    ],
)
def test_ftle_of_the_scheme_tends_to_the_flow_at_its_order(
    smooth_post_ln_problem, method, steps, precision
):
    result = ftle_convergence(
        smooth_post_ln_problem,
        method,
        steps,
        precision=precision,
        order_estimator=estimate_order,
    )
    assert result.verdict == CheckVerdict.HOLDS
    # the local orders approach the method's from above over these levels (rk4: 4.6, 4.3,
    # 4.1), which estimate_order may call superconvergent rather than pass
    assert result.order_estimate["verdict"] in ("PASS", "SUPERCONVERGENT")
    assert abs(result.order_estimate["order"] - result.expected_order) <= 0.35
    assert result.differences[-1] < 2e-3
    assert 10 * result.floor < min(result.differences[-3:])  # the finest three are resolved
    assert_round_trips(result)


def test_ftle_convergence_fails_when_the_differences_do_not_shrink(smooth_post_ln_problem):
    """Negative control: against a wrong 'flow' (the Lie scheme at dt = 1) the differences
    tend to a non-zero constant, which must not pass as converging."""
    result = ftle_convergence(
        smooth_post_ln_problem,
        "projected-rk4",
        (2, 4, 8),
        reference="lie",
        reference_steps_per_unit=1,
        precision="float64",
    )
    assert result.verdict == CheckVerdict.FAILS
    assert min(result.differences) > 1e-2


# ------------------------------------------------------------------ stability functions


def test_stability_functions_of_the_tableaux():
    """R(z) = 1 + z, 1 + z + z^2/2 and the degree-4 Taylor polynomial of exp: an explicit
    method of order p = s <= 4 matches exp(z) to z^p."""
    assert stability_function(EULER) == [1, 1]
    assert stability_function(RK2) == [1, 1, Fraction(1, 2)]
    assert stability_function(RK4) == [1 / Fraction(math.factorial(k)) for k in range(5)]


def test_ray_boundaries_of_known_regions():
    """Euler |1 + z| <= 1 meets the negative axis at 2; RK2 at 2; RK4 at 2.785293563405...
    (the real root of 1 + z/2 + z^2/6 + z^3/24 ... = +-1) and the imaginary axis at 2 sqrt 2."""
    rk4 = stability_function(RK4)
    assert ray_boundary([1, 1], math.pi)[0] == pytest.approx(2, rel=1e-12)
    assert ray_boundary(stability_function(RK2), math.pi)[0] == (pytest.approx(2, rel=1e-12))
    assert ray_boundary(rk4, math.pi)[0] == pytest.approx(2.785293563405282, rel=1e-10)
    assert ray_boundary(rk4, math.pi / 2 + 1e-12)[0] == pytest.approx(2 * math.sqrt(2), rel=1e-6)
    assert ray_boundary([1, 1], math.pi / 3)[0] == 0.0  # Re > 0: unstable at once


@settings(max_examples=50, deadline=None)
@given(angle=st.floats(math.pi / 2 + 1e-3, math.pi), size=st.floats(0.1, 1e3))
def test_euler_ray_boundary_is_minus_two_re_over_modulus_squared(angle, size):
    value = size * complex(math.cos(angle), math.sin(angle))
    root, slope = ray_boundary([1, 1], angle)
    assert root / size == pytest.approx(-2 * value.real / abs(value) ** 2, rel=1e-9)
    assert slope == pytest.approx(-math.cos(angle), rel=1e-6)  # d|1 + r w| / dr at r*


# ------------------------------------------------------------------ stability maps


def exact_linear_boundary(coefficients, eigenvalues, factor, largest) -> int:
    """The smallest m such that every m' in m..largest passes: G_m = max(1, max_mu
    |R(mu / m')|^m') <= factor * max(1, exp(max mu)) (T = 1, M symmetric, so the mean
    mode's growth is the power of R on its eigenvalues and the deviations give 1)."""
    flow = max(1.0, math.exp(max(eigenvalues)))
    passes = [
        max(1.0, max(abs(np.polyval(coefficients[::-1], mu / m)) ** m for mu in eigenvalues))
        <= factor * flow
        for m in range(1, largest + 1)
    ]
    m = largest
    while m > 1 and passes[m - 2]:
        m -= 1
    return m


def test_stability_map_of_a_linear_flow_matches_the_exact_boundary(rng):
    """M symmetric with eigenvalues -20, -6, -0.5 (times s^2 under weight scale s): the Lie
    step is Euler on the mean mode (FFN off), projected-rk4 is RK4 on it. Measured: the
    scan's boundary equals the exact one computed from the eigenvalues; predicted: 2 / 20
    s^2 and 2.7853 / 20 s^2."""
    q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    eigenvalues = np.array([-20.0, -6.0, -0.5])
    problem = linear_problem([q @ np.diag(eigenvalues) @ q.T], rng)
    result = stability_map(
        problem,
        ("lie", "projected-rk4"),
        scales=(1.0, 1.5),
        temperatures=(1.0,),
        max_steps_per_unit=64,
        reference=ORDER_12,
        reference_steps_per_unit=32,
        samples_per_unit=1,
    )
    assert len(result.points) == 4 and result.verdict == CheckVerdict.HOLDS
    for point in result.points:
        tableau = EULER if point.method == "lie" else RK4
        coefficients = [float(c) for c in stability_function(tableau)]
        scaled = eigenvalues * point.scale**2
        stable = exact_linear_boundary(coefficients, scaled, 2.0, 64)
        assert point.stable_dt == 1 / stable and point.unstable_dt == 1 / (stable - 1)
        root = ray_boundary(stability_function(tableau), math.pi)[0]
        assert point.prediction.predicted_dt == pytest.approx(root / -scaled.min(), rel=1e-6)
        assert point.flow_growth == pytest.approx(1.0, rel=1e-6)  # deviations: growth 1
        assert point.applies and point.verdict == PointVerdict.AGREES
        assert abs(point.relative_disagreement) <= 0.2
    assert_round_trips(result)


@pytest.fixture(scope="module")
def damped_map() -> StabilityMap:
    """Random attention (weight scale 2) and the exact linear damping F(U) = -U K, K with
    eigenvalues 1..20, norm "none": at weight scale s the stiff eigenvalues are near
    -20 s^2, moved by an attention term that grows as the temperature falls."""
    rng = np.random.default_rng(1)
    layer = damped_attention_layer(4, 1, 20.0, rng=3, attention_scale=2.0)
    problem = Problem(rng.standard_normal((2, 4)), PiecewiseControls([layer]), 1, norm="none")
    return stability_map(
        problem,
        ("lie", "projected-rk4"),
        scales=(1.0, 2.0),
        temperatures=(0.25, 1.0, 4.0),
        reference=ORDER_12,  # the field is analytic: no event location (module docstring)
        reference_steps_per_unit=32,
        max_steps_per_unit=128,
        samples_per_unit=2,
    )


def test_damped_attention_map_agrees_where_the_linearisation_applies(damped_map):
    points = damped_map.points
    assert len(points) == 12
    applicable = [p for p in points if p.applies]
    assert damped_map.verdict == CheckVerdict.HOLDS
    assert {p.method for p in applicable} == {"lie", "projected-rk4"}
    assert {p.scale for p in applicable} == {1.0, 2.0}
    for point in applicable:
        assert abs(point.relative_disagreement) <= 0.2
        assert point.stable_dt < point.prediction.predicted_dt * 1.2 + point.unstable_dt
        # the bracket is what the scan saw: passing at stable_dt, failing at unstable_dt
        assert point.scan[round(1 / point.stable_dt)] <= damped_map.factor
        assert point.scan[round(1 / point.unstable_dt)] > damped_map.factor
    for point in points:
        if not point.applies:
            assert point.reasons and point.verdict == PointVerdict.NOT_APPLICABLE
    assert_round_trips(damped_map)


def test_damped_attention_spectrum_follows_the_damping(damped_map):
    """Independent of the scan: the stiffest eigenvalue is real and about -20 s^2 (the
    damping's largest rate; attention moves it by less than half), and the attention,
    whose score term scales with 1 / temperature, moves it by different amounts at
    different temperatures."""
    for point in damped_map.points:
        value = complex(*point.prediction.eigenvalue)
        assert abs(value.imag) <= 1e-6 * abs(value)
        assert 0.5 < -value.real / (20 * point.scale**2) < 2.0
    for scale in (1.0, 2.0):
        predicted = {
            p.prediction.predicted_dt
            for p in damped_map.points
            if p.method == "lie" and p.scale == scale
        }
        assert len(predicted) == 3 and max(predicted) / min(predicted) > 1.02


def test_post_ln_transformer_map_says_where_the_linearisation_does_not_apply(rng):
    """A random post-LN Transformer at weight scales 1 and 2: slow damped eigenvalues
    (|Re lambda| ~ 1 to 6 per unit time), a spectrum that changes along the trajectory and,
    at scale 2, a non-monotone scan whose boundary the Lie scheme's O(dt) growth error
    sets. The map must decline to compare, and every reason it gives must be borne out by
    the figures it reports; for Lie (Euler) the expected offset has the closed form
    log(factor G) / (T |Re lambda|)."""
    layers = [LayerWeights.random(4, 1, 8, rng=5)]
    problem = Problem(rng.standard_normal((2, 4)), PiecewiseControls(layers), 1, norm="post")
    result = stability_map(
        problem,
        "lie",
        scales=(1.0, 2.0),
        temperatures=(1.0,),
        reference=ORDER_12_EVENTS,
        reference_steps_per_unit=8,
        samples_per_unit=2,
    )
    factor, largest = result.factor, result.inputs["max_steps_per_unit"]
    assert result.verdict == PointVerdict.NOT_APPLICABLE
    for point in result.points:
        assert not point.applies and point.reasons
        reasons = " | ".join(point.reasons)
        value = complex(*point.prediction.eigenvalue)
        closed_form = math.log(factor * point.flow_growth) / -value.real
        assert point.expected_offset == pytest.approx(closed_form, rel=1e-6)
        slow = abs(point.expected_offset) > OFFSET_LIMIT
        assert slow == ("damps too slowly" in reasons)
        assert (point.prediction.spread > 1.2) == ("changes along the trajectory" in reasons)
        ratios = sorted(point.scan.items())
        if "dt = 1 already passes" in reasons:
            assert all(r <= factor for _, r in ratios)
        coarse_pass_fine_fail = any(  # m_coarse < m_fine, the coarser dt passing
            coarse <= factor < fine
            for i, (_, fine) in enumerate(ratios)
            for _, coarse in ratios[:i]
        )
        assert coarse_pass_fine_fail == ("not monotone" in reasons)
        if point.measured_dt is not None:
            carried = abs(point.scan[largest] - 1) * largest * point.stable_dt
            assert point.accuracy_error == pytest.approx(carried, rel=1e-12)
            assert (carried > (factor - 1) / 2) == ("accuracy, not stability" in reasons)
    assert {p.scale for p in result.points if "not monotone" in " ".join(p.reasons)} == {2.0}
    assert_round_trips(result)  # a "not applicable" verdict and its reasons


# ------------------------------------------------------------------ bad input


@pytest.fixture(scope="module")
def small_problem() -> Problem:
    layers = [LayerWeights.random(4, 1, 4, rng=0)]
    return Problem(np.arange(8.0).reshape(2, 4), PiecewiseControls(layers), 1, norm="post")


@pytest.mark.parametrize("size", [0.0, -1e-6, float("nan"), float("inf")])
def test_a_perturbation_size_that_is_not_positive_is_rejected(small_problem, size):
    with pytest.raises(InvalidInputError, match="relative_step"):
        perturbation_growth(small_problem, relative_step=size, precision="float64")
    with pytest.raises(InvalidInputError, match="relative_step"):
        stability_map(small_problem, relative_step=size)


@pytest.mark.parametrize(
    ("keyword", "value", "name"),
    [
        ("scales", (), "scales"),
        ("temperatures", [], "temperatures"),
        ("scales", (1.0, float("inf")), "scales"),
        ("temperatures", (1.0, 0.0), "temperatures"),
        ("methods", (), "methods"),
        ("factor", 1.0, "factor"),
        ("methods", ("euler-backwards",), "method"),
    ],
)
def test_bad_sweeps_are_rejected(small_problem, keyword, value, name):
    with pytest.raises(InvalidInputError, match=name):
        stability_map(small_problem, **{keyword: value})


def test_an_empty_or_short_refinement_sweep_is_rejected(small_problem):
    for steps in ((), (1, 2), (2, 2, 4)):
        with pytest.raises(InvalidInputError, match="steps_per_unit"):
            ftle_convergence(small_problem, "lie", steps, precision="float64")


def test_non_finite_weights_are_rejected_by_name():
    layer = LayerWeights.random(4, 1, 4, rng=0)
    broken = layer.w1.copy()
    broken[1, 2] = np.nan
    with pytest.raises(InvalidInputError, match="w1"):
        dataclasses.replace(layer, w1=broken)
    with pytest.raises(TideError, match="stiffness"):
        damped_attention_layer(4, 1, float("nan"))
    with pytest.raises(InvalidInputError, match="scale"):
        varied_problem(
            Problem(np.ones((2, 4)) * np.arange(4), PiecewiseControls([layer]), 1),
            float("nan"),
            1.0,
        )
