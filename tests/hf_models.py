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


def vit_classifier(
    layers: int, patch: int, labels: int, batch: int, seed: int = 0
) -> tuple[Any, Any]:
    """A ViTForImageClassification (d = 16, 4 heads, 8 x 8 one-channel images; weights
    from torch's generator seeded with `seed`) in eval mode, and its output with hidden
    states on `batch` seeded images."""
    torch.manual_seed(seed)
    config = transformers.ViTConfig(
        hidden_size=16, num_hidden_layers=layers, num_attention_heads=4, intermediate_size=32,
        image_size=8, patch_size=patch, num_channels=1, num_labels=labels,
    )  # fmt: skip
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
