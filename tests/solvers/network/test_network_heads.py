"""Token ids in, decisions and losses out (docs/networks.md section 5): the suite's own
embeddings, LM heads and masked pooling against Hugging Face's float64 modules, read in
memory, from save_pretrained directories and from save_model files."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers
from safetensors.numpy import load_file

from solvers import InvalidInputError, load_model, save_model, solve, solve_layers
from solvers.network.readout import Dense, Readout
from tests.hf_models import tiny_bert, tiny_gpt2, tiny_vit

TWIN = 1e-13
"""Relative max-abs agreement with the library in float64."""
LIBRARY_LOSS = 1e-6
"""The library's `.loss` casts float64 logits to float32 (transformers' ForCausalLMLoss:
`logits.float()`), so it is a truth only to float32's precision."""
IDS = np.random.default_rng(0).integers(0, 50, (3, 9))
MASK = np.array([[1] * 9, [1] * 6 + [0] * 3, [1] * 4 + [0] * 5])
"""Right padding, as tokenizers pad for these models."""


def relative(got: np.ndarray, expected: np.ndarray) -> float:
    return float(np.abs(got - expected).max() / np.abs(expected).max())


def _gpt2_lm(tie: bool = True):
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(tiny_gpt2(tie_word_embeddings=tie)).double().eval()


def _sources(module, tmp_path):
    """The module, its save_pretrained directory and save_model's file of it."""
    module.save_pretrained(tmp_path / "pretrained")
    return [
        module,
        tmp_path / "pretrained",
        save_model(load_model(module), tmp_path / "m.safetensors"),
    ]


@pytest.mark.parametrize("tie", [True, False], ids=["tied", "untied"])
def test_an_lm_head_gives_the_librarys_logits_and_loss(tie, tmp_path):
    """GPT2LMHeadModel from token ids: the embedding is the library's hidden state 0, the
    readout its logits, and the next-token loss torch's float64 cross-entropy of them (and
    the library's own float32 `.loss`)."""
    module = _gpt2_lm(tie)
    ids = torch.tensor(IDS)
    with torch.no_grad():
        out = module(ids, labels=ids, output_hidden_states=True)
    sources = _sources(module, tmp_path)
    saved = load_file(tmp_path / "pretrained" / "model.safetensors")
    assert ("lm_head.weight" in saved) is not tie  # tied: read from wte
    expected = torch.nn.functional.cross_entropy(
        out.logits[:, :-1].reshape(-1, 50), ids[:, 1:].reshape(-1)
    ).item()
    for source in sources:
        model = load_model(source)
        u0 = model.embed(IDS)
        assert relative(u0, out.hidden_states[0].numpy()) <= TWIN
        states = solve(model.problem(u0))
        assert relative(model.readout(states), out.logits.numpy()) <= TWIN, source
        judged = model.readout.judge(states, None, IDS)
        assert model.readout.next_token and judged.decisions.shape == (IDS.size,)
        assert abs(judged.loss - expected) <= TWIN * expected
        assert abs(judged.loss - out.loss.item()) <= LIBRARY_LOSS * expected
        hits = out.logits[:, :-1].argmax(-1).numpy() == IDS[:, 1:]
        assert judged.accuracy == pytest.approx(hits.mean(), abs=0)


def test_an_lm_head_is_judged_at_real_positions_only():
    """With padding, decisions are taken at the real tokens and the loss is the library's
    with the padding's labels ignored (-100), as a padded LM batch is trained."""
    module = _gpt2_lm()
    ids, mask = torch.tensor(IDS), torch.tensor(MASK)
    labels = ids.masked_fill(mask == 0, -100)
    with torch.no_grad():
        out = module(ids, attention_mask=mask, output_hidden_states=True)
    model = load_model(module)
    states = solve_layers(model.problem(model.embed(IDS), MASK))
    real = MASK.astype(bool)
    for n in range(2):  # the last hidden state has ln_f applied
        assert relative(states[n][real], out.hidden_states[n].numpy()[real]) <= TWIN
    judged = model.readout.judge(states[-1], MASK, IDS)
    logits = out.logits[:, :-1].reshape(-1, 50)
    expected = torch.nn.functional.cross_entropy(logits, labels[:, 1:].reshape(-1)).item()
    assert judged.decisions.shape == (MASK.sum(),)
    assert abs(judged.loss - expected) <= TWIN * expected
    assert len(judged.correct) == (MASK[:, :-1] & MASK[:, 1:]).sum()


def _bert_classifier():
    torch.manual_seed(1)
    return transformers.BertForSequenceClassification(tiny_bert(num_labels=3)).double().eval()


def _gpt2_classifier():
    torch.manual_seed(2)
    config = tiny_gpt2(num_labels=3, pad_token_id=0)
    return transformers.GPT2ForSequenceClassification(config).double().eval()


@pytest.mark.parametrize(
    ("build", "compared"), [(_bert_classifier, 2), (_gpt2_classifier, 1)], ids=["bert", "gpt2"]
)
def test_a_padded_batch_gives_the_librarys_masked_decisions(build, compared, tmp_path):
    """A right-padded batch with its attention mask: the hidden states at the real tokens
    are the library's, and so are the decisions (GPT-2 pools the last real token, BERT
    the first); without the mask the padding is attended to and pooled, and the decisions
    differ (so the mask is what makes them agree)."""
    module = build()
    ids = np.where(MASK == 1, IDS, 0)  # the pad token is 0
    with torch.no_grad():
        out = module(
            torch.tensor(ids), attention_mask=torch.tensor(MASK), output_hidden_states=True
        )
    expected = out.logits.argmax(-1).numpy()
    real = MASK.astype(bool)
    for source in _sources(module, tmp_path):
        model = load_model(source)
        states = solve_layers(model.problem(model.embed(ids), MASK))
        for n in range(compared + 1):
            assert relative(states[n][real], out.hidden_states[n].numpy()[real]) <= TWIN
        assert relative(model.readout(states[-1], MASK), out.logits.numpy()) <= TWIN
        assert np.array_equal(model.readout.decisions(states[-1], MASK), expected)
    unmasked = solve(model.problem(model.embed(ids)))
    assert relative(model.readout(unmasked), out.logits.numpy()) > 1e-3


def test_the_vit_embeds_its_own_pixels(tmp_path):
    torch.manual_seed(3)
    config = tiny_vit(num_labels=4)
    module = transformers.ViTForImageClassification(config).double().eval()
    pixels = np.random.default_rng(0).standard_normal((2, 1, 8, 8))
    with torch.no_grad():
        out = module(pixel_values=torch.tensor(pixels), output_hidden_states=True)
    for source in _sources(module, tmp_path):
        model = load_model(source)
        assert relative(model.embed(pixels), out.hidden_states[0].numpy()) <= TWIN
    with pytest.raises(InvalidInputError, match="make 16 patches of 4 x 4; the model's position"):
        model.embed(np.zeros((1, 1, 16, 16)))
    with pytest.raises(InvalidInputError, match=r"pixels must have shape \(\*, 1, \*, \*\)"):
        model.embed(np.zeros((1, 3, 8, 8)))


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        (IDS.astype(float), r"tokens must be integer token ids of shape \(\*, \*\), got float64"),
        (IDS[0], r"integer token ids of shape \(\*, \*\), got int64 \(9,\)"),
        (np.where(IDS == IDS[0, 0], 50, IDS), r"tokens must lie in \[0, 50\) \(the vocabulary\)"),
        (np.zeros((1, 17), int), "tokens need position 16; the model embeds positions up to 15"),
    ],
)
def test_bad_token_ids_are_refused_in_one_line(tokens, message):
    model = load_model(_gpt2_lm())
    with pytest.raises(InvalidInputError, match=message) as refused:
        model.embed(tokens)
    assert "\n" not in str(refused.value)


def test_targets_are_checked_against_the_readout():
    """Labels must be integer classes in range; an LM head's targets are token ids."""
    classifier = Readout(None, "mean", (Dense(np.eye(4)[:, :2], np.zeros(2)),))
    lm = Readout(None, None, (Dense(np.eye(4), np.zeros(4)),))
    assert classifier.check_targets(np.array([0, 1]), (2, 5), "labels").shape == (2,)
    with pytest.raises(
        InvalidInputError, match=r"labels must lie in \[0, 2\).*got 5 at index \(1,\)"
    ):
        classifier.check_targets(np.array([0, 5]), (2, 5), "labels")
    with pytest.raises(InvalidInputError, match="labels must be integer class indices of shape"):
        classifier.check_targets(np.array([0.0, 1.0]), (2, 5), "labels")
    with pytest.raises(InvalidInputError, match=r"integer token ids of shape \(2, 5\)"):
        lm.check_targets(np.array([0, 1]), (2, 5), "tokens")
    with pytest.raises(InvalidInputError, match="takes no decisions"):
        Readout().check_targets(np.array([0, 1]), (2, 5), "labels")


def test_masked_pooling_is_the_real_tokens():
    """'last' is the last real token wherever the padding is, 'mean' the real tokens' mean,
    'first' the first position (as the libraries pool)."""
    states = np.random.default_rng(1).standard_normal((3, 9, 4))
    real = MASK.astype(bool)
    for pool, expected in [
        ("last", [states[b][real[b]][-1] for b in range(3)]),
        ("mean", [states[b][real[b]].mean(0) for b in range(3)]),
        ("first", states[:, 0]),
    ]:
        got = Readout(None, pool)(states, MASK)
        assert np.allclose(got, np.array(expected), rtol=0, atol=1e-15), pool


def test_an_lm_with_nothing_to_predict_scores_nothing():
    """Inputs of one real token have no next token: decisions, but no accuracy and no loss
    (unmeasured, not 0)."""
    lm = Readout(None, None, (Dense(np.eye(4), np.zeros(4)),))
    states = np.random.default_rng(2).standard_normal((2, 3, 4))
    judged = lm.judge(states, np.array([[1, 0, 0], [1, 0, 0]]), np.zeros((2, 3), int))
    assert judged.decisions.shape == (2,) and judged.accuracy is None and judged.loss is None
