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


def tiny_bert(layers: int = 2, **settings: Any) -> Any:
    """A BertConfig of d 12, 3 heads, FFN 20, 50 tokens, 16 positions, and `settings`."""
    return transformers.BertConfig(
        hidden_size=12,
        num_hidden_layers=layers,
        num_attention_heads=3,
        intermediate_size=20,
        vocab_size=50,
        max_position_embeddings=16,
        **settings,
    )


def tiny_vit(**settings: Any) -> Any:
    """A ViTConfig of d 12, 2 layers, 3 heads, FFN 20, one-channel 8 x 8 images in 4 x 4
    patches, and `settings`."""
    return transformers.ViTConfig(
        hidden_size=12,
        num_hidden_layers=2,
        num_attention_heads=3,
        intermediate_size=20,
        image_size=8,
        patch_size=4,
        num_channels=1,
        **settings,
    )


def tiny_gpt2(layers: int = 2, **settings: Any) -> Any:
    """A GPT2Config of d 12, 3 heads, 50 tokens, 16 positions, and `settings`."""
    return transformers.GPT2Config(
        n_embd=12, n_layer=layers, n_head=3, vocab_size=50, n_positions=16, **settings
    )


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
