"""The paper's six sub-steps against the post-LN layer (docs/model.md section 2)."""

from __future__ import annotations

import numpy as np
import pytest

from properties.claim_check import CheckVerdict
from properties.exactness.paper_substeps import check_six_substeps
from solvers import InvalidInputError, LayerWeights, backend
from solvers.methods.transformer_layer import paper_six_substeps
from tests.precisions import ALL_PRECISIONS


@pytest.mark.parametrize("d", [8, 32, 64])
@pytest.mark.parametrize("heads", [1, 2, 4])
@pytest.mark.parametrize("affine", [False, True])
def test_six_substeps_equal_the_post_ln_layer_when_eps_is_zero(d, heads, affine):
    rng = np.random.default_rng(d * heads)
    layer = LayerWeights.random(d, heads, d, rng, affine=affine)
    check = check_six_substeps(layer, rng.standard_normal((3, 11, d)))
    assert check.verdict == CheckVerdict.HOLDS
    assert check.defect <= 1e-13


@pytest.mark.parametrize("eps", [1e-5, 1e-3, 1e-1])
def test_six_substeps_depart_from_the_post_ln_layer_by_order_eps(eps):
    rng = np.random.default_rng(5)
    layer = LayerWeights.random(32, 4, 32, rng, eps=eps)
    check = check_six_substeps(layer, rng.standard_normal((16, 32)))
    assert check.verdict == CheckVerdict.FAILS
    # halving u5 turns var + eps into var/4 + eps: an O(eps / var) relative change
    assert 0.1 * eps < check.defect < 10 * eps


def test_six_substeps_need_a_square_feed_forward(rng):
    layer = LayerWeights.random(8, 2, 16, rng)
    bk = backend("float64")
    with pytest.raises(InvalidInputError, match="needs a square FFN"):
        paper_six_substeps(bk, rng.standard_normal((3, 8)), layer.on(bk))


@pytest.mark.parametrize("precision", ALL_PRECISIONS, ids=repr)
@pytest.mark.parametrize("affine", [False, True])
def test_six_substeps_hold_in_every_number_system(precision, affine):
    rng = np.random.default_rng(6)
    layer = LayerWeights.random(16, 4, 16, rng, affine=affine)
    check = check_six_substeps(layer, rng.standard_normal((7, 16)), precision)
    assert check.verdict == CheckVerdict.HOLDS, check
    assert check.tolerance == 64 * precision.unit_roundoff
