"""Invariants and structure (issue 6): permutation equivariance, attention weights and the
convex hull, the flow on S1, relu and the LN projection as projections, with hypothesis."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import properties.invariants.equivariance as equivariance
from properties.claim_check import CheckVerdict
from properties.conditioning.rounding_bounds import attention_rounding_bound
from properties.exactness.projection_theorem import check_projection_idempotence_and_scale
from properties.invariants.attention_weights import check_attention_weights
from properties.invariants.constraint_set import check_flow_stays_on_s1
from properties.invariants.projections import (
    ProjectionExpansion,
    check_relu_projection,
    measure_projection_expansion,
)
from solvers import InvalidInputError, LayerWeights, PiecewiseControls, Problem, backend
from solvers.equation.norms import layer_norm, project_to_s1
from solvers.equation.operators import attention, attention_heads
from solvers.errors import NumericalBreakdownError
from solvers.results.records import from_json, to_json

FLOATS = ("float32", "float64")
MPMATH = backend("mpmath", 30)


@st.composite
def layers(draw):
    """Seeded random layers over widths, heads, hidden sizes and weight scales."""
    d = draw(st.sampled_from([4, 6, 8]))
    heads = draw(st.sampled_from([h for h in (1, 2, 3, 4) if d % h == 0]))
    return LayerWeights.random(
        d,
        heads,
        draw(st.integers(1, 12)),
        draw(st.integers(0, 2**32 - 1)),
        weight_scale=draw(st.floats(0.25, 2.0)),
        bias_scale=draw(st.floats(0.0, 1.0)),
    )


@st.composite
def states(draw, d, max_tokens=6, batch=True):
    """(N, d) or (B, N, d) arrays with non-constant rows (a ramp lifts flat rows)."""
    shape = (draw(st.integers(1, max_tokens)), d)
    if batch and draw(st.booleans()):
        shape = (draw(st.integers(1, 2)), *shape)
    v = draw(arrays(np.float64, shape, elements=st.floats(-4, 4)))
    size = np.max(np.abs(v), axis=-1)
    flat = np.std(v, axis=-1) <= 1e-3 * np.maximum(size, 1.0)
    v[flat] += np.arange(d) * (1.0 + size[flat, None])
    return v


@st.composite
def layer_state_permutation(draw, batch=True):
    layer = draw(layers())
    u = draw(states(layer.d_model, batch=batch))
    return layer, u, np.array(draw(st.permutations(range(u.shape[-2]))))


def assert_all_hold(checks):
    for check in checks:
        assert check.verdict == CheckVerdict.HOLDS, check
    json.dumps([to_json(c) for c in checks], allow_nan=False)


# ---------------------------------------------------------------- permutation equivariance


@settings(max_examples=40, deadline=None)
@given(case=layer_state_permutation(), norm=st.sampled_from(["post", "pre", "none"]))
@pytest.mark.parametrize("precision", FLOATS)
def test_operators_and_layer_are_permutation_equivariant(precision, case, norm):
    layer, u, order = case
    checks = equivariance.check_permutation_equivariance(
        layer, u, order, precision=precision, norm=norm, operators=equivariance.OPERATORS[:4]
    )
    assert [c.claim.split()[0] for c in checks] == ["attention", "feed-forward", "layer", "a"]
    assert_all_hold(checks)


@settings(max_examples=20, deadline=None)
@given(
    case=layer_state_permutation(batch=False),
    steps=st.sampled_from([1, 2, 3]),
    norm=st.sampled_from(["post", "pre", "none"]),
    method=st.sampled_from(["projected-rk4", "ambient-rk4", "projected-rk2"]),
)
@pytest.mark.parametrize("precision", FLOATS)
def test_continuous_solve_is_permutation_equivariant(precision, case, steps, norm, method):
    layer, u, order = case
    [check] = equivariance.check_permutation_equivariance(
        layer,
        u,
        order,
        precision=precision,
        operators=["continuous_solve"],
        steps_per_unit=steps,
        norm=norm,
        method=method,
    )
    assert_all_hold([check])


def test_equivariance_holds_in_mpmath(rng):
    layer = LayerWeights.random(6, 2, 8, rng)
    u = rng.standard_normal((4, 6))
    checks = equivariance.check_permutation_equivariance(
        layer, u, [2, 0, 3, 1], precision=MPMATH, operators=equivariance.OPERATORS[:4]
    )
    assert_all_hold(checks)
    assert max(c.tolerance for c in checks) < 1e-24


@pytest.mark.parametrize("precision", FLOATS)
def test_positional_information_breaks_equivariance(precision, rng):
    """A causal mask or token weights tie the operator to positions: flagged as failing."""
    layer = LayerWeights.random(8, 2, 16, rng)
    u = rng.standard_normal((5, 8))
    order = [3, 0, 4, 1, 2]
    # the derived tolerances resolve the claims: an O(1e-2) defect would already fail
    checks = equivariance.check_permutation_equivariance(layer, u, order, precision=precision)
    assert_all_hold(checks)
    assert max(c.tolerance for c in checks) < (1e-2 if precision == "float32" else 1e-10)
    for positional in ({"causal": True}, {"token_weights": np.arange(1.0, 6.0)}):
        checks = equivariance.check_permutation_equivariance(
            layer, u, order, precision=precision, **positional
        )
        verdicts = {c.claim.split()[0]: c.verdict for c in checks}
        # the feed-forward and the norm act row by row and stay equivariant
        assert verdicts == {
            "attention": CheckVerdict.FAILS,
            "feed-forward": CheckVerdict.HOLDS,
            "layer": CheckVerdict.HOLDS,
            "a": CheckVerdict.FAILS,
        }, checks
        failing = [c for c in checks if c.verdict == CheckVerdict.FAILS]
        assert len(failing) == 3 and min(c.defect for c in failing) > 1e-3


def test_a_token_mixing_feed_forward_is_flagged(monkeypatch, rng):
    """A deliberately wrong FFN that adds the first token to every row is not equivariant."""
    layer = LayerWeights.random(8, 2, 16, rng)
    u = rng.standard_normal((4, 8))
    real = equivariance.feed_forward

    def mixing(bk, x, w, pattern=None):
        return real(bk, x, w) + x[..., :1, :]

    monkeypatch.setattr(equivariance, "feed_forward", mixing)
    [check] = equivariance.check_permutation_equivariance(
        layer, u, [1, 2, 3, 0], operators=["feed_forward"]
    )
    assert check.verdict == CheckVerdict.FAILS and check.defect > 1e-2


def test_equivariance_rejects_bad_input(rng):
    layer = LayerWeights.random(4, 1, 4, rng)
    u = rng.standard_normal((3, 4))
    check = equivariance.check_permutation_equivariance
    with pytest.raises(InvalidInputError, match=r"permutation must reorder range\(3\)"):
        check(layer, u, [0, 0, 1])
    with pytest.raises(InvalidInputError, match="unknown operator 'softmax'"):
        check(layer, u, [0, 1, 2], operators=["softmax"])
    with pytest.raises(InvalidInputError, match="method 'lie' is not an unsplit"):
        check(layer, u, [0, 1, 2], method="lie")
    with pytest.raises(InvalidInputError, match="u must be finite"):
        check(layer, np.full((3, 4), np.nan), [0, 1, 2])
    with pytest.raises(InvalidInputError, match="dt must be > 0"):
        check(layer, u, [0, 1, 2], dt=0.0)
    with pytest.raises(InvalidInputError, match="layer must be a LayerWeights"):
        check("layer", u, [0, 1, 2])


# ------------------------------------------------------ attention weights and the hull


@settings(max_examples=60, deadline=None)
@given(
    case=layer_state_permutation(),
    causal=st.booleans(),
    weighted=st.booleans(),
    precision=st.sampled_from(["float16", "float32", "float64"]),
)
def test_attention_rows_are_probabilities_and_outputs_in_the_hull(
    case, causal, weighted, precision
):
    layer, u, _ = case
    tokens = u.shape[-2]
    weights = np.linspace(0.5, 2.0, tokens) if weighted else None
    checks = check_attention_weights(
        layer, u, precision=precision, causal=causal, token_weights=weights
    )
    assert len(checks) == 5
    assert_all_hold(checks)
    unit = backend(precision).unit_roundoff
    assert checks[1].tolerance <= 2.01 * 2 * tokens * unit  # gamma_2N


@pytest.mark.parametrize("precision", [MPMATH, backend("longdouble")], ids=repr)
def test_attention_hull_in_high_precision(precision, rng):
    layer = LayerWeights.random(6, 3, 8, rng, weight_scale=1.5)
    checks = check_attention_weights(
        layer, rng.standard_normal((5, 6)), precision=precision, causal=True
    )
    assert_all_hold(checks)
    assert checks[-1].tolerance < 1e3 * precision.unit_roundoff


def test_attention_heads_are_softmax_of_scaled_scores(rng):
    """The per-head weights against a plain numpy evaluation of softmax(s Q K^T)."""
    layer = LayerWeights.random(6, 2, 8, rng)
    u = rng.standard_normal((4, 6))
    bk = backend("float64")
    p, v, o = attention_heads(bk, u, layer.on(bk))
    for h in range(2):
        q, k = u @ layer.wq[h] + layer.bq[h], u @ layer.wk[h] + layer.bk[h]
        scores = layer.attention_scale * q @ k.T
        expected = np.exp(scores - scores.max(-1, keepdims=True))
        expected /= expected.sum(-1, keepdims=True)
        np.testing.assert_allclose(p[h], expected, rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(v[h], u @ layer.wv[h] + layer.bv[h], rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(o[h], expected @ v[h], rtol=1e-13, atol=1e-15)


def test_overflow_is_a_numerical_breakdown(rng):
    """float16 scores beyond 65504 overflow: reported as such, not as a failed claim."""
    layer = LayerWeights.random(8, 2, 16, rng, weight_scale=4.0)
    u = 60 * rng.standard_normal((4, 8))
    with pytest.raises(NumericalBreakdownError, match=r"float16.*inf or NaN in attention"):
        check_attention_weights(layer, u, precision="float16")
    with pytest.raises(NumericalBreakdownError, match=r"float16.*inf or NaN in attention"):
        equivariance.check_permutation_equivariance(
            layer, u, [1, 0, 3, 2], precision="float16", operators=["attention"]
        )


def test_wrong_attention_weights_are_flagged(rng):
    """Unnormalised or signed mixing weights are not probability rows; the output leaves
    the hull (or the certificate certifies nothing)."""
    layer = LayerWeights.random(8, 2, 16, rng, weight_scale=1.5)
    u = rng.standard_normal((5, 8))

    def unnormalised(bk, scores):  # exp without the division: rows do not sum to 1
        return bk.exp(scores)

    def signed(bk, scores):  # scores minus their row mean: rows sum to 0, entries of both signs
        return scores - bk.sum(scores, -1) / scores.shape[-1]

    verdicts = {
        f.__name__: {c.claim: c.verdict for c in check_attention_weights(layer, u, row_weights=f)}
        for f in (unnormalised, signed)
    }
    assert verdicts["unnormalised"] == {
        "attention weights are non-negative": CheckVerdict.HOLDS,
        "attention rows sum to 1": CheckVerdict.FAILS,
        "the heads recombine to the attention operator": CheckVerdict.FAILS,
        "each head's output lies within its value rows' coordinate bounds": CheckVerdict.FAILS,
        "each head's output lies in the convex hull of its value rows": CheckVerdict.FAILS,
    }
    assert verdicts["signed"]["attention weights are non-negative"] == CheckVerdict.FAILS
    assert verdicts["signed"]["attention rows sum to 1"] == CheckVerdict.FAILS
    assert verdicts["signed"]["each head's output lies in the convex hull of its value rows"] == (
        CheckVerdict.FAILS
    )


# ----------------------------------------------------------------------- the flow on S1


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    tokens=st.integers(1, 5),
    depth=st.integers(1, 3),
    method=st.sampled_from([("lie", 1), ("lie", 2), ("projected-rk4", 2), ("strang-rk2", 1)]),
    norm_pair=st.tuples(st.floats(-2, 2), st.floats(0.1, 3)),
    precision=st.sampled_from(FLOATS),
)
def test_post_ln_flow_stays_on_s1(seed, tokens, depth, method, norm_pair, precision):
    rng = np.random.default_rng(seed)
    sigma1, sigma2 = norm_pair
    stack = []
    for _ in range(depth):
        norm = (sigma2, sigma1)
        stack.append(
            dataclasses.replace(LayerWeights.random(8, 2, 12, rng), norm1=norm, norm2=norm)
        )
    u = 3 * rng.standard_normal((tokens, 8)) + rng.standard_normal()
    problem = Problem(u, PiecewiseControls(stack), float(depth))
    check = check_flow_stays_on_s1(problem, *method, precision=precision)
    assert_all_hold([check])
    assert check.configuration["layers"] == depth


def test_layer_norm_with_eps_leaves_s1(rng):
    """eps > 0: each LN output has variance sigma2^2 var / (var + eps), not sigma2^2."""
    stack = [LayerWeights.random(8, 2, 16, rng, eps=1e-3) for _ in range(2)]
    check = check_flow_stays_on_s1(
        Problem(rng.standard_normal((4, 8)), PiecewiseControls(stack), 2.0)
    )
    assert check.verdict == CheckVerdict.FAILS
    assert 1e-5 < check.defect < 1e-3  # about eps / (2 var) of the unit-gain std, / size


def test_s1_check_rejects_other_norms(rng):
    layer = LayerWeights.random(8, 2, 16, rng)
    u = rng.standard_normal((4, 8))
    with pytest.raises(InvalidInputError, match="only with post-LN"):
        check_flow_stays_on_s1(Problem(u, PiecewiseControls([layer]), 1.0, "pre"))
    affine = LayerWeights.random(8, 2, 16, rng, affine=True)
    with pytest.raises(InvalidInputError, match="per-feature norm2 gain"):
        check_flow_stays_on_s1(Problem(u, PiecewiseControls([affine]), 1.0))


# -------------------------------------------------------------- relu and the projection

finite = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(
    pair=st.integers(1, 40).flatmap(
        lambda n: st.tuples(
            arrays(np.float64, n, elements=finite), arrays(np.float64, n, elements=finite)
        )
    ),
    precision=st.sampled_from(["float16", "bfloat16", "float32", "float64"]),
)
def test_relu_is_an_idempotent_non_expansive_projection(pair, precision):
    checks = check_relu_projection(*pair, precision=precision)
    assert_all_hold(checks)
    assert [c.tolerance for c in checks] == [0.0, 0.0]


def test_relu_checks_in_mpmath(rng):
    assert_all_hold(check_relu_projection(*rng.standard_normal((2, 30)), precision=MPMATH))


@st.composite
def rows(draw):
    shape = (draw(st.integers(1, 5)), draw(st.integers(2, 20)))
    v = draw(arrays(np.float64, shape, elements=st.floats(-1e3, 1e3)))
    size = np.max(np.abs(v), axis=-1)
    flat = np.std(v, axis=-1) <= 1e-6 * np.maximum(size, 1.0)
    v[flat] += np.arange(shape[1]) * (1.0 + size[flat, None])
    return v


@settings(max_examples=40, deadline=None)
@given(v=rows(), sigma1=st.floats(-100, 100), sigma2=st.floats(1e-2, 1e2))
@pytest.mark.parametrize("precision", FLOATS)
def test_projection_is_idempotent_and_scale_invariant(precision, v, sigma1, sigma2):
    checks = check_projection_idempotence_and_scale(v, sigma1, sigma2, precision=precision)
    assert_all_hold(checks)


def test_projection_checks_flag_layer_norm_with_eps(rng):
    v = 0.4 + rng.standard_normal((6, 12))
    sigma1, sigma2 = 0.5, 2.0

    def with_eps(bk, x):
        return layer_norm(bk, x, bk.asarray(sigma2), bk.asarray(sigma1), bk.asarray(1e-3))

    for precision in (*FLOATS, MPMATH):
        assert_all_hold(
            check_projection_idempotence_and_scale(v, sigma1, sigma2, precision=precision)
        )
        wrong = check_projection_idempotence_and_scale(
            v, sigma1, sigma2, precision=precision, projection=with_eps
        )
        assert [c.verdict for c in wrong] == [CheckVerdict.FAILS, CheckVerdict.FAILS]


@settings(max_examples=25, deadline=None)
@given(
    d=st.integers(3, 24),
    sigma1=st.floats(-5, 5),
    sigma2=st.floats(0.1, 10),
    seed=st.integers(0, 2**32 - 1),
)
def test_projection_expansion_is_measured_against_the_radius(d, sigma1, sigma2, seed):
    result = measure_projection_expansion(d, sigma1, sigma2, seed)
    assert_all_hold(result.checks)
    data = json.loads(json.dumps(to_json(result), allow_nan=False))
    assert to_json(from_json(ProjectionExpansion, data)) == data
    assert result.radius == pytest.approx(sigma2 * math.sqrt(d), rel=1e-15)
    # P's local Lipschitz constant at radial distance r is R / r (theory), measured with a
    # tangent step of relative size 1e-3, whose chord shortens it by 3 / 8 step^2
    np.testing.assert_allclose(result.local_ratio, 1 / np.array(result.radii), rtol=1e-5)
    # expansive inside the ball of radius R, non-expansive outside
    assert result.max_ratio_inside > 10
    assert result.max_ratio_outside <= 1 + 1e-9
    ratio, nearest = np.array(result.pair_ratio), np.array(result.pair_min_radius)
    assert np.all(ratio <= np.maximum(1.0, result.radius / nearest) * (1 + 1e-9))


@pytest.mark.parametrize("precision", ["float32", MPMATH], ids=str)
def test_projection_expansion_in_other_precisions(precision):
    result = measure_projection_expansion(8, 0.3, 1.5, 3, precision=precision)
    assert_all_hold(result.checks)


def test_expansion_check_flags_a_map_onto_a_larger_sphere():
    """2 P(v) - sigma1 maps onto the sphere of radius 2R: twice as expansive as claimed."""
    sigma1, sigma2 = 0.3, 1.5

    def doubled(bk, x):
        return 2 * project_to_s1(bk, x, sigma1, sigma2) - bk.asarray(sigma1)

    result = measure_projection_expansion(8, sigma1, sigma2, 1, projection=doubled)
    assert [c.verdict for c in result.checks] == [
        CheckVerdict.FAILS,
        CheckVerdict.FAILS,
        CheckVerdict.FAILS,
    ]
    assert result.checks[1].defect == pytest.approx(1.0, abs=1e-3)  # ratio = 2 R / r


def test_expansion_rejects_bad_input():
    with pytest.raises(InvalidInputError, match="step must be > 0"):
        measure_projection_expansion(8, 0.0, 1.0, step=0.0)
    with pytest.raises(InvalidInputError, match="radii must be a non-empty"):
        measure_projection_expansion(8, 0.0, 1.0, radii=[])
    with pytest.raises(InvalidInputError, match="d must be >= 3"):
        measure_projection_expansion(2, 0.0, 1.0)


def test_attention_rounding_bound_covers_measured_error(rng):
    """The derived float32 bound against the float32 rounding error, measured in float64 on
    the same (float32) data: a bound on rounding, so every entry must lie under it."""
    layer = LayerWeights.random(8, 2, 16, rng, weight_scale=2.0)
    names = ("wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo", "w1", "b1", "w2", "b2")
    layer = dataclasses.replace(
        layer,
        scale=float(np.float32(layer.attention_scale)),
        **{n: np.float32(getattr(layer, n)).astype(float) for n in names},
    )
    u = np.float32(3 * rng.standard_normal((6, 8))).astype(float)
    b32, b64 = backend("float32"), backend("float64")
    got = attention(b32, b32.asarray(u), layer.on(b32)).astype(float)
    error = np.abs(got - attention(b64, u, layer.on(b64)))
    bound = attention_rounding_bound(u, layer, None, b32.unit_roundoff)
    assert np.all(error <= bound)
