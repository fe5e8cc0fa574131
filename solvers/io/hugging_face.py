"""Hugging Face BERT, ViT and GPT-2 read from their configuration and tensors (a
state_dict's names, as `save_pretrained` writes them), without importing transformers
(docs/networks.md sections 2 and 5).

- BERT: post-LN encoder layers, per-feature affine norms, eps = layer_norm_eps; the
  activation from hidden_act; the embedding is word + position + token type 0, then its
  layer norm. BertForSequenceClassification's readout is the pooler (dense and tanh on
  the first token) and the classifier.
- ViT: pre-LN layers; the embedding is the patch convolution, class token and positions;
  the final layernorm belongs to the readout, and ViTForImageClassification's classifier
  acts on the first (class) token after it.
- GPT-2: pre-LN, causal layers, Conv1D weights acting on the right, gelu_new (GELU's tanh
  form); the embedding is wte + wpe; ln_f belongs to the readout.
  GPT2ForSequenceClassification's score acts on the last real token, GPT2LMHeadModel's
  head (lm_head, or wte when tied and save_pretrained left lm_head out) on every token.

Names are looked up under the task model's prefix ("bert.", "vit.", "transformer.") or
none (the bare model); ViT's layers are read under transformers 5's names
(layers.i.attention.q_proj) or 4's (encoder.layer.i.attention.attention.query).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from solvers.equation.weights import LayerWeights, torch_style_norm
from solvers.errors import InvalidInputError
from solvers.network.embedding import PatchEmbedding, TokenEmbedding
from solvers.network.model import Model
from solvers.network.readout import Dense, Readout

HF_ACTIVATIONS = {
    "gelu": "gelu",
    "relu": "relu",
    "gelu_new": "gelu-tanh",
    "gelu_pytorch_tanh": "gelu-tanh",
    "silu": "silu",
}
"""Hugging Face activation names and the suite's (docs/model.md section 1)."""


class Tensors:
    """Named float64 arrays of one source, checked on the way out: a missing name, a shape
    other than expected or a non-finite entry is a one-line InvalidInputError naming the
    source and the name."""

    def __init__(self, source: str, arrays: Mapping[str, Any], prefix: str = "") -> None:
        self.source, self.arrays, self.prefix = source, arrays, prefix

    def __call__(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        key = self.prefix + name
        if key not in self.arrays:
            raise InvalidInputError(f"{self.source}: tensor {key!r} is missing")
        array = np.asarray(self.arrays[key], dtype=np.float64)
        if array.shape != shape:
            raise InvalidInputError(
                f"{self.source}: tensor {key!r} has shape {array.shape}, expected {shape}"
            )
        if not np.isfinite(array).all():
            raise InvalidInputError(f"{self.source}: tensor {key!r} has NaN or infinite entries")
        return array

    def has(self, name: str) -> bool:
        return self.prefix + name in self.arrays


def hf_model(config: Mapping[str, Any], arrays: Mapping[str, Any], source: str) -> Model:
    """The Model of a BERT, ViT or GPT-2 (bare or task model) from its config.json contents
    and its tensors."""
    kind = config.get("model_type")
    readers: dict[str, Callable[[Mapping[str, Any], Tensors], Model]] = {
        "bert": _bert,
        "vit": _vit,
        "gpt2": _gpt2,
    }
    if kind not in readers:
        raise InvalidInputError(
            f"{source}: architecture {kind!r} is not supported (BERT, ViT and GPT-2 are)"
        )
    prefix = {"bert": "bert.", "vit": "vit.", "gpt2": "transformer."}[kind]
    probe = {"bert": "embeddings.", "vit": "embeddings.", "gpt2": "wte."}[kind]
    has_prefix = any(k.startswith(prefix + probe) for k in arrays)
    try:
        model = readers[kind](config, Tensors(source, arrays, prefix if has_prefix else ""))
    except KeyError as missing:  # the tensors report their own; this is the configuration's
        raise InvalidInputError(f"{source}: the configuration has no {missing.args[0]!r}") from None
    head = Tensors(source, arrays)
    return _with_head(kind, config, model, head)


def _activation(config: Mapping[str, Any], key: str, source: str) -> str:
    name = config.get(key, "gelu")
    if name not in HF_ACTIVATIONS:
        raise InvalidInputError(
            f"{source}: activation {key} = {name!r} is not supported "
            f"({', '.join(HF_ACTIVATIONS)} are)"
        )
    return HF_ACTIVATIONS[name]


def _heads(config: Mapping[str, Any], d: int, key: str, source: str) -> int:
    heads = int(config[key])
    if d % heads:
        raise InvalidInputError(f"{source}: hidden size {d} is not a multiple of {heads} heads")
    return heads


def _per_head(matrix: np.ndarray, heads: int) -> np.ndarray:
    """(d, heads d_k) acting on the right -> (heads, d, d_k)."""
    d, width = matrix.shape
    return matrix.reshape(d, heads, width // heads).transpose(1, 0, 2)


def _layer(
    q: tuple[np.ndarray, np.ndarray],
    k: tuple[np.ndarray, np.ndarray],
    v: tuple[np.ndarray, np.ndarray],
    o: tuple[np.ndarray, np.ndarray],
    ffn: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    norms: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    heads: int,
    eps: float,
    activation: str,
) -> LayerWeights:
    """LayerWeights from right-acting (weight, bias) pairs of shapes (d, d) and (d,)."""
    d = q[0].shape[0]
    d_k = d // heads
    w1, b1, w2, b2 = ffn
    return LayerWeights(
        wq=_per_head(q[0], heads),
        bq=q[1].reshape(heads, d_k),
        wk=_per_head(k[0], heads),
        bk=k[1].reshape(heads, d_k),
        wv=_per_head(v[0], heads),
        bv=v[1].reshape(heads, d_k),
        wo=o[0].reshape(heads, d_k, d),
        bo=o[1],
        w1=w1,
        b1=b1,
        w2=w2,
        b2=b2,
        norm1=torch_style_norm(*norms[0]),
        norm2=torch_style_norm(*norms[1]),
        eps=eps,
        activation=activation,
    )


def _linear(t: Tensors, name: str, d_in: int, d_out: int, bias: bool = True):
    """A torch Linear (weight (out, in)) as a right-acting (W, b)."""
    weight = t(f"{name}.weight", (d_out, d_in)).T
    return weight, t(f"{name}.bias", (d_out,)) if bias else np.zeros(d_out)


def _norm(t: Tensors, name: str, d: int) -> tuple[np.ndarray, np.ndarray]:
    return t(f"{name}.weight", (d,)), t(f"{name}.bias", (d,))


def _bert(config: Mapping[str, Any], t: Tensors) -> Model:
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise InvalidInputError(
            f"{t.source}: position_embedding_type {config['position_embedding_type']!r} "
            "changes the attention; only 'absolute' is supported"
        )
    d, d_ff = int(config["hidden_size"]), int(config["intermediate_size"])
    heads = _heads(config, d, "num_attention_heads", t.source)
    activation = _activation(config, "hidden_act", t.source)
    layers = []
    for i in range(int(config["num_hidden_layers"])):
        p = f"encoder.layer.{i}."
        layers.append(
            _layer(
                *(_linear(t, f"{p}attention.self.{n}", d, d) for n in ("query", "key", "value")),
                _linear(t, f"{p}attention.output.dense", d, d),
                (
                    *_linear(t, f"{p}intermediate.dense", d, d_ff),
                    *_linear(t, f"{p}output.dense", d_ff, d),
                ),
                (
                    _norm(t, f"{p}attention.output.LayerNorm", d),
                    _norm(t, f"{p}output.LayerNorm", d),
                ),
                heads,
                float(config.get("layer_norm_eps", 1e-12)),
                activation,
            )
        )
    embedding = TokenEmbedding(
        t("embeddings.word_embeddings.weight", (int(config["vocab_size"]), d)),
        t("embeddings.position_embeddings.weight", (int(config["max_position_embeddings"]), d)),
        t("embeddings.token_type_embeddings.weight", (int(config.get("type_vocab_size", 2)), d))[0],
        (*_norm(t, "embeddings.LayerNorm", d), float(config.get("layer_norm_eps", 1e-12))),
    )
    return Model(tuple(layers), "post", False, None, t.source, embedding)


def _vit(config: Mapping[str, Any], t: Tensors) -> Model:
    d, d_ff = int(config["hidden_size"]), int(config["intermediate_size"])
    heads = _heads(config, d, "num_attention_heads", t.source)
    activation = _activation(config, "hidden_act", t.source)
    qkv_bias = bool(config.get("qkv_bias", True))
    eps = float(config.get("layer_norm_eps", 1e-12))
    v5 = t.has("layers.0.attention.q_proj.weight")
    layers = []
    for i in range(int(config["num_hidden_layers"])):
        if v5:
            p = f"layers.{i}."
            names = [f"{p}attention.{n}_proj" for n in "qkvo"] + [f"{p}mlp.fc1", f"{p}mlp.fc2"]
        else:
            p = f"encoder.layer.{i}."
            names = [f"{p}attention.attention.{n}" for n in ("query", "key", "value")]
            names += [f"{p}attention.output.dense", f"{p}intermediate.dense", f"{p}output.dense"]
        q, k, v = (_linear(t, n, d, d, qkv_bias) for n in names[:3])
        layers.append(
            _layer(
                q,
                k,
                v,
                _linear(t, names[3], d, d),
                (*_linear(t, names[4], d, d_ff), *_linear(t, names[5], d_ff, d)),
                (_norm(t, f"{p}layernorm_before", d), _norm(t, f"{p}layernorm_after", d)),
                heads,
                eps,
                activation,
            )
        )
    final = Readout(norm=(*_norm(t, "layernorm", d), eps))
    patch, channels = int(config["patch_size"]), int(config.get("num_channels", 3))
    size = config["image_size"]
    height, width = (size, size) if isinstance(size, int) else size
    count = (int(height) // patch) * (int(width) // patch)
    embedding = PatchEmbedding(
        t("embeddings.patch_embeddings.projection.weight", (d, channels, patch, patch)),
        t("embeddings.patch_embeddings.projection.bias", (d,)),
        t("embeddings.cls_token", (1, 1, d))[0, 0],
        t("embeddings.position_embeddings", (1, count + 1, d))[0],
    )
    return Model(tuple(layers), "pre", False, final, t.source, embedding)


def _gpt2(config: Mapping[str, Any], t: Tensors) -> Model:
    if config.get("scale_attn_by_inverse_layer_idx", False):
        raise InvalidInputError(
            f"{t.source}: scale_attn_by_inverse_layer_idx scales each layer's attention "
            "differently; not supported"
        )
    d = int(config["n_embd"])
    d_ff = int(config.get("n_inner") or 4 * d)
    heads = _heads(config, d, "n_head", t.source)
    activation = _activation(config, "activation_function", t.source)
    eps = float(config.get("layer_norm_epsilon", 1e-5))
    scale = None if config.get("scale_attn_weights", True) else 1.0
    layers = []
    for i in range(int(config["n_layer"])):
        p = f"h.{i}."
        qkv = t(f"{p}attn.c_attn.weight", (d, 3 * d))  # Conv1D: (in, out), acts on the right
        qkv_b = t(f"{p}attn.c_attn.bias", (3 * d,))
        q, k, v = ((qkv[:, j * d : (j + 1) * d], qkv_b[j * d : (j + 1) * d]) for j in range(3))
        layer = _layer(
            q,
            k,
            v,
            (t(f"{p}attn.c_proj.weight", (d, d)), t(f"{p}attn.c_proj.bias", (d,))),
            (
                t(f"{p}mlp.c_fc.weight", (d, d_ff)),
                t(f"{p}mlp.c_fc.bias", (d_ff,)),
                t(f"{p}mlp.c_proj.weight", (d_ff, d)),
                t(f"{p}mlp.c_proj.bias", (d,)),
            ),
            (_norm(t, f"{p}ln_1", d), _norm(t, f"{p}ln_2", d)),
            heads,
            eps,
            activation,
        )
        layers.append(layer if scale is None else replace(layer, scale=scale))
    final = Readout(norm=(*_norm(t, "ln_f", d), eps))
    embedding = TokenEmbedding(
        t("wte.weight", (int(config["vocab_size"]), d)),
        t("wpe.weight", (int(config["n_positions"]), d)),
    )
    return Model(tuple(layers), "pre", True, final, t.source, embedding)


def _with_head(kind: str, config: Mapping[str, Any], model: Model, t: Tensors) -> Model:
    """The task model's readout: BERT's pooler and classifier, ViT's classifier on the class
    token, GPT-2's score on the last real token or its LM head on every token, after the
    final norm (if any)."""
    d = model.d_model
    labels = len(config["id2label"]) if "id2label" in config else int(config.get("num_labels", 2))
    norm = model.readout.norm if model.readout is not None else None
    if kind == "bert" and t.has("classifier.weight"):
        pooler = Dense(*_linear(t, "bert.pooler.dense", d, d), activation="tanh")
        classifier = Dense(*_linear(t, "classifier", d, labels))
        readout = Readout(None, "first", (pooler, classifier))
    elif kind == "vit" and t.has("classifier.weight"):
        readout = Readout(norm, "first", (Dense(*_linear(t, "classifier", d, labels)),))
    elif kind == "gpt2" and t.has("score.weight"):
        score = Dense(*_linear(t, "score", d, labels, bias=False))
        readout = Readout(norm, "last", (score,))
    elif kind == "gpt2" and (unembedding := _lm_head(config, model, t)) is not None:
        readout = Readout(norm, None, (Dense(unembedding, np.zeros(unembedding.shape[1])),))
    else:
        return model
    return replace(model, readout=readout)


def _lm_head(config: Mapping[str, Any], model: Model, t: Tensors) -> np.ndarray | None:
    """GPT2LMHeadModel's unembedding W_U (d, V) acting on the right: lm_head.weight, or the
    word embeddings when tied and save_pretrained left the copy out; None for other
    models."""
    vocabulary = model.embedding.vocabulary
    if t.has("lm_head.weight"):
        return t("lm_head.weight", (vocabulary, model.d_model)).T
    if "GPT2LMHeadModel" in (config.get("architectures") or ()):
        if not config.get("tie_word_embeddings", True):
            raise InvalidInputError(
                f"{t.source}: tensor 'lm_head.weight' is missing (the LM head is not tied)"
            )
        return model.embedding.word.T
    return None
