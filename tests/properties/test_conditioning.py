"""Measured conditioning (issue 6): the LN projection near constant rows (Lipschitz ~ 1/std)
and attention as beta = 1 / temperature grows (linear growth with ties, hard-attention
limit without), compared with what the mathematics predicts, and bad input."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import properties.conditioning.attention_conditioning as attention
import properties.conditioning.projection_conditioning as projection
from properties.claim_check import CheckVerdict
from solvers import InvalidInputError, LayerWeights, TideError, backend
from solvers.equation.norms import layer_norm
from solvers.results.line_fit import fit_line
from solvers.results.records import from_json, to_json


def assert_round_trips(result):
    """The result as JSON (no nan or inf literals), read back into its class unchanged."""
    data = json.loads(json.dumps(to_json(result), allow_nan=False))
    assert to_json(from_json(type(result), data)) == data


# ------------------------------------------------------------------ LN near constant rows


@pytest.mark.parametrize(
    ("sigma1", "sigma2", "offset", "d"), [(0.0, 1.0, 0.7, 16), (-1.5, 3.0, 40.0, 7)]
)
def test_layer_norm_lipschitz_grows_like_one_over_std_in_mpmath(sigma1, sigma2, offset, d):
    result = projection.layer_norm_conditioning(
        sigma1=sigma1, sigma2=sigma2, offset=offset, d=d, seed=3
    )
    assert result.verdict == CheckVerdict.HOLDS
    assert result.decades >= 6 and len(result.fitted) == len(result.stds) == 13
    assert -1.05 <= result.slope <= -0.95
    assert result.slope_interval[0] <= result.slope <= result.slope_interval[1]
    # theory: a tangent perturbation at std s is stretched by exactly sigma2 / s; the
    # central difference shortens the arc to a chord by (h / s)^2 / 2 = 5e-9
    np.testing.assert_allclose(result.scaled, sigma2, rtol=1e-8)
    assert result.constant == pytest.approx(sigma2, rel=1e-8)
    assert_round_trips(result)


@settings(max_examples=30, deadline=None)
@given(
    sigma1=st.floats(-10, 10),
    sigma2=st.floats(0.01, 100),
    offset=st.floats(-10, 10),
    d=st.integers(3, 32),
    seed=st.integers(0, 2**32 - 1),
)
def test_layer_norm_conditioning_in_float64(sigma1, sigma2, offset, d, seed):
    """Over four decades (1 .. 1e-4) float64 resolves every point; slope -1 at 5%."""
    stds = np.logspace(0, -4, 9)
    result = projection.layer_norm_conditioning(
        stds, sigma1=sigma1, sigma2=sigma2, offset=offset, d=d, seed=seed, precision="float64"
    )
    assert result.decades >= 4 and result.fitted == result.stds
    assert -1.05 <= result.slope <= -0.95
    assert result.verdict == CheckVerdict.HOLDS
    np.testing.assert_allclose(result.scaled, sigma2, rtol=1e-4)


def test_float32_resolves_fewer_decades_and_says_so():
    """The derived rounding error of each point decides which are fitted: in float32 the
    cancellation near constant rows leaves only the larger stds."""
    result = projection.layer_norm_conditioning(precision="float32", relative_step=1e-2)
    dropped = [s for s in result.stds if s not in result.fitted]
    assert dropped and min(result.fitted) > max(dropped)
    rounding = dict(zip(result.stds, result.rounding, strict=True))
    assert all(rounding[s] > projection.ROUNDING_LIMIT for s in dropped)
    # on the points it can resolve
    assert result.decades < 4 and result.verdict == CheckVerdict.HOLDS
    assert -1.05 <= result.slope <= -0.95


def test_a_layer_norm_with_eps_is_not_ill_conditioned(monkeypatch):
    """Negative control: with eps = 1e-8 the constant saturates at sigma2 / sqrt(eps) below
    std ~ 1e-4, so the fitted slope over six decades is far from -1 and the verdict fails."""

    def with_eps(bk, x, sigma1, sigma2):
        return layer_norm(bk, x, bk.asarray(sigma2), bk.asarray(sigma1), bk.asarray(1e-8))

    monkeypatch.setattr(projection, "project_to_s1", with_eps)
    result = projection.layer_norm_conditioning(precision="float64")
    assert result.verdict == CheckVerdict.FAILS
    assert result.slope > -0.8
    assert result.lipschitz[-1] == pytest.approx(1 / math.sqrt(1e-12 + 1e-8), rel=1e-3)


# ----------------------------------------------------------- attention and temperature


def tied_keys(rng, tokens=4):
    """One head with d_k = 4 < d = 8 and tokens that differ only in the null space of Wk:
    every key is the same, so no row ever saturates (P = 1/N at every beta)."""
    layer = LayerWeights.random(8, 1, 16, rng, d_k=4, d_v=8)
    left, _, _ = np.linalg.svd(layer.wk[0])
    null = left[:, 4:]  # n @ Wk = 0
    u = rng.standard_normal(8) + rng.standard_normal((tokens, 4)) @ null.T
    return layer, u


def score_term_jacobian(layer, u):
    """The beta-linear part J1 of the Jacobian at uniform attention with equal keys:
    dA_i = (s / N) sum_j (Q_i . dU_j Wk) (V_j - Vbar) Wo, as an (N d) x (N d) matrix."""
    tokens, d = u.shape
    q = u @ layer.wq[0] + layer.bq[0]
    v = u @ layer.wv[0] + layer.bv[0]
    out = (v - v.mean(0)) @ layer.wo[0]  # (N, d): the output direction of key j
    key = q @ layer.wk[0].T  # (N, d): the input direction of query i
    blocks = layer.attention_scale / tokens * np.einsum("ja,ib->iajb", out, key)
    return blocks.reshape(tokens * d, tokens * d)


def test_tied_rows_never_saturate_and_the_constant_grows_linearly(rng):
    layer, u = tied_keys(rng)
    betas = 2.0 ** np.arange(0, 15)
    result = attention.attention_conditioning(layer, u, betas)
    assert 0.95 <= result.growth_exponent <= 1.05
    assert result.growth.slope_interval[0] <= 1 <= result.growth.slope_interval[1] + 1e-4
    np.testing.assert_allclose(result.saturation, 1 / len(u), rtol=1e-9)
    # the measured slope L / beta tends to the norm of the score term, derived above
    expected = np.linalg.norm(score_term_jacobian(layer, u), 2)
    assert result.lipschitz[-1] / betas[-1] == pytest.approx(expected, rel=1e-3)
    # hard attention is the uniform row here: A_beta = A_hard for every beta
    assert math.isinf(result.score_gap)
    assert max(result.distance_to_hard) <= max(result.rounding_floor)
    assert result.decay.points == 0
    assert_round_trips(result)


def test_generic_rows_saturate_to_hard_attention(rng):
    layer = LayerWeights.random(8, 2, 16, rng)
    u = rng.standard_normal((4, 8))
    result = attention.attention_conditioning(layer, u)  # 1 .. 1024, three per octave
    # the smallest top-two score gap, computed here from the definition
    gaps = []
    for h in range(layer.heads):
        q, k = u @ layer.wq[h] + layer.bq[h], u @ layer.wk[h] + layer.bk[h]
        top_two = np.sort(layer.attention_scale * q @ k.T, axis=-1)[:, -2:]
        gaps.append(np.min(top_two[:, 1] - top_two[:, 0]))
    gap = min(gaps)
    assert result.score_gap == pytest.approx(gap, rel=1e-12)
    # |A_beta - A_hard| ~ exp(-beta gap): the fitted decay rate is the gap
    assert result.decay.points >= 3
    assert result.decay_rate == pytest.approx(gap, rel=0.1)
    # rows saturate, and the Lipschitz constant returns to that of hard attention,
    # U -> sum_h H_h U Wv_h Wo_h, whose Jacobian is sum_h kron(H_h, (Wv_h Wo_h)^T)
    assert result.saturation[-1] > 1 - 1e-6
    assert np.all(np.diff(result.saturation) > -1e-12)
    jacobian = 0
    for h in range(layer.heads):
        q, k = u @ layer.wq[h] + layer.bq[h], u @ layer.wk[h] + layer.bk[h]
        scores = layer.attention_scale * q @ k.T
        hard = np.eye(4)[np.argmax(scores, axis=-1)]
        jacobian = jacobian + np.kron(hard, (layer.wv[h] @ layer.wo[h]).T)
    assert result.hard_lipschitz == pytest.approx(np.linalg.norm(jacobian, 2), rel=1e-12)
    assert result.lipschitz[-1] == pytest.approx(result.hard_lipschitz, rel=1e-3)
    # on the way the score term adds to the value path: the constant rises above both
    # ends (beyond the 1e-3 accuracy of the differences) before the rows saturate
    assert max(result.lipschitz) > (1 + 1e-3) * max(result.lipschitz[0], result.lipschitz[-1])


def test_attention_conditioning_in_mpmath(rng):
    """The same measurement at 30 digits agrees with float64 where both resolve it."""
    layer = LayerWeights.random(4, 1, 4, rng, d_k=2, d_v=2)
    u = rng.standard_normal((3, 4))
    betas = [1.0, 4.0, 16.0]
    high = attention.attention_conditioning(
        layer, u, betas, precision=backend("mpmath", 30), relative_step=1e-8
    )
    low = attention.attention_conditioning(layer, u, betas)
    np.testing.assert_allclose(high.lipschitz, low.lipschitz, rtol=1e-7)
    np.testing.assert_allclose(high.distance_to_hard, low.distance_to_hard, rtol=1e-9)


def test_fit_line_intervals(rng):
    """Exact data: the line and zero-width intervals; noisy data: the 95% intervals hold the
    truth in about 95% of repeated draws."""
    x = np.linspace(0, 5, 9)
    exact = fit_line(x, 2 - 3 * x)
    assert exact.slope == pytest.approx(-3, abs=1e-13)
    assert exact.intercept == pytest.approx(2, abs=1e-13)
    assert exact.slope_interval[1] - exact.slope_interval[0] < 1e-12
    covered = 0
    for _ in range(400):
        fit = fit_line(x, 2 - 3 * x + 0.1 * rng.standard_normal(9))
        covered += fit.slope_interval[0] <= -3 <= fit.slope_interval[1]
    assert 0.91 <= covered / 400 <= 0.99  # binomial(400, 0.95): 4 standard deviations
    assert math.isnan(fit_line(x[:2], x[:2]).slope)


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"relative_step": 0.0}, "relative_step must be > 0, got 0.0"),
        ({"relative_step": -1e-4}, "relative_step must be > 0"),
        ({"stds": []}, "stds must be a non-empty 1-D sweep"),
        ({"stds": [1.0, 0.1, np.nan]}, "stds must be finite, got nan"),
        ({"stds": [1.0, 0.0, 0.1]}, "stds must be > 0, got 0.0"),
        ({"stds": [1.0, 0.1]}, "stds needs at least 3 values"),
        ({"direction": np.full(16, np.inf)}, "direction must be finite, got inf"),
        ({"direction": np.ones(5)}, "direction must have shape (16)"),
        ({"direction": np.ones(16)}, "direction must not be constant"),
        ({"sigma2": 0.0}, "sigma2 must be > 0"),
        ({"offset": np.nan}, "offset must be finite"),
        ({"d": 2}, "d must be >= 3"),
        ({"confidence": 1.0}, "confidence must lie in (0, 1)"),
    ],
)
def test_layer_norm_conditioning_rejects(kwargs, message):
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        projection.layer_norm_conditioning(**kwargs)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"relative_step": 0.0}, "relative_step must be > 0, got 0.0"),
        ({"betas": []}, "betas must be a non-empty 1-D sweep"),
        ({"betas": [1.0, np.inf, 4.0]}, "betas must be finite, got inf"),
        ({"betas": [1.0, -2.0, 4.0]}, "betas must be > 0, got -2.0"),
        ({"u": np.full((3, 4), np.nan)}, "u must be finite, got nan"),
        ({"u": np.zeros((3, 5))}, "u must have shape (*, 4)"),
        ({"fit_from": 0.0}, "fit_from must be > 0"),
        ({"layer": "weights"}, "layer must be a LayerWeights, got str"),
    ],
)
def test_attention_conditioning_rejects(rng, change, message):
    arguments = {
        "layer": LayerWeights.random(4, 1, 4, rng),
        "u": rng.standard_normal((3, 4)),
        "betas": [1.0, 2.0, 4.0],
        **change,
    }
    with pytest.raises(InvalidInputError, match=re.escape(message)):
        attention.attention_conditioning(**arguments)


@pytest.mark.parametrize("name", ["wq", "bk", "wo", "b2"])
def test_non_finite_weights_never_reach_a_measurement(rng, name):
    """Weights reach the measurements as LayerWeights, which names a non-finite entry."""
    layer = LayerWeights.random(4, 1, 4, rng)
    bad = np.array(getattr(layer, name))
    bad.flat[0] = np.nan
    with pytest.raises(TideError, match=f"{name} must be finite, got nan"):
        attention.attention_conditioning(
            dataclasses.replace(layer, **{name: bad}), rng.standard_normal((3, 4))
        )
