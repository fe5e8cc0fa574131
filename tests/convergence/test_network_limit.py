"""network_limit: a loaded network against its own time-step limit."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from convergence.network_limit import depth_change, network_limit
from convergence.order import OrderVerdict
from solvers import InvalidInputError, LayerWeights, load_model
from solvers.model import Model
from solvers.readout import Dense, Readout
from tests.hf_models import vit_classifier
from tests.torch_models import random_torch_encoder


@pytest.fixture(scope="module")
def vit():
    """A small ViT classifier, its input states and its own predictions."""
    module, out = vit_classifier(layers=3, patch=2, labels=10, batch=12, seed=0)
    return load_model(module), out.hidden_states[0].numpy(), out.logits.numpy().argmax(-1)


def test_the_network_is_its_own_first_level_and_lie_converges_at_order_one(vit):
    model, inputs, predictions = vit
    result = network_limit(
        model, inputs, predictions, methods=["lie", "strang-rk2"], steps_per_unit=[1, 2, 4, 8]
    )
    lie, strang = result.methods
    assert lie.decisions_changed[0] == 0 and lie.accuracy[0] == 1.0
    assert result.network_accuracy == 1.0 and result.no_limit is None
    for levels, order in ((lie, 1), (strang, 2)):
        rates = np.log2(np.array(levels.relative_distance[:-1]) / levels.relative_distance[1:])
        assert np.all(np.abs(rates[-2:] - order) < 0.1), (levels.method, rates)
    assert result.limit_error < 1e-3 * min(strang.relative_distance)
    assert len(result.depth_change) == 2 and result.batch == 12


def test_per_feature_post_ln_norms_have_no_limit_but_a_classification(rng):
    encoder = random_torch_encoder(8, 2, 16, layers=2, seed=3, affine=True)
    model = load_model(encoder)
    result = network_limit(model, rng.standard_normal((3, 5, 8)), steps_per_unit=[1, 2, 4, 8])
    assert result.no_limit is not None and result.limit_error is None
    assert result.no_limit.verdict in tuple(OrderVerdict)
    assert result.methods[0].relative_distance is None
    assert result.methods[0].decisions_changed is None  # no classifier: no decisions


def test_equal_layers_are_smooth_in_depth(rng):
    layer = dataclasses.replace(LayerWeights.random(6, 2, 12, rng), activation="gelu")
    readout = Readout(None, "mean", (Dense(rng.standard_normal((6, 3)), np.zeros(3)),))
    model = Model((layer,) * 3, "post", readout=readout)
    result = network_limit(model, rng.standard_normal((4, 5, 6)), steps_per_unit=[1, 2])
    assert result.depth_change == [0.0, 0.0]
    assert result.smooth_twin_distance < 1e-14 and result.smooth_twin_decisions_changed == 0
    other = dataclasses.replace(layer, w1=2 * layer.w1)
    change = depth_change([layer, other])[0]
    names = ("wq", "bq", "wk", "bk", "wv", "bv", "wo", "bo", "w1", "b1", "w2", "b2")
    norms = [np.ones(6), np.zeros(6)] * 2  # scalar gains 1 and biases 0, per feature
    flat = np.concatenate([np.ravel(getattr(layer, n)) for n in names] + norms)
    assert change == pytest.approx(np.linalg.norm(layer.w1) / np.linalg.norm(flat), rel=1e-12)


def test_bad_labels(vit):
    model, inputs, predictions = vit
    with pytest.raises(InvalidInputError, match="labels must be 12 class indices"):
        network_limit(model, inputs, predictions[:5])
    with pytest.raises(InvalidInputError, match="labels must be 12 class indices"):
        network_limit(model, inputs, predictions.astype(float))
    bare = dataclasses.replace(model, readout=None)
    with pytest.raises(InvalidInputError, match="labels need a model whose readout classifies"):
        network_limit(bare, inputs, predictions)
