"""Theorem 3.1 (LN with eps = 0 and scalar gain is the projection onto S1), with hypothesis."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from properties.claim_check import CheckVerdict
from properties.exactness.projection_theorem import (
    check_layer_norm_idempotence,
    check_projection_theorem,
)
from solvers.equation.norms import layer_norm
from tests.precisions import ALL_PRECISIONS

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)


@st.composite
def rows(draw):
    """(N, d) arrays whose rows are not constant (std above 1e-6 of their size)."""
    shape = (draw(st.integers(1, 6)), draw(st.integers(2, 24)))
    v = draw(arrays(np.float64, shape, elements=finite))
    spread = np.std(v, axis=-1)
    size = np.max(np.abs(v), axis=-1)
    flat = spread <= 1e-6 * np.maximum(size, 1.0)
    # a ramp whose steps dwarf the row's own variation makes a flat row non-constant; only
    # flat rows get it (on another row it could cancel the row's variation exactly)
    v[flat] += np.arange(shape[1]) * (1.0 + size[flat, None])
    return v


@settings(max_examples=60, deadline=None)
@given(v=rows(), sigma1=finite, sigma2=st.floats(1e-2, 1e2), seed=st.integers(0, 2**32 - 1))
@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_every_part_of_theorem_3_1_holds(precision, v, sigma1, sigma2, seed):
    checks = check_projection_theorem(
        v, sigma1, sigma2, np.random.default_rng(seed), samples=8, precision=precision
    )
    assert len(checks) == 5
    for check in checks:
        assert check.verdict == CheckVerdict.HOLDS, check


def test_theorem_checks_fail_for_maps_that_are_not_the_projection(rng):
    v = rng.standard_normal((6, 16)) * 2 + 0.3
    sigma1, sigma2 = 0.5, 1.5

    def antipodal(bk, x):  # sigma1 - sigma2 z: the point of S1 opposite P(V)
        return layer_norm(bk, x, bk.asarray(-sigma2), bk.asarray(sigma1), bk.asarray(0.0))

    def with_eps(bk, x):  # torch-style LN, eps = 0.1: off S1 and not idempotent
        return layer_norm(bk, x, bk.asarray(sigma2), bk.asarray(sigma1), bk.asarray(0.1))

    verdicts = {
        name: {
            c.claim: c.verdict
            for c in check_projection_theorem(v, sigma1, sigma2, rng, projection=p)
        }
        for name, p in (("antipodal", antipodal), ("eps", with_eps))
    }
    # the antipodal point of S1 lies on S1, but it is the farthest point, not the nearest
    assert verdicts["antipodal"]["P(V) lies on S1"] == CheckVerdict.HOLDS
    assert verdicts["antipodal"]["P(V) is the nearest point of S1"] == CheckVerdict.FAILS
    assert verdicts["antipodal"]["V - P(V) is normal to S1 at P(V)"] == CheckVerdict.HOLDS
    assert verdicts["eps"]["P(V) lies on S1"] == CheckVerdict.FAILS
    assert verdicts["eps"]["P is idempotent"] == CheckVerdict.FAILS


@settings(max_examples=40, deadline=None)
@given(v=rows(), eps=st.floats(1e-6, 1e-1))
def test_torch_style_layer_norm_with_eps_is_not_idempotent(v, eps):
    """LN(LN(V)) - LN(V): LN(V) has variance var/(var + eps), which LN maps again."""
    check = check_layer_norm_idempotence(v, 1.0, 0.0, eps)
    variance = v.var(axis=-1)
    # the defect predicted by the formula, row by row: LN(V) = c (V - mean) with
    # c = 1/sqrt(var + eps); LN(LN V) = (V - mean)/sqrt(var + eps (var + eps)/var)
    once = (v - v.mean(-1, keepdims=True)) / np.sqrt(variance + eps)[:, None]
    twice = once / np.sqrt(variance / (variance + eps) + eps)[:, None]
    predicted = np.abs(twice - once).max() / np.abs(once).max()
    assert check.defect == pytest.approx(predicted, rel=1e-6, abs=1e-15)
    assert check.verdict == (
        CheckVerdict.FAILS if predicted > check.tolerance else CheckVerdict.HOLDS
    )


def test_per_feature_affine_layer_norm_is_not_idempotent(rng):
    v = rng.standard_normal((8, 16))
    gain, bias = 1 + 0.3 * rng.standard_normal(16), 0.3 * rng.standard_normal(16)
    check = check_layer_norm_idempotence(v, gain, bias, 0.0)
    assert check.verdict == CheckVerdict.FAILS and check.defect > 1e-2
    assert check_layer_norm_idempotence(v, 1.3, -0.2, 0.0).verdict == CheckVerdict.HOLDS


@pytest.mark.parametrize("precision", ALL_PRECISIONS, ids=repr)
@pytest.mark.parametrize(("sigma1", "sigma2"), [(0.0, 1.0), (-0.7, 3.0)])
def test_theorem_3_1_holds_in_every_number_system(precision, sigma1, sigma2):
    rng = np.random.default_rng(21)
    v = 0.5 + 2.0 * rng.standard_normal((2, 5, 12))
    checks = check_projection_theorem(v, sigma1, sigma2, rng, samples=4, precision=precision)
    for check in checks:
        assert check.verdict == CheckVerdict.HOLDS, check
    # the tolerance follows the precision: 8 (2 + kappa + log2 d) u
    assert (
        checks[0].tolerance
        < 100 * precision.unit_roundoff * checks[0].configuration["conditioning"]
    )
