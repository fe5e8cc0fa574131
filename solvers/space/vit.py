"""The Vision Transformer's initial condition: patches, class token, position embeddings.

Patch (i, j) of an image batch (B, C, H, W) is a token at a point of the token domain
[0, 1)^2; its embedding is torch's Conv2d with kernel = stride = p, the class token goes
in front and the position embeddings are added. The ViT encoder is then the pre-LN flow
with GELU (docs/vision.md section 1).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from solvers.backends import backend
from solvers.equation.controls import Controls
from solvers.equation.operators import TokenLayout, attention
from solvers.equation.problem import Problem
from solvers.equation.weights import LayerWeights
from solvers.errors import InvalidInputError
from solvers.space.grids import product_quadrature
from solvers.validation import finite_array, positive_int


def patch_embedding(
    images: np.ndarray, patch: int, weight: np.ndarray, bias: np.ndarray
) -> np.ndarray:
    """The patch tokens e_ij (B, P, d) of images (B, C, H, W); see the module docstring."""
    images = finite_array("images", images, (None, None, None, None))
    patch = positive_int("patch", patch)
    batch, channels, height, width = images.shape
    if height % patch or width % patch:
        raise InvalidInputError(
            f"the patch size {patch} must divide the image size {height} x {width}"
        )
    weight = finite_array("weight", weight, (None, channels, patch, patch))
    bias = finite_array("bias", bias, (weight.shape[0],))
    rows, cols = height // patch, width // patch
    patches = images.reshape(batch, channels, rows, patch, cols, patch)
    patches = patches.transpose(0, 2, 4, 1, 3, 5).reshape(batch, rows * cols, -1)
    return patches @ weight.reshape(weight.shape[0], -1).T + bias


def vit_initial_condition(
    images: np.ndarray,
    patch: int,
    weight: np.ndarray,
    bias: np.ndarray,
    class_token: np.ndarray,
    positions: np.ndarray,
) -> np.ndarray:
    """u0 = [c; e_1; ...; e_P] + E of shape (B, 1 + P, d); see the module docstring."""
    tokens = patch_embedding(images, patch, weight, bias)
    batch, count, d = tokens.shape
    class_token = finite_array("class_token", class_token, (d,))
    positions = finite_array("positions", positions, (count + 1, d))
    cls = np.broadcast_to(class_token, (batch, 1, d))
    return np.concatenate([cls, tokens], axis=1) + positions


def attention_2d_at(
    layer: LayerWeights,
    f: Callable[[np.ndarray], np.ndarray],
    n: int,
    rule: str,
    points: np.ndarray,
) -> np.ndarray:
    """The attention integral over the 2-D token domain, by `rule` on an n x n grid, at
    `points` (m, 2) (the Nystrom extension; on the grid nodes it is the discrete operator
    with token weights log w, solvers.equation.operators.attention):

        A(f)(x) = sum_h [sum_j w_j exp(s q_h(x).k_h(y_j)) v_h(y_j) / sum_j w_j exp(...)] Wo_h
                  + b_o,
        q_h(x) = f(x) Wq_h + bq_h,  k_h(y) = f(y) Wk_h + bk_h,  v_h(y) = f(y) Wv_h + bv_h,

    f: [0, 1)^2 -> R^d a state of the token variable (the continuous patch-token field).
    Computed by solvers.equation.operators.attention on [f(points); f(nodes)] with token maps that
    take the probe rows as queries and the node rows as keys and values, in float64.
    """
    nodes, weights = product_quadrature(rule, n, n)
    points = finite_array("points", points, (None, 2))
    m = len(points)
    maps = (lambda x: x[..., :m, :], lambda x: x[..., m:, :], lambda x: x[..., m:, :])
    bk = backend("float64")
    with bk.active():
        u = np.concatenate([f(points), f(nodes)])
        return attention(bk, u, layer.on(bk), TokenLayout(np.log(weights), maps))


def probed_problem(
    controls: Controls,
    f: Callable[[np.ndarray], np.ndarray],
    n: int,
    rule: str,
    points: np.ndarray,
    t_final: float,
    norm: str = "pre",
) -> Problem:
    """The flow on the n x n grid of `rule` per axis from u0 = f(nodes), with passive probe
    tokens at `points` (m, 2): the state is [f(nodes); f(points)], every row is a query
    and only the node rows are keys and values (token maps: the identity for queries, the
    node rows for keys and values; token weights w per node). The probes then follow the
    Nystrom extension of the grid flow, so that flows on different grids can be compared
    at the same points (convergence.grid_2d.vit_flow_grid_study)."""
    nodes, weights = product_quadrature(rule, n, n)
    points = finite_array("points", points, (None, 2))
    rows = len(nodes) + len(points)
    select = np.eye(len(nodes), rows)
    return Problem(
        np.concatenate([f(nodes), f(points)]),
        controls,
        t_final,
        norm,
        token_weights=weights,
        token_maps=(np.eye(rows), select, select),
    )


def patch_centres(rows: int, cols: int) -> np.ndarray:
    """The points ((i + 1/2) / rows, (j + 1/2) / cols) of the patch tokens in [0, 1)^2,
    row-major: the midpoint grid of the two-dimensional token domain."""
    rows, cols = positive_int("rows", rows), positive_int("cols", cols)
    i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    return np.stack([(i.ravel() + 0.5) / rows, (j.ravel() + 0.5) / cols], axis=-1)
