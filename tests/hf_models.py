"""Small Hugging Face classifiers in float64, run on seeded inputs, the trained networks
the suite ships, and a pickle that shows whether it was ever unpickled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers

SHIPPED = Path(__file__).resolve().parents[1] / "reports" / "networks"
"""The trained networks the built-in study ships (studies/networks/train.py)."""


def tiny_bert(layers: int = 2, d: int = 12, heads: int = 3, **settings: Any) -> Any:
    """A BertConfig of `layers` layers of width d, FFN 20 (d 12) or 2 d, 50 tokens and 16
    positions, `settings` overriding any of them."""
    size = {"hidden_size": d, "num_attention_heads": heads, "intermediate_size": _ffn(d)}
    tokens = {"vocab_size": 50, "max_position_embeddings": 16}
    return transformers.BertConfig(num_hidden_layers=layers, **(size | tokens | settings))


def tiny_vit(d: int = 12, heads: int = 3, **settings: Any) -> Any:
    """A ViTConfig of 2 layers of width d, FFN 20 (d 12) or 2 d, one-channel 8 x 8 images
    in 4 x 4 patches, `settings` overriding any of them."""
    size = {"hidden_size": d, "num_attention_heads": heads, "intermediate_size": _ffn(d)}
    images = {"image_size": 8, "patch_size": 4, "num_channels": 1}
    return transformers.ViTConfig(num_hidden_layers=2, **(size | images | settings))


def tiny_gpt2(layers: int = 2, d: int = 12, heads: int = 3, **settings: Any) -> Any:
    """A GPT2Config of `layers` layers of width d, 50 tokens and 16 positions, `settings`
    overriding any of them."""
    size = {"n_embd": d, "n_layer": layers, "n_head": heads, "vocab_size": 50, "n_positions": 16}
    return transformers.GPT2Config(**(size | settings))


def tiny_decoder(kind: str = "llama", layers: int = 2, d: int = 16, **settings: Any) -> Any:
    """A Llama, Mistral or Qwen2 config of `layers` layers of width d, 4 heads and 2
    key-value heads, FFN 24, rope theta 1e4, RMSNorm eps 1e-6, 40 tokens and 64
    positions, `settings` overriding any of them."""
    config = {
        "llama": transformers.LlamaConfig,
        "mistral": transformers.MistralConfig,
        "qwen2": transformers.Qwen2Config,
    }[kind]
    size = {"hidden_size": d, "num_attention_heads": 4, "num_key_value_heads": 2}
    rest = {"intermediate_size": 24, "rms_norm_eps": 1e-6, "vocab_size": 40}
    rest |= {"max_position_embeddings": 64, "rope_theta": 1e4}
    return config(num_hidden_layers=layers, **(size | rest | settings))


def tiny_roberta(layers: int = 2, **settings: Any) -> Any:
    """A RobertaConfig like tiny_bert's (d 12, 3 heads, FFN 20, 50 tokens), 18 positions
    (RoBERTa's count from pad_token_id + 1 = 2), sdpa attention."""
    size = {"hidden_size": 12, "num_attention_heads": 3, "intermediate_size": 20}
    tokens = {"vocab_size": 50, "max_position_embeddings": 18}
    return transformers.RobertaConfig(num_hidden_layers=layers, **(size | tokens | settings))


def tiny_distilbert(layers: int = 2, **settings: Any) -> Any:
    """A DistilBertConfig of width 12, 3 heads, FFN 20, 50 tokens and 16 positions."""
    size = {"dim": 12, "n_heads": 3, "hidden_dim": 20, "n_layers": layers}
    return transformers.DistilBertConfig(
        vocab_size=50, max_position_embeddings=16, **(size | settings)
    )


def perturbed(module: Any, seed: int = 0, size: float = 0.1) -> Any:
    """`module` in float64 eval mode with every parameter moved by size * N(0, 1) (seeded),
    so that no gain is exactly 1 and no bias exactly 0."""
    generator = torch.Generator().manual_seed(seed)
    module = module.double().eval()
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.add_(
                size * torch.randn(parameter.shape, generator=generator, dtype=torch.float64)
            )
    return module


def _ffn(d: int) -> int:
    return 20 if d == 12 else 2 * d


def vit_classifier(
    layers: int, patch: int, labels: int, batch: int, seed: int = 0
) -> tuple[Any, Any]:
    """A ViTForImageClassification (d = 16, 4 heads, 8 x 8 one-channel images; weights
    from torch's generator seeded with `seed`) in eval mode, and its output with hidden
    states on `batch` seeded images."""
    torch.manual_seed(seed)
    config = transformers.ViTConfig(
        hidden_size=16,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=32,
        image_size=8,
        patch_size=patch,
        num_channels=1,
        num_labels=labels,
    )
    module = transformers.ViTForImageClassification(config).double().eval()
    pixels = torch.tensor(np.random.default_rng(seed).standard_normal((batch, 1, 8, 8)))
    with torch.no_grad():
        return module, module(pixel_values=pixels, output_hidden_states=True)


class PickleTrap:
    """Unpickling this creates `marker`: its absence proves nothing was unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (open, (str(self.marker), "w"))
