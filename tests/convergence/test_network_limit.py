"""network_limit: a loaded network against its own time-step limit."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from convergence.network_limit import ASYMPTOTIC, network_limit
from convergence.network_limit.levels import Level, method_levels
from convergence.order import OrderVerdict
from convergence.weights_in_depth import depth_change
from solvers import InvalidInputError, LayerWeights, load_model, solve
from solvers.network.embedding import TokenEmbedding
from solvers.network.model import Model
from solvers.network.readout import Dense, Readout
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
    assert lie.decisions_changed[0].count == 0 and lie.accuracy[0] == 1.0
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


def test_bad_targets(vit):
    model, inputs, predictions = vit
    with pytest.raises(
        InvalidInputError, match=r"labels must be integer class indices of shape \(12\)"
    ):
        network_limit(model, inputs, predictions[:5])
    with pytest.raises(InvalidInputError, match="labels must be integer class indices"):
        network_limit(model, inputs, predictions.astype(float))
    with pytest.raises(InvalidInputError, match=r"labels must lie in \[0, 10\)"):
        network_limit(model, inputs, np.full(12, 10))
    bare = dataclasses.replace(model, readout=None)
    with pytest.raises(
        InvalidInputError, match="targets need a model whose readout takes decisions"
    ):
        network_limit(bare, inputs, predictions)


def test_the_fitted_orders_are_the_estimators(vit):
    """Each method's distances carry the suite's order estimate against its nominal order,
    with the limit's own error as the floor."""
    model, inputs, _ = vit
    result = network_limit(
        model, inputs, methods=["lie", "strang-rk2"], steps_per_unit=[1, 2, 4, 8]
    )
    for levels, order in zip(result.methods, (1, 2), strict=True):
        assert levels.order.expected == order and levels.order.hs == [1, 0.5, 0.25, 0.125]
        assert levels.order.errors == levels.relative_distance
        assert levels.order.interval[0] <= levels.order.order <= levels.order.interval[1]
    # a classifier without targets: decisions are compared, nothing is scored
    lie = result.methods[0]
    assert lie.decisions_changed[0].count == 0 and lie.accuracy is None and lie.loss is None
    assert result.decisions == 12 and result.targets is None


def test_a_model_without_a_readout_measures_no_decisions(rng):
    """Nothing about decisions is recorded when the readout takes none: None, never 0."""
    layer = dataclasses.replace(LayerWeights.random(6, 2, 12, rng), activation="gelu")
    model = Model((layer,) * 2, "pre")
    result = network_limit(model, rng.standard_normal((3, 4, 6)), steps_per_unit=[1, 2, 4])
    assert result.decisions is None and result.limit_decisions is None
    assert result.smooth_twin_decisions_changed is None and result.network_loss is None
    assert all(lv.decisions_changed is None and lv.loss is None for lv in result.methods)


def _char_lm(rng):
    """A small pre-LN causal LM with a tied head, in tide's own terms."""
    d, vocabulary = 8, 11
    layers = tuple(
        dataclasses.replace(LayerWeights.random(d, 2, 16, rng), activation="gelu-tanh")
        for _ in range(2)
    )
    word = rng.standard_normal((vocabulary, d))
    head = Readout((np.ones(d), np.zeros(d), 1e-5), None, (Dense(word.T, np.zeros(vocabulary)),))
    return Model(
        layers, "pre", True, head, "char-lm", TokenEmbedding(word, rng.standard_normal((12, d)))
    )


def test_an_lm_is_judged_at_every_real_position(rng):
    """An LM head's decisions are one per real token; the loss and accuracy are those of
    the next tokens (docs/networks.md section 5), computed here from the logits by hand."""
    model = _char_lm(rng)
    tokens = rng.integers(0, 11, (3, 7))
    mask = np.array([[1] * 7, [1] * 5 + [0] * 2, [1] * 3 + [0] * 4])
    result = network_limit(model, model.embed(tokens), tokens, mask=mask, steps_per_unit=[1, 2, 4])
    assert result.decisions == mask.sum() == result.real_tokens and result.targets == "next tokens"
    network = solve(model.problem(model.embed(tokens), mask))
    logits = model.readout(network)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    pairs = [(b, x) for b in range(3) for x in range(6) if mask[b, x] and mask[b, x + 1]]
    loss = -np.mean([log_p[b, x, tokens[b, x + 1]] for b, x in pairs])
    hits = np.mean([logits[b, x].argmax() == tokens[b, x + 1] for b, x in pairs])
    lie = result.methods[0]
    assert lie.loss[0] == pytest.approx(loss, rel=1e-13) == result.network_loss
    assert lie.accuracy[0] == pytest.approx(hits, abs=0) and lie.decisions_changed[0].count == 0
    assert len(lie.loss) == 3 and all(c is not None for c in lie.decisions_changed)


def test_padding_changes_nothing_the_network_measures(rng):
    """A padded batch measures what the unpadded inputs measure (the padding's rows are
    seen and judged by nobody), whatever the padding holds."""
    model = _char_lm(rng)
    tokens = rng.integers(0, 11, (2, 6))
    states = model.embed(tokens)
    padded = np.concatenate([states, 50 * rng.standard_normal((2, 3, 8))], axis=1)
    mask = np.array([[1] * 6 + [0] * 3] * 2)
    levels = [1, 2, 4]
    plain = network_limit(model, states, tokens, steps_per_unit=levels)
    masked = network_limit(
        model, padded, np.pad(tokens, ((0, 0), (0, 3))), mask=mask, steps_per_unit=levels
    )
    lie, lie_masked = plain.methods[0], masked.methods[0]
    assert lie_masked.relative_distance == pytest.approx(lie.relative_distance, rel=1e-9)
    assert lie_masked.loss == pytest.approx(lie.loss, rel=1e-12)
    assert lie_masked.decisions_changed == lie.decisions_changed
    assert masked.decisions == plain.decisions == 12


def test_levels_far_from_the_limit_are_left_out_of_the_order_fit():
    """A level more than ASYMPTOTIC from the limit (relative) is not in the range where the
    distance behaves like C dt^p; with fewer than 3 levels inside it there is no order."""
    steps = [1, 2, 4, 8, 16]

    def levels(distances):
        measured = [Level(e, None, None, None, None, None) for e in distances]
        return method_levels("lie", steps, measured, 0, expected=1.0, floor=1e-9)

    fitted = levels([0.9, 0.3, 0.05, 0.025, 0.0125])
    assert fitted.order.hs == [1 / 4, 1 / 8, 1 / 16]
    assert fitted.order.order == pytest.approx(1) and fitted.order.verdict == OrderVerdict.PASS
    assert ASYMPTOTIC < 0.3
    none = levels([0.9, 0.5, 0.3, 0.2, 0.05])
    assert none.order is None and none.relative_distance == [0.9, 0.5, 0.3, 0.2, 0.05]
