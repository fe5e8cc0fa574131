"""Controls theta(t): the weights as a function of time (depth).

- PiecewiseControls: layer n's weights held constant on [n, n + 1), a stack of L layers
  on [0, L] (the Transformer).
- SmoothControls: theta(t) = sum_m l_m(t) theta_m, the Lagrange interpolant through
  keyframe layers theta_m at times t_m; every weight, bias, norm gain and bias (so
  sigma1(t), sigma2(t)) and the attention scale move smoothly in t.

Both give the weights on [n, n + 1] in a backend at a backend time t (`layer_on`), the
time derivative of the norm parameters (`norm_rates`, zero for piecewise controls), and
the LayerWeights that act on an interval (`acting_on`), for structural checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from fractions import Fraction

import numpy as np

from solvers.backends import Array, Backend
from solvers.equation.packed import BackendLayer
from solvers.equation.weights import LayerWeights
from solvers.errors import InvalidInputError


def _check_layers(layers: Sequence[LayerWeights], what: str) -> tuple[LayerWeights, ...]:
    layers = tuple(layers)
    if not layers:
        raise InvalidInputError(f"{what} needs at least one layer, got none")
    for n, layer in enumerate(layers):
        if not isinstance(layer, LayerWeights):
            raise InvalidInputError(f"layer {n} must be a LayerWeights, got {type(layer).__name__}")
        if layer.d_model != layers[0].d_model:
            raise InvalidInputError(
                f"layer {n} has d={layer.d_model} but layer 0 has d={layers[0].d_model}"
            )
    return layers


class PiecewiseControls:
    """Layer n's weights held constant on [n, n + 1): a stack of L layers on [0, L]."""

    def __init__(self, layers: Sequence[LayerWeights]) -> None:
        self.layers = _check_layers(layers, "PiecewiseControls")

    @property
    def d_model(self) -> int:
        return self.layers[0].d_model

    @property
    def horizon(self) -> int:
        """The end L of the time interval [0, L] on which the controls are defined."""
        return len(self.layers)

    def acting_on(self, n: int) -> tuple[LayerWeights, ...]:
        """The LayerWeights that act on [n, n + 1]."""
        return (self.layers[n],)

    def all_layers(self) -> tuple[LayerWeights, ...]:
        """Every LayerWeights the controls are made of."""
        return self.layers

    def layer_on(self, bk: Backend, n: int, t: Array) -> BackendLayer:
        """Layer n's weights in bk (the same at every t in [n, n + 1])."""
        return self.layers[n].on(bk)

    def norm_rates(self, bk: Backend, n: int, t: Array) -> None:
        """d/dt of (norm gain, norm bias): None, the norms do not move within a layer."""
        return None

    def __len__(self) -> int:
        return len(self.layers)

    def __repr__(self) -> str:
        return f"PiecewiseControls({len(self.layers)} layers, d={self.d_model})"


class SmoothControls:
    """theta(t) = sum_m l_m(t) theta_m on [0, horizon]: Lagrange interpolation in time.

    The keyframes must share every size, the numbers of heads, the activation, eps and the
    decoder parts (gating, norm kind, rotary base and factor), none of which is
    interpolated. Norms that are the same in all keyframes stay constant; otherwise
    they move with t, and post-LN flows follow the moving constraint set.
    """

    def __init__(
        self, keyframes: Sequence[LayerWeights], times: Sequence[float], horizon: int
    ) -> None:
        self.keyframes = _check_layers(keyframes, "SmoothControls")
        first = self.keyframes[0]
        for m, frame in enumerate(self.keyframes):
            if _kind(frame) != _kind(first):
                raise InvalidInputError(
                    f"keyframe {m} differs from keyframe 0 in heads, key-value heads, d_k, d_v, "
                    "d_ff, eps, activation, gating, norm kind or rotary positions"
                )
        if len(times) != len(self.keyframes):
            raise InvalidInputError(
                f"{len(self.keyframes)} keyframes need as many times, got {len(times)}"
            )
        self.times = tuple(Fraction(float(t)) for t in times)
        if len(set(self.times)) != len(self.times):
            raise InvalidInputError(f"keyframe times must be distinct, got {list(times)}")
        if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
            raise InvalidInputError(f"horizon must be a positive integer, got {horizon!r}")
        self.horizon = horizon

    @property
    def d_model(self) -> int:
        return self.keyframes[0].d_model

    def acting_on(self, n: int) -> tuple[LayerWeights, ...]:
        """The LayerWeights that act on [n, n + 1]: every keyframe."""
        return self.keyframes

    def all_layers(self) -> tuple[LayerWeights, ...]:
        """Every LayerWeights the controls are made of."""
        return self.keyframes

    def _basis(self, bk: Backend, t: Array) -> list[Array]:
        """l_m(t) = prod_{j != m} (t - t_j) / (t_m - t_j)."""
        basis = []
        for m, tm in enumerate(self.times):
            value = bk.asarray(1)
            for j, tj in enumerate(self.times):
                if j != m:
                    value = value * (t - bk.asarray(tj)) / bk.asarray(tm - tj)
            basis.append(value)
        return basis

    def _basis_rates(self, bk: Backend, t: Array) -> list[Array]:
        """l_m'(t) = sum_{k != m} 1/(t_m - t_k) prod_{j != m, k} (t - t_j)/(t_m - t_j)."""
        rates = []
        for m, tm in enumerate(self.times):
            total = bk.asarray(0)
            for k, tk in enumerate(self.times):
                if k == m:
                    continue
                term = bk.asarray(1 / (tm - tk))
                for j, tj in enumerate(self.times):
                    if j not in (m, k):
                        term = term * (t - bk.asarray(tj)) / bk.asarray(tm - tj)
                total = total + term
            rates.append(total)
        return rates

    def layer_on(self, bk: Backend, n: int, t: Array) -> BackendLayer:
        """theta(t) = sum_m l_m(t) theta_m in bk."""
        packed = [frame.on(bk) for frame in self.keyframes]
        coefficients = self._basis(bk, t)
        combined = {}
        for field in fields(BackendLayer):
            values = [getattr(p, field.name) for p in packed]
            if field.name in BackendLayer.STATIC or values[0] is None:
                combined[field.name] = values[0]
            elif field.name in ("norm1", "norm2"):
                combined[field.name] = tuple(
                    _combine(coefficients, list(parts)) for parts in zip(*values, strict=True)
                )
            else:
                combined[field.name] = _combine(coefficients, values)
        return BackendLayer(**combined)

    def norm_rates(self, bk: Backend, n: int, t: Array) -> tuple[Array, Array] | None:
        """d/dt of norm2's (gain, bias), the motion of the flow's constraint set (the set
        of the norm that ends each layer); None if it is fixed."""
        gains = [frame.norm2[0] for frame in self.keyframes]
        biases = [frame.norm2[1] for frame in self.keyframes]
        if all(np.array_equal(g, gains[0]) for g in gains) and all(
            np.array_equal(b, biases[0]) for b in biases
        ):
            return None
        rates = self._basis_rates(bk, t)
        packed = [frame.on(bk).norm2 for frame in self.keyframes]
        return (
            _combine(rates, [p[0] for p in packed]),
            _combine(rates, [p[1] for p in packed]),
        )

    def __repr__(self) -> str:
        return f"SmoothControls({len(self.keyframes)} keyframes, horizon {self.horizon})"


def _kind(w: LayerWeights) -> tuple:
    """What keyframes must share: every size and every part that is not interpolated."""
    return (
        w.heads,
        w.kv_heads,
        w.d_k,
        w.d_v,
        w.d_ff,
        w.eps,
        w.activation,
        w.gated,
        w.norm_kind,
        w.rope_theta,
        w.rope_factor,
    )


def _combine(coefficients: list[Array], values: list[Array]) -> Array:
    total = values[0] * coefficients[0]
    for c, v in zip(coefficients[1:], values[1:], strict=True):
        total = total + v * c
    return total


Controls = PiecewiseControls | SmoothControls
