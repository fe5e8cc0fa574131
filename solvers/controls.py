"""Controls theta(t): the weights as a function of time (depth)."""

from __future__ import annotations

from collections.abc import Sequence

from solvers.errors import InvalidInputError
from solvers.weights import LayerWeights


class PiecewiseControls:
    """Layer n's weights held constant on [n, n + 1): a stack of L layers on [0, L]."""

    def __init__(self, layers: Sequence[LayerWeights]) -> None:
        layers = tuple(layers)
        if not layers:
            raise InvalidInputError("PiecewiseControls needs at least one layer, got none")
        for n, layer in enumerate(layers):
            if not isinstance(layer, LayerWeights):
                raise InvalidInputError(
                    f"layer {n} must be a LayerWeights, got {type(layer).__name__}"
                )
            if layer.d_model != layers[0].d_model:
                raise InvalidInputError(
                    f"layer {n} has d={layer.d_model} but layer 0 has d={layers[0].d_model}"
                )
        self.layers = layers

    @property
    def d_model(self) -> int:
        return self.layers[0].d_model

    @property
    def horizon(self) -> int:
        """The end L of the time interval [0, L] on which the controls are defined."""
        return len(self.layers)

    def __len__(self) -> int:
        return len(self.layers)

    def __repr__(self) -> str:
        return f"PiecewiseControls({len(self.layers)} layers, d={self.d_model})"
