"""The textbook encoder and torch agree, and the claim check sees a wrong reference."""

from __future__ import annotations

import numpy as np
import pytest

from properties.claim_check import FAILS, HOLDS
from properties.standard_transformer import standard_encoder
from properties.transformer_identity import check_lie_is_transformer
from solvers import LayerWeights
from solvers.torch_io import torch_forward


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("affine", [False, True])
def test_textbook_encoder_matches_torch(norm, causal, affine):
    rng = np.random.default_rng(3)
    layers = [LayerWeights.random(16, 4, 64, rng, eps=1e-5, affine=affine) for _ in range(4)]
    u0 = rng.standard_normal((2, 9, 16))
    expected = torch_forward(layers, u0, norm, causal)
    got = standard_encoder(layers, u0, norm, causal)
    assert np.abs(got - expected).max() <= 1e-13 * np.abs(expected).max()


@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_check_holds_against_torch_and_fails_against_a_wrong_reference(precision):
    rng = np.random.default_rng(4)
    layers = [LayerWeights.random(16, 2, 32, rng) for _ in range(3)]
    u0 = rng.standard_normal((5, 16))
    check = check_lie_is_transformer(layers, u0, torch_forward, "torch", precision=precision)
    assert check.verdict == HOLDS
    assert check.defect <= {"float64": 1e-13, "float32": 2e-5}[precision]

    def pre_ln_instead(layers, u0, norm, causal):
        return torch_forward(layers, u0, "pre", causal)

    wrong = check_lie_is_transformer(layers, u0, pre_ln_instead, "pre-LN torch", norm="post")
    assert wrong.verdict == FAILS and wrong.defect > 1e-3
