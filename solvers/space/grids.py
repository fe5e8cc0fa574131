"""Quadrature rules and discretize(): continuous controls -> LayerWeights on a grid.

Rules on [0, 1): "trapezoid" (nodes i/n, the periodic trapezoid rule), "midpoint" (nodes
(i + 1/2)/n) and "gauss-legendre"; the kernels become weight matrices with the quadrature
weights folded in, the token weights w^x enter the scores as log w^x and the feature
weights w^y the norms' statistics (docs/model.md section 4). On the uniform grid this is
a standard Transformer layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from solvers.equation.weights import LayerWeights
from solvers.errors import InvalidInputError
from solvers.space.kernels import ContinuousLayer
from solvers.validation import choice, positive_int

RULES = ("trapezoid", "midpoint", "gauss-legendre")


def quadrature(rule: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes in [0, 1) and weights (summing to 1) of an n-point rule."""
    choice("quadrature rule", rule, RULES)
    n = positive_int("grid size", n)
    if n < 2:
        raise InvalidInputError(f"a grid needs at least 2 points, got {n}")
    if rule == "trapezoid":
        return np.arange(n) / n, np.full(n, 1.0 / n)
    if rule == "midpoint":
        return (np.arange(n) + 0.5) / n, np.full(n, 1.0 / n)
    nodes, weights = np.polynomial.legendre.leggauss(n)
    return (nodes + 1) / 2, weights / 2


def product_quadrature(rule: str, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """The rule on each axis of the 2-D token domain [0, 1)^2: nodes (rows * cols, 2),
    row-major, and the product weights w_a w_b (summing to 1)."""
    (x, wx), (y, wy) = quadrature(rule, rows), quadrature(rule, cols)
    a, b = np.meshgrid(x, y, indexing="ij")
    return np.stack([a.ravel(), b.ravel()], axis=-1), np.outer(wx, wy).ravel()


@dataclass(frozen=True)
class Grid:
    """Sizes and one rule per axis: tokens x, features y, head features eta, hidden z."""

    tokens: int
    features: int
    head_features: int
    hidden: int
    rule: str = "trapezoid"
    token_rule: str | None = None

    def axis(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        rule = (self.token_rule or self.rule) if name == "tokens" else self.rule
        return quadrature(rule, getattr(self, name))

    @property
    def token_weights(self) -> np.ndarray | None:
        """w^x for Problem.token_weights; None on a uniform token grid (log w^x cancels)."""
        _, weights = self.axis("tokens")
        return None if np.all(weights == weights[0]) else weights

    @property
    def feature_weights(self) -> np.ndarray | None:
        """w^y for Problem.feature_weights; None on a uniform feature grid."""
        _, weights = self.axis("features")
        return None if np.all(weights == weights[0]) else weights

    def sample(self, f: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
        """Initial data u0[i, k] = f(x_i, y_k) on the token and feature nodes."""
        (x, _), (y, _) = self.axis("tokens"), self.axis("features")
        return np.asarray(f(x[:, None], y[None, :]), dtype=np.float64)


def discretize(layer: ContinuousLayer, grid: Grid) -> LayerWeights:
    """The LayerWeights of `layer` on `grid` (formulas in the module docstring)."""
    (y, wy), (eta, weta) = grid.axis("features"), grid.axis("head_features")
    z, wz = grid.axis("hidden")
    column, row = y[:, None], eta[None, :]
    heads, d, d_k = layer.heads, grid.features, grid.head_features
    zero_heads = np.zeros((heads, d_k))
    return LayerWeights(
        wq=np.stack([wy[:, None] * k(column, row) * weta[None, :] for k in layer.kq]),
        wk=np.stack([wy[:, None] * k(column, row) for k in layer.kk]),
        wv=np.stack([wy[:, None] * k(column, row) for k in layer.kv]),
        wo=np.stack([weta[:, None] * k(eta[:, None], y[None, :]) for k in layer.ko]),
        bq=zero_heads,
        bk=zero_heads,
        bv=zero_heads,
        bo=np.zeros(d),
        w1=wy[:, None] * layer.k1(z[None, :], y[:, None]),
        b1=layer.beta1(z),
        w2=wz[:, None] * layer.k2(y[None, :], z[:, None]),
        b2=layer.beta2(y),
        norm1=(layer.sigma2, layer.sigma1),
        norm2=(layer.sigma2, layer.sigma1),
        scale=layer.scale,
    )


def attention_at(
    layer: ContinuousLayer,
    f: Callable[[np.ndarray, np.ndarray], np.ndarray],
    grid: Grid,
    x: np.ndarray,
    zeta: np.ndarray,
) -> np.ndarray:
    """The grid's discretisation of A(u)(x, zeta) for u = f(x, y), at any points (x, zeta).

    The Nystrom extension of the discrete operator: the integrals over y, eta and the key
    tokens x' use the grid's rules, while the query token x and the output feature zeta
    are free, so grids of every rule and size can be compared at the same points. At the
    grid's own nodes it equals the discrete attention of `discretize`'s weights (float64).
    """
    (xs, wx), (y, wy), (eta, weta) = (
        grid.axis("tokens"),
        grid.axis("features"),
        grid.axis("head_features"),
    )
    keys = f(xs[:, None], y[None, :]) * wy  # u(x'_j, y_k) w^y_k
    queries = f(np.asarray(x)[:, None], y[None, :]) * wy
    total = np.zeros((len(x), len(zeta)))
    for kq, kk, kv, ko in zip(layer.kq, layer.kk, layer.kv, layer.ko, strict=True):
        q = queries @ kq(y[:, None], eta[None, :])  # q(x, eta_l)
        k = keys @ kk(y[:, None], eta[None, :])
        v = keys @ kv(y[:, None], eta[None, :])
        scores = layer.scale * (q * weta) @ k.T + np.log(wx)
        scores -= scores.max(axis=1, keepdims=True)
        gamma = np.exp(scores)
        gamma /= gamma.sum(axis=1, keepdims=True)
        total += (gamma @ v * weta) @ ko(eta[:, None], np.asarray(zeta)[None, :])
    return total
