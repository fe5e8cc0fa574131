"""Hugging Face BERT, RoBERTa, DistilBERT, ViT, GPT-2 and (solvers.io.llama_family)
Llama, Mistral and Qwen2 read from their configuration and tensors (a state_dict's names,
as `save_pretrained` writes them), without importing transformers (docs/networks.md
sections 2, 5 and 6).

- BERT: post-LN encoder layers, per-feature affine norms, eps = layer_norm_eps; the
  activation from hidden_act; the embedding is word + position + token type 0, then its
  layer norm. BertForSequenceClassification's readout is the pooler (dense and tanh on
  the first token) and the classifier.
- RoBERTa: BERT's layers; positions count from pad_token_id + 1 over the non-padding
  tokens. RobertaForSequenceClassification's head is dense, tanh and out_proj on the
  first token.
- DistilBERT: post-LN layers (q_lin .. out_lin, ffn.lin1/lin2, eps 1e-12), word and
  position embeddings and their layer norm; DistilBertForSequenceClassification's head
  is pre_classifier, relu and classifier on the first token.
- ViT: pre-LN layers; the embedding is the patch convolution, class token and positions;
  the final layernorm belongs to the readout, and ViTForImageClassification's classifier
  acts on the first (class) token after it.
- GPT-2: pre-LN, causal layers, Conv1D weights acting on the right, gelu_new (GELU's tanh
  form); the embedding is wte + wpe; ln_f belongs to the readout.
  GPT2ForSequenceClassification's score acts on the last real token, GPT2LMHeadModel's
  head (lm_head, or wte when tied and save_pretrained left lm_head out) on every token.

Names are looked up under the task model's prefix (READERS: "bert.", "vit.", "model.", ...)
or none (the bare model); ViT's layers are read under transformers 5's names
(layers.i.attention.q_proj) or 4's (encoder.layer.i.attention.attention.query).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from solvers.errors import InvalidInputError
from solvers.io.hf_tensors import (
    EncoderNames,
    Tensors,
    activation_name,
    encoder_layer,
    heads_of,
    layer_of,
    linear,
    norm_pair,
)
from solvers.io.llama_family import LLAMA_FAMILY, llama_family, lm_head_readout
from solvers.network.embedding import PatchEmbedding, TokenEmbedding
from solvers.network.model import Model
from solvers.network.readout import Dense, Readout


def hf_model(config: Mapping[str, Any], arrays: Mapping[str, Any], source: str) -> Model:
    """The Model of a supported Hugging Face model (READERS; bare, task or LM model) from
    its config.json contents and its tensors."""
    kind = config.get("model_type")
    if kind not in READERS:
        refused = f" ({REFUSED[kind]})" if kind in REFUSED else ""
        raise InvalidInputError(
            f"{source}: architecture {kind!r} is not supported{refused}; {', '.join(READERS)} are"
        )
    reader, prefix, probe = READERS[kind]
    has_prefix = any(k.startswith(prefix + probe) for k in arrays)
    try:
        model = reader(config, Tensors(source, arrays, prefix if has_prefix else ""))
    except KeyError as missing:  # the tensors report their own; this is the configuration's
        raise InvalidInputError(f"{source}: the configuration has no {missing.args[0]!r}") from None
    head = Tensors(source, arrays)
    return _with_head(kind, config, model, head)


def _bert(config: Mapping[str, Any], t: Tensors) -> Model:
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise InvalidInputError(
            f"{t.source}: position_embedding_type {config['position_embedding_type']!r} "
            "changes the attention; only 'absolute' is supported"
        )
    d, d_ff = int(config["hidden_size"]), int(config["intermediate_size"])
    dims = (d, d_ff, heads_of(config, d, "num_attention_heads", t.source))
    activation = activation_name(config, "hidden_act", t.source)
    eps = float(config.get("layer_norm_eps", 1e-12))
    layers = [
        encoder_layer(t, _bert_names(f"encoder.layer.{i}."), dims, eps, activation)
        for i in range(int(config["num_hidden_layers"]))
    ]
    embedding = TokenEmbedding(
        t("embeddings.word_embeddings.weight", (int(config["vocab_size"]), d)),
        t("embeddings.position_embeddings.weight", (int(config["max_position_embeddings"]), d)),
        t("embeddings.token_type_embeddings.weight", (int(config.get("type_vocab_size", 2)), d))[0],
        (*norm_pair(t, "embeddings.LayerNorm", d), eps),
        int(config.get("pad_token_id", 1)) if config["model_type"] == "roberta" else None,
    )
    return Model(tuple(layers), "post", False, None, t.source, embedding)


def _bert_names(p: str) -> EncoderNames:
    """BERT's (and RoBERTa's) names of the layer under prefix p."""
    return EncoderNames(
        *(f"{p}attention.self.{n}" for n in ("query", "key", "value")),
        f"{p}attention.output.dense",
        f"{p}intermediate.dense",
        f"{p}output.dense",
        f"{p}attention.output.LayerNorm",
        f"{p}output.LayerNorm",
    )


def _distilbert(config: Mapping[str, Any], t: Tensors) -> Model:
    d, d_ff = int(config["dim"]), int(config["hidden_dim"])
    dims = (d, d_ff, heads_of(config, d, "n_heads", t.source))
    activation = activation_name(config, "activation", t.source)
    eps = 1e-12  # DistilBERT's layer norms fix eps = 1e-12
    layers = []
    for i in range(int(config["n_layers"])):
        p = f"transformer.layer.{i}."
        names = EncoderNames(
            *(f"{p}attention.{n}_lin" for n in ("q", "k", "v", "out")),
            f"{p}ffn.lin1",
            f"{p}ffn.lin2",
            f"{p}sa_layer_norm",
            f"{p}output_layer_norm",
        )
        layers.append(encoder_layer(t, names, dims, eps, activation))
    embedding = TokenEmbedding(
        t("embeddings.word_embeddings.weight", (int(config["vocab_size"]), d)),
        t("embeddings.position_embeddings.weight", (int(config["max_position_embeddings"]), d)),
        norm=(*norm_pair(t, "embeddings.LayerNorm", d), eps),
    )
    return Model(tuple(layers), "post", False, None, t.source, embedding)


def _vit(config: Mapping[str, Any], t: Tensors) -> Model:
    d, d_ff = int(config["hidden_size"]), int(config["intermediate_size"])
    dims = (d, d_ff, heads_of(config, d, "num_attention_heads", t.source))
    activation = activation_name(config, "hidden_act", t.source)
    qkv_bias = bool(config.get("qkv_bias", True))
    eps = float(config.get("layer_norm_eps", 1e-12))
    v5 = t.has("layers.0.attention.q_proj.weight")
    layers = []
    for i in range(int(config["num_hidden_layers"])):
        if v5:
            p = f"layers.{i}."
            maps = [f"{p}attention.{n}_proj" for n in "qkvo"] + [f"{p}mlp.fc1", f"{p}mlp.fc2"]
        else:
            p = f"encoder.layer.{i}."
            maps = [f"{p}attention.attention.{n}" for n in ("query", "key", "value")]
            maps += [f"{p}attention.output.dense", f"{p}intermediate.dense", f"{p}output.dense"]
        names = EncoderNames(*maps, f"{p}layernorm_before", f"{p}layernorm_after")
        layers.append(encoder_layer(t, names, dims, eps, activation, qkv_bias))
    final = Readout(norm=(*norm_pair(t, "layernorm", d), eps))
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
    heads = heads_of(config, d, "n_head", t.source)
    activation = activation_name(config, "activation_function", t.source)
    eps = float(config.get("layer_norm_epsilon", 1e-5))
    scale = None if config.get("scale_attn_weights", True) else 1.0
    layers = []
    for i in range(int(config["n_layer"])):
        p = f"h.{i}."
        qkv = t(f"{p}attn.c_attn.weight", (d, 3 * d))  # Conv1D: (in, out), acts on the right
        qkv_b = t(f"{p}attn.c_attn.bias", (3 * d,))
        q, k, v = ((qkv[:, j * d : (j + 1) * d], qkv_b[j * d : (j + 1) * d]) for j in range(3))
        layer = layer_of(
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
            (norm_pair(t, f"{p}ln_1", d), norm_pair(t, f"{p}ln_2", d)),
            heads,
            eps,
            activation,
        )
        layers.append(layer if scale is None else replace(layer, scale=scale))
    final = Readout(norm=(*norm_pair(t, "ln_f", d), eps))
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
    if kind in LLAMA_FAMILY:
        readout = lm_head_readout(config, model, t)
        return model if readout is None else replace(model, readout=readout)
    if kind == "bert" and t.has("classifier.weight"):
        pooler = Dense(*linear(t, "bert.pooler.dense", d, d), activation="tanh")
        classifier = Dense(*linear(t, "classifier", d, labels))
        readout = Readout(None, "first", (pooler, classifier))
    elif kind == "roberta" and t.has("classifier.out_proj.weight"):
        dense = Dense(*linear(t, "classifier.dense", d, d), activation="tanh")
        classifier = Dense(*linear(t, "classifier.out_proj", d, labels))
        readout = Readout(None, "first", (dense, classifier))
    elif kind == "distilbert" and t.has("classifier.weight"):
        dense = Dense(*linear(t, "pre_classifier", d, d), activation="relu")
        classifier = Dense(*linear(t, "classifier", d, labels))
        readout = Readout(None, "first", (dense, classifier))
    elif kind == "vit" and t.has("classifier.weight"):
        readout = Readout(norm, "first", (Dense(*linear(t, "classifier", d, labels)),))
    elif kind == "gpt2" and t.has("score.weight"):
        score = Dense(*linear(t, "score", d, labels, bias=False))
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


READERS: dict[str, tuple[Callable[[Mapping[str, Any], Tensors], Model], str, str]] = {
    "bert": (_bert, "bert.", "embeddings."),
    "roberta": (_bert, "roberta.", "embeddings."),
    "distilbert": (_distilbert, "distilbert.", "embeddings."),
    "vit": (_vit, "vit.", "embeddings."),
    "gpt2": (_gpt2, "transformer.", "wte."),
    **{kind: (llama_family, "model.", "embed_tokens.") for kind in LLAMA_FAMILY},
}
"""Per model_type: its reader, the task model's prefix and a name that shows the prefix."""
REFUSED = {
    "mixtral": "mixture-of-experts layers",
    "qwen2_moe": "mixture-of-experts layers",
    "qwen3_moe": "mixture-of-experts layers",
}
"""Model types of the families read here whose other parts are not supported."""
