"""An independent float64 implementation of the Llama-family decoder (Llama, Mistral,
Qwen2), written from the Hugging Face modules' mathematics with numpy alone and from a
state_dict's names: the truth for the suite's twins at 1e-13, where the library itself
computes RMSNorm, the rotary tables and an eager softmax in float32 (docs/model.md
section 7). It shares no code with the suite. Its agreement with the library at the
library's own precision is tested beside it (tests/solvers/io/test_decoders.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


class DecoderReference:
    """The decoder of a config (a dict) and its float64 state_dict (numpy arrays)."""

    def __init__(self, config: Mapping[str, Any], state: Mapping[str, np.ndarray]) -> None:
        self.config = config
        prefix = "model." if any(k.startswith("model.") for k in state) else ""
        self.state = {k.removeprefix(prefix): np.asarray(v, np.float64) for k, v in state.items()}
        self.d = config["hidden_size"]
        self.heads = config["num_attention_heads"]
        self.kv_heads = config["num_key_value_heads"]
        self.d_k = config.get("head_dim") or self.d // self.heads
        self.eps = config["rms_norm_eps"]
        self.layers = config["num_hidden_layers"]
        parameters = config.get("rope_parameters") or {"rope_theta": config.get("rope_theta")}
        self.theta = parameters["rope_theta"]
        self.factor = parameters.get("factor", 1.0)

    def rms(self, x: np.ndarray, weight: np.ndarray) -> np.ndarray:
        return weight * x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps)

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        y = x @ self.state[f"{name}.weight"].T
        bias = self.state.get(f"{name}.bias")
        return y if bias is None else y + bias

    def _rotated(self, x: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """x (B, H, N, d_k) rotated by rotate_half with inv_freq = 1 / theta^(2i / d_k)."""
        inv_freq = 1.0 / self.theta ** (np.arange(0, self.d_k, 2) / self.d_k) / self.factor
        angles = np.concatenate([np.outer(positions, inv_freq)] * 2, axis=-1)
        half = self.d_k // 2
        rotated_half = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * np.cos(angles) + rotated_half * np.sin(angles)

    def attention(self, i: int, h: np.ndarray, positions: np.ndarray, mask=None) -> np.ndarray:
        p = f"layers.{i}.self_attn."
        b, n, _ = h.shape

        def heads(x: np.ndarray, count: int) -> np.ndarray:
            return x.reshape(b, n, count, self.d_k).transpose(0, 2, 1, 3)

        q = self._rotated(heads(self._linear(h, p + "q_proj"), self.heads), positions)
        k = self._rotated(heads(self._linear(h, p + "k_proj"), self.kv_heads), positions)
        v = heads(self._linear(h, p + "v_proj"), self.kv_heads)
        group = self.heads // self.kv_heads
        k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(self.d_k)
        blocked = np.triu(np.ones((n, n), bool), 1)
        if mask is not None:
            blocked = blocked | ~mask[:, None, None, :].astype(bool)
        scores = np.where(blocked, -np.inf, scores)
        scores = scores - scores.max(axis=-1, keepdims=True)
        weights = np.exp(scores)
        weights /= weights.sum(axis=-1, keepdims=True)
        out = (weights @ v).transpose(0, 2, 1, 3).reshape(b, n, self.heads * self.d_k)
        return self._linear(out, p + "o_proj")

    def feed_forward(self, i: int, h: np.ndarray) -> np.ndarray:
        p = f"layers.{i}.mlp."
        gate = self._linear(h, p + "gate_proj")
        return self._linear(
            gate / (1 + np.exp(-gate)) * self._linear(h, p + "up_proj"), p + "down_proj"
        )

    def field(self, i: int, x: np.ndarray, positions: np.ndarray, mask=None) -> np.ndarray:
        """The layer flow's field A(R1 x) + F(R2 x) of layer i (docs/model.md section 7)."""
        p = f"layers.{i}."
        attended = self.attention(
            i, self.rms(x, self.state[p + "input_layernorm.weight"]), positions, mask
        )
        return attended + self.feed_forward(
            i, self.rms(x, self.state[p + "post_attention_layernorm.weight"])
        )

    def hidden_states(self, ids: np.ndarray, mask=None) -> list[np.ndarray]:
        """The embedding, each layer's output and the final norm's, as the library's
        output_hidden_states lists them (the last one after the final norm)."""
        x = self.state["embed_tokens.weight"][ids]
        positions = np.arange(ids.shape[1], dtype=np.float64)
        states = [x]
        for i in range(self.layers):
            x = self.layer(i, x, positions, mask)
            states.append(x)
        states[-1] = self.rms(x, self.state["norm.weight"])
        return states

    def layer(self, i: int, x: np.ndarray, positions: np.ndarray, mask=None) -> np.ndarray:
        """One decoder layer: x + A(R1 x), then that plus F(R2 of it)."""
        p = f"layers.{i}."
        x = x + self.attention(
            i, self.rms(x, self.state[p + "input_layernorm.weight"]), positions, mask
        )
        return x + self.feed_forward(
            i, self.rms(x, self.state[p + "post_attention_layernorm.weight"])
        )
