"""Model: a trained network as the suite reads it, its encoder layers (the controls), the
norm placement, the causal mask, and the readout that turns final token states into
class scores (docs/networks.md section 1).

The encoder is what the Transformer-as-flow reading is about; the readout (a final layer
norm, a pooling of the tokens, dense layers) is applied after it, unchanged, to the
states that the discrete network or its time-step limit reach, so that their decisions
can be compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from solvers.backends import backend
from solvers.controls import PiecewiseControls
from solvers.errors import InvalidInputError
from solvers.operators import layer_norm
from solvers.problem import Problem
from solvers.validation import finite_array
from solvers.weights import LayerWeights

FLOAT64 = backend("float64")
POOLINGS = ("first", "last", "mean")
"""How the readout reduces the tokens to one vector: the first token (BERT's [CLS], ViT's
class token), the last (GPT-2's sequence classification without padding), or the mean."""
DENSE_ACTIVATIONS = ("none", "tanh")
"""After a dense layer of the readout: nothing, or tanh (BERT's pooler)."""


@dataclass(frozen=True)
class Dense:
    """y = act(x W + b), W of shape (in, out) acting on the right."""

    weight: np.ndarray
    bias: np.ndarray
    activation: str = "none"

    def __post_init__(self) -> None:
        weight = finite_array("readout weight", self.weight, (None, None))
        bias = finite_array("readout bias", self.bias, (weight.shape[1],))
        if self.activation not in DENSE_ACTIVATIONS:
            raise InvalidInputError(
                f"readout activation must be one of {DENSE_ACTIVATIONS}, got {self.activation!r}"
            )
        object.__setattr__(self, "weight", weight)
        object.__setattr__(self, "bias", bias)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        y = x @ self.weight + self.bias
        return np.tanh(y) if self.activation == "tanh" else y


@dataclass(frozen=True)
class Readout:
    """scores = dense_k(... dense_1(pool(LN(U)))): an optional final layer norm
    g (U - mean) / sqrt(var + eps) + b per token, a pooling (POOLINGS; None keeps every
    token), then dense layers. With no pooling and no dense layers it returns the
    (normalised) token states."""

    norm: tuple[np.ndarray, np.ndarray, float] | None = None
    pool: str | None = None
    dense: tuple[Dense, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.pool is not None and self.pool not in POOLINGS:
            raise InvalidInputError(f"pool must be one of {POOLINGS} or None, got {self.pool!r}")
        object.__setattr__(self, "dense", tuple(self.dense))

    @property
    def classifies(self) -> bool:
        """Whether it ends in class scores (a pooling and at least one dense layer)."""
        return self.pool is not None and bool(self.dense)

    def __call__(self, states: np.ndarray) -> np.ndarray:
        """The readout of final states of shape (..., N, d), in float64."""
        x = np.asarray(states, dtype=np.float64)
        if self.norm is not None:
            gain, bias, eps = self.norm
            x = layer_norm(FLOAT64, x, gain, bias, np.float64(eps))
        if self.pool == "first":
            x = x[..., 0, :]
        elif self.pool == "last":
            x = x[..., -1, :]
        elif self.pool == "mean":
            x = x.mean(-2)
        for layer in self.dense:
            x = layer(x)
        return x

    def decisions(self, states: np.ndarray) -> np.ndarray:
        """argmax of the class scores: one decision per member of the batch."""
        if not self.classifies:
            raise InvalidInputError("this readout has no classifier: no decisions to take")
        return np.argmax(self(states), axis=-1)


@dataclass(frozen=True)
class Model:
    """A network read by `solvers.load_model`: `layers` (its encoder layers in order),
    `norm` ("post", "pre" or "none"; docs/model.md section 2), `causal`, and `readout`
    (applied to the encoder's final states; None when the source has none)."""

    layers: tuple[LayerWeights, ...]
    norm: str
    causal: bool = False
    readout: Readout | None = None
    source: str = ""
    """Where it was read from (a path, or a description of the module)."""

    def __post_init__(self) -> None:
        layers = tuple(self.layers)
        if not layers or not all(isinstance(w, LayerWeights) for w in layers):
            raise InvalidInputError("a model needs at least one LayerWeights")
        if self.norm not in ("post", "pre", "none"):
            raise InvalidInputError(f"norm must be 'post', 'pre' or 'none', got {self.norm!r}")
        object.__setattr__(self, "layers", layers)

    @property
    def d_model(self) -> int:
        return self.layers[0].d_model

    def problem(self, u0: np.ndarray, t_final: float | None = None) -> Problem:
        """The Problem of this network from initial token states u0 ((N, d) or (B, N, d)):
        one unit of time per layer, to t_final (default: every layer)."""
        return Problem(
            u0,
            PiecewiseControls(list(self.layers)),
            len(self.layers) if t_final is None else t_final,
            norm=self.norm,
            causal=self.causal,
        )
