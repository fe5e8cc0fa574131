"""torch encoders with every parameter drawn from a seeded numpy generator (no torch RNG)."""

from __future__ import annotations

import numpy as np
import torch


def random_torch_encoder(
    d: int,
    heads: int,
    d_ff: int,
    *,
    layers: int = 6,
    norm_first: bool = False,
    eps: float = 1e-5,
    affine: bool = False,
    batch_first: bool = True,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> torch.nn.TransformerEncoder:
    """A TransformerEncoder in eval mode (dropout 0.1, to show it is ignored) with seeded weights.

    Matrices are N(0, 1/fan_in), biases N(0, 0.1^2); layer norms get gains 1 + 0.3 N(0, 1)
    and biases 0.3 N(0, 1) when `affine`, else torch's ones and zeros.
    """
    rng = np.random.default_rng(seed)
    layer = torch.nn.TransformerEncoderLayer(
        d,
        heads,
        d_ff,
        dropout=0.1,
        layer_norm_eps=eps,
        batch_first=batch_first,
        norm_first=norm_first,
        dtype=dtype,
    )
    encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
    with torch.no_grad():
        for name, parameter in encoder.named_parameters():
            shape = tuple(parameter.shape)
            if ".norm" in name:
                if not affine:
                    continue
                base = 1.0 if name.endswith("weight") else 0.0
                values = base + 0.3 * rng.standard_normal(shape)
            elif len(shape) == 2:
                values = rng.standard_normal(shape) / np.sqrt(shape[1])
            else:
                values = 0.1 * rng.standard_normal(shape)
            parameter.copy_(torch.tensor(values, dtype=dtype))
    return encoder.eval()


def run_encoder(
    encoder: torch.nn.TransformerEncoder, u: np.ndarray, *, batch_first: bool, **kwargs
) -> np.ndarray:
    """encoder applied to u of shape (B, N, d), returned as (B, N, d) in the encoder's dtype."""
    dtype = next(encoder.parameters()).dtype
    x = torch.tensor(u, dtype=dtype)
    if not batch_first:
        x = x.transpose(0, 1)
    with torch.no_grad():
        y = encoder(x, **kwargs)
    if not batch_first:
        y = y.transpose(0, 1)
    return y.numpy()
