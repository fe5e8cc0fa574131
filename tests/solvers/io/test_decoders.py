"""Llama, Qwen2 and Mistral decoders, RoBERTa and DistilBERT read from the library
(docs/model.md section 7, docs/networks.md section 6).

The truth for the decoders' float64 twins is tests/decoder_reference.py, an independent
float64 implementation: the library computes RMSNorm, the rotary tables and an eager
softmax in float32, so the library itself is a truth only to ~1e-7 there (checked here
against the reference). RoBERTa and DistilBERT run in float64 throughout (sdpa
attention), so the library is their truth.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import transformers

from solvers import InvalidInputError, load_model, save_model, solve_layers
from solvers.equation.norms import KINDS, Placement
from tests.decoder_reference import DecoderReference
from tests.hf_models import perturbed, tiny_decoder, tiny_distilbert, tiny_roberta

TWIN = 1e-13
"""Relative max-abs agreement of the Lie scheme at dt = 1 with the float64 truth."""
LIBRARY_FLOAT32 = 1e-5
"""Agreement of the float64 reference with the library, which rounds RMSNorm, the rotary
tables and the softmax to float32 (unit roundoff 6e-8, over 2 layers)."""
IDS = np.array([[3, 17, 5, 29, 11, 2, 8, 36], [1, 4, 9, 16, 25, 36, 7, 13]])
MASK = np.array([[1] * 8, [1] * 5 + [0] * 3])
CAUSAL_LM = {
    "llama": transformers.LlamaForCausalLM,
    "qwen2": transformers.Qwen2ForCausalLM,
    "mistral": transformers.MistralForCausalLM,
}


def logits(module, ids: np.ndarray) -> np.ndarray:
    """The LM head's scores by the float64 reference."""
    head = module.lm_head.weight.detach().numpy()
    return reference_of(module).hidden_states(ids)[-1] @ head.T


def relative(got: np.ndarray, expected: np.ndarray) -> float:
    return float(np.abs(got - expected).max() / np.abs(expected).max())


def decoder(kind: str, seed: int = 0, **settings):
    torch.manual_seed(seed)
    return perturbed(CAUSAL_LM[kind](tiny_decoder(kind, **settings)), seed)


def reference_of(module) -> DecoderReference:
    state = {k: v.numpy() for k, v in module.state_dict().items()}
    return DecoderReference(module.config.to_dict(), state)


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def twin(request):
    """A perturbed 2-layer decoder (4 heads, 2 key-value heads, rope theta 1e4, eps 1e-6),
    its library output on a right-padded batch and its float64 reference."""
    module = decoder(request.param)
    with torch.no_grad():
        out = module(
            torch.tensor(IDS), attention_mask=torch.tensor(MASK), output_hidden_states=True
        )
    return request.param, module, out, reference_of(module)


def test_the_reference_is_the_library_to_float32(twin):
    _, _, out, reference = twin
    expected = reference.hidden_states(IDS, MASK)
    real = MASK.astype(bool)
    for n, (mine, theirs) in enumerate(zip(expected, out.hidden_states, strict=True)):
        assert relative(mine[real], theirs.numpy()[real]) <= LIBRARY_FLOAT32, n


def test_the_lie_scheme_is_the_float64_decoder(twin):
    """Each hidden state n is the Lie scheme's state at t = n on the real tokens; the readout
    (final RMSNorm and LM head) gives the reference's logits."""
    kind, module, _, reference = twin
    model = load_model(module)
    assert model.norm is Placement.PRE and model.causal
    assert model.layers[0].decoder_parts == [
        "RMSNorm",
        "a gated FFN",
        "rotary positions",
        "shared key-value heads",
    ]
    assert model.layers[0].bq.any() == (kind == "qwen2")
    expected = reference.hidden_states(IDS, MASK)
    states = solve_layers(model.problem(model.embed(IDS), MASK), "lie", 1)
    real = MASK.astype(bool)
    for n in range(1, len(expected) - 1):
        assert relative(states[n][real], expected[n][real]) <= TWIN, n
    final = model.readout(states[-1])
    head = module.lm_head.weight.detach().numpy()
    assert relative(final[real], (expected[-1] @ head.T)[real]) <= TWIN


def test_next_token_decisions_and_loss(twin):
    """The LM head decides the next token at each real position; its loss is the library's
    (which computes it from float32-rounded steps, so to 1e-5)."""
    _, module, _, _ = twin
    model = load_model(module)
    ids = IDS[:1]
    states = solve_layers(model.problem(model.embed(ids)), "lie", 1)
    judged = model.readout.judge(states[-1], None, ids)
    with torch.no_grad():
        out = module(torch.tensor(ids), labels=torch.tensor(ids))
    np.testing.assert_array_equal(judged.decisions, out.logits.numpy()[0].argmax(-1))
    assert judged.correct.shape == (7,)  # position x against token x + 1
    assert abs(judged.loss - out.loss.item()) <= 1e-5 * out.loss.item()


@pytest.mark.parametrize("tied", [False, True])
def test_decoders_through_files(tied, tmp_path):
    """In memory, from save_pretrained (read without transformers; a tied head is left
    out of the file and read from the embedding) and through save_model: one model."""
    module = decoder("llama", seed=3, tie_word_embeddings=tied)
    module.save_pretrained(tmp_path / "pretrained")
    names = json.loads((tmp_path / "pretrained" / "config.json").read_text())
    assert names["tie_word_embeddings"] == tied
    first = load_model(module)
    saved = save_model(first, tmp_path / "model.safetensors")
    u0 = first.embed(IDS)
    expected = first.readout(solve_layers(first.problem(u0), "lie", 1)[-1])
    for source in (tmp_path / "pretrained", saved):
        model = load_model(source)
        assert model.layers[0].rope_theta == 1e4 and model.readout.norm_kind is KINDS["rms"]
        got = model.readout(solve_layers(model.problem(model.embed(IDS)), "lie", 1)[-1])
        np.testing.assert_array_equal(got, expected)


def test_a_linear_rope_scaling_divides_the_positions():
    """rope_scaling linear, factor 2: the reference with positions x / 2."""
    module = decoder("llama", seed=4, rope_scaling={"rope_type": "linear", "factor": 2.0})
    assert reference_of(module).factor == 2.0
    model = load_model(module)
    assert model.layers[0].rope_factor == 2.0
    states = solve_layers(model.problem(model.embed(IDS)), "lie", 1)
    assert relative(model.readout(states[-1]), logits(module, IDS)) <= TWIN


def test_unsupported_settings_are_refused_in_one_line(tmp_path):
    module = decoder("llama", seed=5)
    module.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    cases = [
        (
            {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e4}},
            "rope type 'yarn'",
        ),
        ({"partial_rotary_factor": 0.5}, "partial_rotary_factor 0.5"),
        ({"num_local_experts": 8}, "num_local_experts = 8: mixture-of-experts"),
    ]
    for change, message in cases:
        (tmp_path / "config.json").write_text(json.dumps(config | change))
        with pytest.raises(InvalidInputError, match=message) as refused:
            load_model(tmp_path)
        assert str(tmp_path) in str(refused.value) and "\n" not in str(refused.value)


def test_a_sliding_window_shorter_than_the_input_is_refused():
    model = load_model(decoder("mistral", seed=6, sliding_window=6))
    with pytest.raises(InvalidInputError, match="sliding_window = 6 is shorter than the input's 8"):
        model.problem(model.embed(IDS))
    module = decoder("mistral", seed=6, sliding_window=8)
    longer = load_model(module)
    states = solve_layers(longer.problem(longer.embed(IDS)), "lie", 1)
    assert relative(longer.readout(states[-1]), logits(module, IDS)) <= TWIN


@pytest.mark.parametrize("kind", ["roberta", "distilbert"])
def test_roberta_and_distilbert_are_the_library(kind):
    """Post-LN encoders in float64 with sdpa attention: hidden state n is the Lie scheme's
    state at t = n on the real tokens, and the classifier's logits are the library's.
    RoBERTa's positions count from pad_token_id + 1 over the real tokens."""
    config = tiny_roberta() if kind == "roberta" else tiny_distilbert()
    config.num_labels = 3
    config._attn_implementation = "sdpa"
    cls = {
        "roberta": transformers.RobertaForSequenceClassification,
        "distilbert": transformers.DistilBertForSequenceClassification,
    }[kind]
    torch.manual_seed(7)
    module = perturbed(cls(config), 7)
    pad = config.pad_token_id
    ids = np.where(MASK.astype(bool), IDS, pad)
    ids[ids == pad] = np.where(MASK.astype(bool), 20, pad)[ids == pad]  # no real token is pad
    with torch.no_grad():
        out = module(
            torch.tensor(ids), attention_mask=torch.tensor(MASK), output_hidden_states=True
        )
    model = load_model(module)
    u0 = model.embed(ids)
    real = MASK.astype(bool)
    assert relative(u0[real], out.hidden_states[0].numpy()[real]) <= TWIN
    states = solve_layers(model.problem(u0, MASK), "lie", 1)
    for n in range(1, len(states)):
        assert relative(states[n][real], out.hidden_states[n].numpy()[real]) <= TWIN, n
    assert relative(model.readout(states[-1], MASK), out.logits.numpy()) <= TWIN


def test_a_decoder_without_hidden_act_is_silu_as_in_the_library(tmp_path):
    module = decoder("llama", seed=9)
    module.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    del config["hidden_act"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert transformers.LlamaConfig.from_pretrained(tmp_path).hidden_act == "silu"
    assert load_model(tmp_path).layers[0].activation == "silu"
