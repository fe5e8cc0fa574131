"""Convolutional attention (the CvT's) on the two-dimensional periodic token domain T^2.

The tokens are points x of T^2 = [0, 1)^2 and the state a function f: T^2 -> R^d. The
CvT's convolutional projection is a depth-wise convolution in the token variable, read
as a local integral operator, followed by the linear map:

    (C f)(x) = int_{T^2} kappa(x - y) f(y) dy          (every channel, kappa periodic)
    q(x) = (C_q f)(x) Wq,   k(y) = (C_k f)(y) Wk,   v(y) = (C_v f)(y) Wv
    A(f)(x) = [int exp(s q(x).k(y)) v(y) dy / int exp(s q(x).k(y)) dy] Wo

(one head; s the attention scale). On the n x n midpoint grid y_j = ((a + 1/2) h,
(b + 1/2) h), h = 1/n, every integral becomes h^2 sum_j: the convolutions are circular
convolutions of the grid values (computed by FFT) and the attention is the standard
softmax over the grid tokens, in which h^2 cancels. A strided key/value projection
evaluates k and v on the coarser grid of every `stride`-th point (weight (stride h)^2).
At any point x (on or off the grid) the discrete operator is its Nystrom extension: the
same sums with x in place of a grid point.

Domain: kappa and f continuous and 1-periodic in both variables. The midpoint rule
converges like the smoothness of the integrands allows: faster than any power for
smooth periodic kappa and f, order 2 when kappa has kinks (the tent kernel below).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from solvers.errors import InvalidInputError
from solvers.validation import finite_array, positive_int

Kernel = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""kappa(z1, z2) for displacement components z1, z2 in [-1/2, 1/2)."""


def periodic(z: np.ndarray) -> np.ndarray:
    """The representative of z modulo 1 in [-1/2, 1/2)."""
    return (np.asarray(z) + 0.5) % 1.0 - 0.5


def gaussian_kernel(width: float) -> Kernel:
    """kappa(z) = exp(-|z|^2 / (2 width^2)) / (2 pi width^2), periodised by taking z modulo
    1 (smooth up to a jump of size ~exp(-1 / (8 width^2)) at |z_i| = 1/2: below 1e-17 for
    width <= 0.07)."""

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
class ConvAttention:
    """One head of convolutional attention: kernels kappa_q, kappa_k, kappa_v and the maps
    Wq, Wk (d, d_k), Wv (d, d_v), Wo (d_v, d)."""

    kappa_q: Kernel
    kappa_k: Kernel
    kappa_v: Kernel
    wq: np.ndarray
    wk: np.ndarray
    wv: np.ndarray
    wo: np.ndarray
    scale: float = 1.0

    @classmethod
    def random(cls, d: int, d_k: int, kernel: Kernel, rng: np.random.Generator | int = 0):
        """Seeded N(0, 1/d) maps; the same kernel for queries, keys and values."""
        rng = np.random.default_rng(rng)

        def gaussian(shape):
            return rng.standard_normal(shape) / np.sqrt(shape[0])

        maps = gaussian((d, d_k)), gaussian((d, d_k)), gaussian((d, d_k)), gaussian((d_k, d))
        return cls(kernel, kernel, kernel, *maps, scale=1 / np.sqrt(d_k))


def grid_points(n: int) -> np.ndarray:
    """The n x n midpoint grid of T^2, row-major, shape (n * n, 2)."""
    n = positive_int("n", n)
    centres = (np.arange(n) + 0.5) / n
    a, b = np.meshgrid(centres, centres, indexing="ij")
    return np.stack([a.ravel(), b.ravel()], axis=-1)


def _convolve_at(kernel: Kernel, values: np.ndarray, n: int, points: np.ndarray) -> np.ndarray:
    """h^2 sum_j kappa(x - y_j) f(y_j) at `points` (m, 2), values (n * n, d) on the grid."""
    grid = grid_points(n)
    weights = kernel(points[:, None, 0] - grid[None, :, 0], points[:, None, 1] - grid[None, :, 1])
    return weights @ values / n**2


def _convolve_on_grid(kernel: Kernel, values: np.ndarray, n: int) -> np.ndarray:
    """The circular convolution h^2 sum_j kappa(y_i - y_j) f(y_j) on the grid, by FFT."""
    offsets = np.arange(n) / n
    stencil = kernel(offsets[:, None], offsets[None, :])  # kappa(y_a - y_0) per offset
    field = values.reshape(n, n, -1)
    spectrum = np.fft.fft2(stencil)[..., None] * np.fft.fft2(field, axes=(0, 1))
    return np.real(np.fft.ifft2(spectrum, axes=(0, 1))).reshape(n * n, -1) / n**2


def conv_attention_at(
    layer: ConvAttention,
    f: Callable[[np.ndarray], np.ndarray],
    n: int,
    points: np.ndarray,
    stride: int = 1,
) -> np.ndarray:
    """The discrete convolutional attention on the n x n grid (keys and values on every
    `stride`-th point), evaluated at `points` (m, 2) by its Nystrom extension; f maps
    points (m, 2) to values (m, d)."""
    n, stride = positive_int("n", n), positive_int("stride", stride)
    if n % stride:
        raise InvalidInputError(f"the stride {stride} must divide the grid size {n}")
    points = finite_array("points", points, (None, 2))
    values = f(grid_points(n))
    query = _convolve_at(layer.kappa_q, values, n, points) @ layer.wq

    def every_stride(convolved: np.ndarray) -> np.ndarray:  # the coarser grid's points
        return convolved.reshape(n, n, -1)[::stride, ::stride].reshape(-1, convolved.shape[-1])

    keys = every_stride(_convolve_on_grid(layer.kappa_k, values, n)) @ layer.wk
    vals = every_stride(_convolve_on_grid(layer.kappa_v, values, n)) @ layer.wv
    scores = layer.scale * query @ keys.T
    scores -= scores.max(axis=1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=1, keepdims=True)
    return weights @ vals @ layer.wo
