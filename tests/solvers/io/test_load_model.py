"""load_model: Hugging Face BERT, ViT and GPT-2 and torch encoders, against the libraries'
own outputs; save_pretrained directories and save_model files read back; bad sources
refused in one line, and never unpickled (docs/networks.md sections 1 and 2)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import torch
import transformers
from safetensors.numpy import load_file, save_file

from solvers import InvalidInputError, load_model, save_model, solve_layers
from solvers.equation.norms import Placement
from solvers.io.torch_modules import from_torch
from tests.hf_models import SHIPPED, PickleTrap, tiny_bert, tiny_gpt2, tiny_vit
from tests.torch_models import random_torch_encoder

TWIN = 1e-13
"""Relative max-abs agreement of the Lie scheme at dt = 1 with the library, in float64."""


def relative(got: np.ndarray, expected: np.ndarray) -> float:
    return float(np.abs(got - expected).max() / np.abs(expected).max())


def _bert(**extra):
    cls = transformers.BertForSequenceClassification if extra else transformers.BertModel
    return cls(tiny_bert(layers=3, **extra))


def _vit(**extra):
    cls = transformers.ViTForImageClassification if extra else transformers.ViTModel
    return cls(tiny_vit(**extra))


def _gpt2(**extra):
    cls = transformers.GPT2ForSequenceClassification if extra else transformers.GPT2Model
    return cls(tiny_gpt2(layers=3, **extra))


TOKENS = torch.tensor([[3, 14, 15, 9, 26, 5, 35], [8, 9, 7, 9, 3, 23, 8]])
PIXELS = torch.tensor(np.random.default_rng(0).standard_normal((2, 1, 8, 8)))
INPUTS = {
    "bert": {"input_ids": TOKENS},
    "vit": {"pixel_values": PIXELS},
    "gpt2": {"input_ids": TOKENS},
}


def _run(module, kind: str):
    torch.manual_seed(0)
    module = module.double().eval()
    with torch.no_grad():
        return module, module(**INPUTS[kind], output_hidden_states=True)


@pytest.mark.parametrize(
    ("kind", "build", "compared"),
    [("bert", _bert, 3), ("vit", _vit, 2), ("gpt2", _gpt2, 2)],
    ids=["bert", "vit", "gpt2"],
)
def test_the_lie_scheme_is_the_libraries_hidden_states(kind, build, compared):
    """BERT (post-LN, erf GELU), ViT (pre-LN), GPT-2 (pre-LN, causal, tanh GELU): hidden
    state n is the Lie scheme's state at t = n. GPT-2's last hidden state has ln_f applied,
    so its first 2 of 3 blocks are compared; ViT's and GPT-2's final norm is the readout,
    which gives last_hidden_state."""
    torch.manual_seed(0)
    module, out = _run(build(), kind)
    hidden = [h.numpy() for h in out.hidden_states]
    model = load_model(module)
    states = solve_layers(model.problem(hidden[0]), "lie", 1)
    for n in range(1, compared + 1):
        assert relative(states[n], hidden[n]) <= TWIN, n
    assert model.causal == (kind == "gpt2")
    assert model.norm is (Placement.POST if kind == "bert" else Placement.PRE)
    if kind != "bert":
        final = model.readout(states[-1])
        assert relative(final, out.last_hidden_state.numpy()) <= TWIN


@pytest.mark.parametrize(
    ("kind", "build", "labels"),
    [("bert", _bert, 3), ("vit", _vit, 4), ("gpt2", _gpt2, 2)],
    ids=["bert", "vit", "gpt2"],
)
def test_task_models_keep_their_heads_through_files(kind, build, labels, tmp_path):
    """The readout (final norm, pooling, classifier) gives the task model's logits, read from
    the module, from its save_pretrained directory and from save_model's file."""
    extra = {"num_labels": labels} | ({"pad_token_id": 0} if kind == "gpt2" else {})
    torch.manual_seed(1)
    module, out = _run(build(**extra), kind)
    u0 = out.hidden_states[0].numpy()
    module.save_pretrained(tmp_path / "pretrained")
    assert not list((tmp_path / "pretrained").glob("*.bin"))
    first = load_model(module)
    saved = save_model(first, tmp_path / "model.safetensors")
    for source in (module, tmp_path / "pretrained", saved):
        model = load_model(source)
        states = solve_layers(model.problem(u0), "lie", 1)
        assert relative(model.readout(states[-1]), out.logits.numpy()) <= TWIN, source
        assert model.readout.decisions(states[-1]).shape == (2,)


def test_a_torch_encoder_with_a_final_norm(rng):
    """The final norm of a TransformerEncoder is the readout; a layer alone has none."""
    encoder = random_torch_encoder(8, 2, 16, layers=2, seed=4, affine=True)
    encoder.norm = torch.nn.LayerNorm(8, dtype=torch.float64)
    with torch.no_grad():
        encoder.norm.weight.copy_(torch.tensor(rng.standard_normal(8)))
    u0 = rng.standard_normal((2, 5, 8))
    with torch.no_grad():
        expected = encoder(torch.tensor(u0)).numpy()
    model = load_model(encoder)
    states = solve_layers(model.problem(u0), "lie", 1)
    assert relative(model.readout(states[-1]), expected) <= TWIN
    single = load_model(encoder.layers[0])
    assert single.readout is None and len(single.layers) == 1
    assert np.array_equal(single.layers[0].w1, from_torch(encoder.layers[0])[0].w1)


def test_a_pickle_is_refused_unread(tmp_path):
    marker = tmp_path / "unpickled"
    path = tmp_path / "weights.pt"
    path.write_bytes(pickle.dumps(PickleTrap(marker)))
    with pytest.raises(InvalidInputError) as refused:
        load_model(path)
    message = str(refused.value)
    assert str(path) in message and "never unpickles" in message and "\n" not in message
    assert not marker.exists()
    folder = tmp_path / "pretrained"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (folder / "pytorch_model.bin").write_bytes(pickle.dumps(PickleTrap(marker)))
    with pytest.raises(InvalidInputError, match=r"no \.safetensors weights \(found pytorch_model"):
        load_model(folder)
    assert not marker.exists()


@pytest.fixture
def pretrained(tmp_path):
    torch.manual_seed(2)
    _vit(num_labels=3).double().save_pretrained(tmp_path)
    return tmp_path


def _rewrite(folder, change):
    weights = folder / "model.safetensors"
    arrays = load_file(weights)
    change(arrays)
    save_file(arrays, weights)


def test_bad_pretrained_directories_name_the_file_and_the_key(pretrained):
    names = load_file(pretrained / "model.safetensors")  # transformers 4's names, as it saves
    key = next(k for k in names if k.endswith("layer.0.intermediate.dense.weight"))
    cases = [
        (lambda a: a.pop(key), f"tensor {key!r} is missing"),
        (lambda a: a.__setitem__(key, np.zeros((3, 3))), rf"tensor {key!r} has shape \(3, 3\)"),
        (lambda a: a[key].__setitem__((0, 0), np.nan), f"tensor {key!r} has NaN"),
    ]
    original = load_file(pretrained / "model.safetensors")
    for change, message in cases:
        _rewrite(pretrained, change)
        with pytest.raises(InvalidInputError, match=message) as refused:
            load_model(pretrained)
        assert str(pretrained) in str(refused.value) and "\n" not in str(refused.value)
        save_file(original, pretrained / "model.safetensors")
    config = json.loads((pretrained / "config.json").read_text())
    (pretrained / "config.json").write_text(json.dumps(config | {"model_type": "mixtral"}))
    refusal = r"architecture 'mixtral' is not supported \(mixture-of-experts layers\)"
    with pytest.raises(InvalidInputError, match=refusal):
        load_model(pretrained)
    del config["hidden_size"]
    (pretrained / "config.json").write_text(json.dumps(config))
    with pytest.raises(InvalidInputError, match="the configuration has no 'hidden_size'"):
        load_model(pretrained)


def test_other_bad_sources(tmp_path):
    with pytest.raises(InvalidInputError, match="no such file or directory"):
        load_model(tmp_path / "absent.safetensors")
    with pytest.raises(InvalidInputError, match="cannot read a model from dict"):
        load_model({})
    plain = tmp_path / "plain.safetensors"
    save_file({"w": np.zeros(3)}, plain)
    with pytest.raises(InvalidInputError, match="without tide's metadata"):
        load_model(plain)
    with pytest.raises(InvalidInputError, match=r"no config\.json"):
        load_model(tmp_path)


@pytest.mark.parametrize(
    ("model", "name", "floor"),
    [("vit-digits", "vit-digits", 0.95), ("max-digit.safetensors", "max-digit", 0.99)],
)
def test_the_shipped_networks_classify_their_held_out_inputs(model, name, floor):
    """The trained networks in reports/networks read back and, through the Lie scheme at
    dt = 1 and their readouts, classify the true labels of their held-out inputs (a wrong
    reading of any weight or of the readout would be near chance: 0.1)."""
    network = load_model(SHIPPED / model)
    inputs = np.load(SHIPPED / f"{name}-inputs.npy").astype(np.float64)
    labels = np.load(SHIPPED / f"{name}-labels.npy")
    states = solve_layers(network.problem(inputs), "lie", 1)
    assert np.mean(network.readout.decisions(states[-1]) == labels) >= floor


@pytest.mark.parametrize("name", ["char-sums", "char-sums-llama"])
def test_the_shipped_language_models_predict_their_held_out_characters(name):
    """The character-level GPT-2 and Llama from their save_pretrained directories and token
    ids alone: next-character accuracy well above chance (1/13; a wrong reading of any
    weight, the embedding, the rotary angles or the tied head would be near it), and a
    loss well below log 13."""
    network = load_model(SHIPPED / name)
    tokens = np.load(SHIPPED / "char-sums-tokens.npy")
    judged = network.readout.judge(
        solve_layers(network.problem(network.embed(tokens)))[-1], None, tokens
    )
    assert network.readout.next_token and judged.accuracy >= 0.45
    assert judged.loss <= 0.6 * np.log(13)


def test_the_shipped_encoder_embeds_its_digits():
    """max-digit's stored embedding (digit + position) gives its stored inputs to float32's
    rounding, and the digits it finds there have the labels as their largest."""
    network = load_model(SHIPPED / "max-digit.safetensors")
    inputs = np.load(SHIPPED / "max-digit-inputs.npy").astype(np.float64)
    every = network.embed(np.tile(np.arange(10), (8, 1)).T)  # (digit, position, d)
    gaps = np.abs(inputs[:, None] - every[None]).max(axis=-1)  # (input, digit, position)
    digits = gaps.argmin(axis=1)
    assert relative(network.embed(digits), inputs) <= 1e-7
    assert np.array_equal(digits.max(axis=1), np.load(SHIPPED / "max-digit-labels.npy"))


def test_a_vit_without_query_key_value_biases():
    """qkv_bias = false: the projections have no bias tensors, read as zero biases."""
    torch.manual_seed(3)
    config = tiny_vit(qkv_bias=False)
    module, out = _run(transformers.ViTModel(config), "vit")
    assert not any("q_proj.bias" in name for name in module.state_dict())
    model = load_model(module)
    states = solve_layers(model.problem(out.hidden_states[0].numpy()), "lie", 1)
    assert relative(model.readout(states[-1]), out.last_hidden_state.numpy()) <= TWIN
