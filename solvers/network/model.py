"""Model: a trained network as the suite reads it: its embedding (token ids or images to
initial token states), its encoder layers (the controls), the norm placement, the causal
mask, and the readout that turns final token states into scores (docs/networks.md
section 1).

The encoder is what the Transformer-as-flow reading is about; the embedding is applied
before it and the readout (solvers.network.readout) after it, unchanged, to the states that the
discrete network or its time-step limit reach, so that their decisions can be compared.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solvers.equation.controls import PiecewiseControls
from solvers.equation.norms import Placement, as_placement
from solvers.equation.problem import Problem
from solvers.equation.weights import LayerWeights
from solvers.errors import InvalidInputError
from solvers.network.embedding import Embedding
from solvers.network.readout import Readout


@dataclass(frozen=True)
class Model:
    """A network read by `solvers.load_model`: `layers` (its encoder layers in order),
    `norm` (a Placement or its name; docs/model.md section 2), `causal`, `readout`
    (applied to the encoder's final states; None when the source has none),
    `embedding` (None when the source has none: give token states) and `window`, a
    sliding window of attention (None: none), which the suite does not implement:
    inputs longer than it are refused."""

    layers: tuple[LayerWeights, ...]
    norm: Placement | str
    causal: bool = False
    readout: Readout | None = None
    source: str = ""
    """Where it was read from (a path, or a description of the module)."""
    embedding: Embedding | None = None
    window: int | None = None

    def __post_init__(self) -> None:
        layers = tuple(self.layers)
        if not layers or not all(isinstance(w, LayerWeights) for w in layers):
            raise InvalidInputError("a model needs at least one LayerWeights")
        object.__setattr__(self, "norm", as_placement(self.norm))
        if self.embedding is not None and self.embedding.d_model != layers[0].d_model:
            raise InvalidInputError(
                f"the embedding's width {self.embedding.d_model} is not the layers' "
                f"{layers[0].d_model}"
            )
        object.__setattr__(self, "layers", layers)

    @property
    def d_model(self) -> int:
        return self.layers[0].d_model

    def embed(self, inputs: np.ndarray) -> np.ndarray:
        """The initial token states (B, N, d) of token ids (B, N), or of images (B, C, H, W)
        for a ViT, by the network's own embedding (solvers.network.embedding)."""
        if self.embedding is None:
            raise InvalidInputError(
                f"{self.source or 'this model'} has no embedding: give initial token states"
            )
        return self.embedding(inputs)

    def problem(
        self, u0: np.ndarray, mask: np.ndarray | None = None, t_final: float | None = None
    ) -> Problem:
        """The Problem of this network from initial token states u0 ((N, d) or (B, N, d))
        with an optional padding mask ((N,) or (B, N), 1 for a real token; docs/model.md
        section 6): one unit of time per layer, to t_final (default: every layer)."""
        tokens = np.shape(u0)[-2] if np.ndim(u0) >= 2 else 0
        if self.window is not None and tokens > self.window:
            raise InvalidInputError(
                f"{self.source}: sliding_window = {self.window} is shorter than the input's "
                f"{tokens} tokens; sliding-window attention is not supported"
            )
        return Problem(
            u0,
            PiecewiseControls(list(self.layers)),
            len(self.layers) if t_final is None else t_final,
            norm=self.norm,
            causal=self.causal,
            mask=mask,
        )
