"""Convolutional attention (the CvT's) on the periodic token domain T^2 = [0, 1)^2.

The convolutional projections are depth-wise convolutions in the token variable, local
integral operators (C f)(x) = int kappa(x - y) f(y) dy applied before the attention's
maps; on the n x n midpoint grid they are circular-convolution matrices, the token maps
C_q, C_k, C_v of a Problem (strided keys and values: a coarser grid), and at any point
the discrete operator is its Nystrom extension (docs/vision.md sections 2 and 3).
Domain: kappa and f continuous and 1-periodic in both variables.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from solvers.backends import backend
from solvers.equation.controls import Controls
from solvers.equation.operators import TokenLayout, TokenMap, attention
from solvers.equation.problem import Problem
from solvers.equation.weights import LayerWeights
from solvers.errors import InvalidInputError
from solvers.validation import finite_array, positive_int

Kernel = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""kappa(z1, z2) for displacement components z1, z2 in [-1/2, 1/2)."""


def periodic(z: np.ndarray) -> np.ndarray:
    """The representative of z modulo 1 in [-1/2, 1/2): w - floor(w) - 1/2 with w = z + 1/2,
    bit for bit numpy's (w % 1) - 1/2 (both round the real w - floor(w) once), without the
    C library's fmod, which made this 2.6 of the CvT flow grid's 4 seconds."""
    shifted = np.asarray(z) + 0.5
    shifted -= np.floor(shifted)
    shifted -= 0.5
    return shifted


def gaussian_kernel(width: float) -> Kernel:
    """kappa(z) = exp(-|z|^2 / (2 width^2)) / (2 pi width^2), periodised by taking z modulo
    1 (smooth up to a jump of relative size ~exp(-1 / (8 width^2)) at |z_i| = 1/2: below
    float64's rounding for width <= 0.05, about 8e-12 at width 0.07; docs/vision.md
    section 2)."""

    def kappa(z1: np.ndarray, z2: np.ndarray) -> np.ndarray:
        r2 = periodic(z1) ** 2 + periodic(z2) ** 2
        return np.exp(-r2 / (2 * width**2)) / (2 * np.pi * width**2)

    return kappa


def tent_kernel(radius: float) -> Kernel:
    """kappa(z) = (1 - |z1| / r)_+ (1 - |z2| / r)_+ / r^2, r <= 1/2: Lipschitz, with kinks
    along z_i = 0 and |z_i| = r (a 3 x 3 depth-wise convolution's continuous analogue)."""
    if not 0 < radius <= 0.5:
        raise InvalidInputError(f"radius must lie in (0, 1/2], got {radius!r}")

    def kappa(z1: np.ndarray, z2: np.ndarray) -> np.ndarray:
        hat1 = np.maximum(0.0, 1 - np.abs(periodic(z1)) / radius)
        hat2 = np.maximum(0.0, 1 - np.abs(periodic(z2)) / radius)
        return hat1 * hat2 / radius**2

    return kappa


@dataclass(frozen=True)
class ConvProjection:
    """The convolutional projections: kernels kappa_q, kappa_k, kappa_v and the stride of
    the key/value grid."""

    kappa_q: Kernel
    kappa_k: Kernel
    kappa_v: Kernel
    stride: int = 1

    def __post_init__(self) -> None:
        positive_int("stride", self.stride)

    @classmethod
    def shared(cls, kernel: Kernel, stride: int = 1) -> ConvProjection:
        """The same kernel for queries, keys and values."""
        return cls(kernel, kernel, kernel, stride)

    def key_grid(self, n: int) -> int:
        """The key/value grid's size n / stride (the stride must divide n)."""
        n = positive_int("n", n)
        if n % self.stride:
            raise InvalidInputError(f"the stride {self.stride} must divide the grid size {n}")
        return n // self.stride

    def matrices(
        self, n: int, points: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(C_q, C_k, C_v) on the n x n grid, C_ij = h^2 kappa(y_i - y_j), with the rows of
        C_k and C_v restricted to the key grid: a Problem's token maps.

        With `points` (m, 2) the state is [grid values; values at the points] (n^2 + m
        rows): every row queries the grid (row x of C_q is h^2 kappa(x - y_j)) and only
        the grid rows are keys and values (zero columns for the points). The points are
        then passive tokens that follow the Nystrom extension of the flow on the grid,
        which lets flows on different grids be compared at the same points.
        """
        self.key_grid(n)
        grid = grid_points(n)
        rows = (
            grid
            if points is None
            else np.concatenate([grid, finite_array("points", points, (None, 2))])
        )
        keys = self.on_key_grid(grid, n)

        def padded(kernel: Kernel, at: np.ndarray) -> np.ndarray:
            matrix = np.zeros((len(at), len(rows)))
            matrix[:, : n * n] = _kernel_matrix(kernel, at, grid) / n**2
            return matrix

        return padded(self.kappa_q, rows), padded(self.kappa_k, keys), padded(self.kappa_v, keys)

    def on_key_grid(self, values: np.ndarray, n: int) -> np.ndarray:
        """The rows of grid values (..., n * n, w) at the key grid's points (every
        stride-th in both directions)."""
        s, batch, width = self.stride, values.shape[:-2], values.shape[-1]
        grid = values.reshape(*batch, n, n, width)[..., ::s, ::s, :]
        return grid.reshape(*batch, -1, width)


def probed_problem(
    controls: Controls,
    projection: ConvProjection,
    f: Callable[[np.ndarray], np.ndarray],
    n: int,
    points: np.ndarray,
    t_final: float,
    norm: str = "pre",
) -> Problem:
    """The CvT flow on the n x n grid from u0 = f(grid), with passive probe tokens at
    `points` (m, 2) that follow its Nystrom extension (`ConvProjection.matrices`): the
    state is [f(grid); f(points)] (convergence.grid_2d.cvt_flow_grid_study)."""
    points = finite_array("points", points, (None, 2))
    u0 = np.concatenate([f(grid_points(n)), f(points)])
    return Problem(u0, controls, t_final, norm, token_maps=projection.matrices(n, points))


def grid_points(n: int) -> np.ndarray:
    """The n x n midpoint grid of T^2, row-major, shape (n * n, 2)."""
    n = positive_int("n", n)
    centres = (np.arange(n) + 0.5) / n
    a, b = np.meshgrid(centres, centres, indexing="ij")
    return np.stack([a.ravel(), b.ravel()], axis=-1)


def _kernel_matrix(kernel: Kernel, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """kappa(x_i - y_j) for points x (m, 2) and y (N, 2)."""
    return kernel(rows[:, None, 0] - columns[None, :, 0], rows[:, None, 1] - columns[None, :, 1])


def _convolve_on_grid(kernel: Kernel, values: np.ndarray, n: int) -> np.ndarray:
    """The circular convolution h^2 sum_j kappa(y_i - y_j) f(y_j) on the grid, by FFT;
    values (..., n * n, w)."""
    offsets = np.arange(n) / n
    stencil = kernel(offsets[:, None], offsets[None, :])  # kappa(y_a - y_0) per offset
    field = values.reshape(*values.shape[:-2], n, n, values.shape[-1])
    spectrum = np.fft.fft2(stencil)[..., None] * np.fft.fft2(field, axes=(-3, -2))
    return np.real(np.fft.ifft2(spectrum, axes=(-3, -2))).reshape(values.shape) / n**2


def conv_attention_at(
    layer: LayerWeights,
    projection: ConvProjection,
    f: Callable[[np.ndarray], np.ndarray],
    n: int,
    points: np.ndarray,
) -> np.ndarray:
    """The discrete convolutional attention on the n x n grid (keys and values on the
    projection's key grid), evaluated at `points` (m, 2) by its Nystrom extension, in
    float64; f maps points (m, 2) to values (m, d). The convolutions on the grid go by
    FFT, so n can be large."""
    n = positive_int("n", n)
    projection.key_grid(n)
    points = finite_array("points", points, (None, 2))
    grid = grid_points(n)
    at_points = _kernel_matrix(projection.kappa_q, points, grid) / n**2

    def on_key_grid(kernel: Kernel) -> TokenMap:
        return lambda x: projection.on_key_grid(_convolve_on_grid(kernel, x, n), n)

    bk = backend("float64")
    maps = (
        partial(np.matmul, at_points),
        on_key_grid(projection.kappa_k),
        on_key_grid(projection.kappa_v),
    )
    with bk.active():
        return attention(bk, f(grid), layer.on(bk), TokenLayout(token_maps=maps))
