"""The textbook encoder and torch agree, and the claim check holds in every number system."""

from __future__ import annotations

import numpy as np
import pytest

import properties.exactness.transformer_identity as identity
from properties.claim_check import CheckVerdict
from properties.exactness.standard_transformer import standard_encoder
from solvers import LayerWeights, backend
from solvers.io.torch_modules import torch_forward
from tests.precisions import ALL_PRECISIONS


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


@pytest.mark.parametrize("precision", ALL_PRECISIONS, ids=repr)
@pytest.mark.parametrize("reference", ["textbook", "torch"])
def test_check_holds_in_every_number_system(precision, reference):
    rng = np.random.default_rng(4)
    layers = [LayerWeights.random(16, 2, 32, rng, eps=1e-5, affine=True) for _ in range(3)]
    u0 = rng.standard_normal((5, 16))
    check = identity.check_lie_is_transformer(
        layers, u0, reference=reference, norm="pre", causal=True, precision=precision
    )
    assert check.verdict == CheckVerdict.HOLDS, check
    if precision.name == "float64":
        assert check.defect <= 1e-13
    if precision.name == "float32":
        assert check.defect <= 2e-5


def test_check_fails_against_a_different_encoder(monkeypatch, rng):
    layers = [LayerWeights.random(16, 2, 32, rng) for _ in range(3)]
    u0 = rng.standard_normal((5, 16))

    def pre_ln_instead(layers, u0, norm, causal, precision):
        return standard_encoder(layers, u0, "pre", causal, precision)

    monkeypatch.setattr(identity, "standard_encoder", pre_ln_instead)
    wrong = identity.check_lie_is_transformer(layers, u0, norm="post")
    assert wrong.verdict == CheckVerdict.FAILS and wrong.defect > 1e-3
    with pytest.raises(Exception, match="unknown reference 'onnx'"):
        identity.check_lie_is_transformer(
            layers, u0, reference="onnx", precision=backend("float64")
        )
