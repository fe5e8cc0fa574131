"""Hugging Face Llama, Mistral and Qwen2 decoders read from their configuration and
tensors, without importing transformers (docs/networks.md section 6; their operators in
docs/model.md section 7).

Every layer is pre-RMSNorm (input_layernorm, post_attention_layernorm; eps =
rms_norm_eps), causal, with rotary positions (rope_theta; the "default" and "linear"
rope types), grouped-query attention (num_key_value_heads), a SwiGLU feed-forward
(gate_proj, up_proj, down_proj with hidden_act) and no biases, except Llama's
attention_bias / mlp_bias and Qwen2's query, key and value biases. The final norm belongs
to the readout; a *ForCausalLM's head is lm_head, or the word embeddings when tied and
save_pretrained left lm_head out. What the suite does not implement is refused in one
line naming the source and the setting: other rope types, a partial rotary factor,
mixture-of-experts layers; a sliding window becomes the model's longest input.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from solvers.errors import InvalidInputError
from solvers.io.hf_tensors import Tensors, activation_name, layer_of, linear
from solvers.network.embedding import TokenEmbedding
from solvers.network.model import Model
from solvers.network.readout import Dense, Readout

LLAMA_FAMILY = ("llama", "mistral", "qwen2")
"""The model types this module reads."""
NORMS = ("input_layernorm", "post_attention_layernorm")
"""A layer's two RMSNorms, before attention and before the feed-forward."""
EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts")
"""Configuration keys of mixture-of-experts feed-forwards, refused."""


def rope(config: Mapping[str, Any], source: str) -> tuple[float, float]:
    """(theta, linear factor) of the configuration's rotary positions: transformers 5's
    rope_parameters or 4's rope_theta and rope_scaling; other rope types refused."""
    params = {**(config.get("rope_scaling") or {}), **(config.get("rope_parameters") or {})}
    theta = float(params.get("rope_theta", config.get("rope_theta", 10000.0)))
    kind = params.get("rope_type", params.get("type", "default"))
    if kind not in ("default", "linear"):
        raise InvalidInputError(
            f"{source}: rope type {kind!r} is not supported (default and linear are)"
        )
    partial = float(config.get("partial_rotary_factor", 1.0))
    if partial != 1.0:
        raise InvalidInputError(f"{source}: partial_rotary_factor {partial} is not supported")
    return theta, float(params["factor"]) if kind == "linear" else 1.0


def window(config: Mapping[str, Any], kind: str) -> int | None:
    """The sliding window of attention, if the model uses one (Mistral's sliding_window,
    Qwen2's with use_sliding_window): inputs longer than it are refused by the model."""
    if kind == "qwen2" and not config.get("use_sliding_window", False):
        return None
    size = config.get("sliding_window")
    return None if size is None else int(size)


def llama_family(config: Mapping[str, Any], t: Tensors) -> Model:
    """The Model of a Llama, Mistral or Qwen2 (bare or *ForCausalLM) from its config and
    tensors (names without the task model's "model." prefix; see hf_model)."""
    kind = config["model_type"]
    for key in EXPERTS:
        if config.get(key):
            raise InvalidInputError(
                f"{t.source}: {key} = {config[key]}: mixture-of-experts layers are not supported"
            )
    d, d_ff = int(config["hidden_size"]), int(config["intermediate_size"])
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    d_k = int(config.get("head_dim") or d // heads)
    theta, factor = rope(config, t.source)
    activation = activation_name(config, "hidden_act", t.source, default="silu")
    qkv_bias = kind == "qwen2" or bool(config.get("attention_bias", False))
    o_bias = kind == "llama" and bool(config.get("attention_bias", False))
    mlp_bias = kind == "llama" and bool(config.get("mlp_bias", False))
    eps = float(config.get("rms_norm_eps", 1e-6))
    layers = []
    for i in range(int(config["num_hidden_layers"])):
        p = f"layers.{i}."
        q, k, v = (
            linear(t, f"{p}self_attn.{n}_proj", d, count * d_k, qkv_bias)
            for n, count in (("q", heads), ("k", kv_heads), ("v", kv_heads))
        )
        o = linear(t, f"{p}self_attn.o_proj", heads * d_k, d, o_bias)
        gate, up = (linear(t, f"{p}mlp.{n}_proj", d, d_ff, mlp_bias) for n in ("gate", "up"))
        down = linear(t, f"{p}mlp.down_proj", d_ff, d, mlp_bias)
        norms = tuple((t(f"{p}{n}.weight", (d,)), np.zeros(d)) for n in NORMS)
        layers.append(
            layer_of(
                q,
                k,
                v,
                o,
                (*up, *down),
                norms,
                heads,
                eps,
                activation,
                kv_heads,
                w_gate=gate[0],
                b_gate=gate[1],
                norm_kind="rms",
                rope_theta=theta,
                rope_factor=factor,
            )
        )
    final = Readout(norm=(t("norm.weight", (d,)), np.zeros(d), eps), norm_kind="rms")
    embedding = TokenEmbedding(t("embed_tokens.weight", (int(config["vocab_size"]), d)))
    return Model(
        tuple(layers), "pre", True, final, t.source, embedding, window=window(config, kind)
    )


def lm_head_readout(config: Mapping[str, Any], model: Model, t: Tensors) -> Readout | None:
    """A *ForCausalLM's readout (the final RMSNorm, then lm_head or the tied word
    embeddings), or None for a bare model."""
    vocabulary, d = model.embedding.vocabulary, model.d_model
    if t.has("lm_head.weight"):
        unembedding = t("lm_head.weight", (vocabulary, d)).T
    elif any(a.endswith("ForCausalLM") for a in config.get("architectures") or ()):
        if not config.get("tie_word_embeddings", False):
            raise InvalidInputError(
                f"{t.source}: tensor 'lm_head.weight' is missing (the LM head is not tied)"
            )
        unembedding = model.embedding.word.T
    else:
        return None
    head = Dense(unembedding, np.zeros(vocabulary))
    return Readout(model.readout.norm, None, (head,), norm_kind="rms")
