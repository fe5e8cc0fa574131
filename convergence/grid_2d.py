"""Grid refinement on the 2-D token domain: the ViT's attention integral and the CvT's
convolutional attention as the token grid refines.

`grid_2d_study(evaluate, sizes)` takes the discrete operator as a function
evaluate(n, points) of the grid size n (n x n tokens) returning its values at probe
points (m, 2) (the Nystrom extension), and compares each size with a fine reference grid.
The rate is the quadrature's: for the midpoint rule order 2 on non-periodic data or
kinked kernels, spectral for smooth periodic integrands (reported through `spectral`, as
in convergence.grid); the periodic trapezoid (a rectangle rule on [0, 1)) is order 1 on
non-periodic data; Gauss-Legendre per axis is spectral for smooth data.

`vit_grid_study` and `cvt_grid_study` bind it to solvers.vit.attention_2d_at and
solvers.cvt.conv_attention_at.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from convergence.grid import GridStudy, is_spectral
from convergence.order import estimate_order
from solvers.cvt import ConvProjection, conv_attention_at
from solvers.errors import InvalidInputError
from solvers.provenance import versions
from solvers.vit import attention_2d_at
from solvers.weights import LayerWeights

Evaluate = Callable[[int, np.ndarray], np.ndarray]


def grid_2d_study(
    evaluate: Evaluate,
    sizes: Sequence[int],
    *,
    rule: str,
    axis: str,
    reference: Evaluate | None = None,
    reference_size: int = 512,
    probes: int = 16,
    seed: int = 0,
    expected: float | None = None,
) -> GridStudy:
    """Errors max |evaluate(n, x) - reference(reference_size, x)| over probe points x."""
    sizes = [int(n) for n in sizes]
    if len(sizes) < 3:
        raise InvalidInputError(f"a grid study needs at least 3 sizes, got {sizes}")
    if reference_size <= max(sizes):
        raise InvalidInputError(
            f"the reference grid ({reference_size}) must be finer than every size {sizes}"
        )
    started = time.perf_counter()
    points = np.random.default_rng(seed).random((probes, 2))
    exact = (reference or evaluate)(reference_size, points)
    errors = [float(np.abs(evaluate(n, points) - exact).max()) for n in sizes]
    floor = 1e-15 * float(np.abs(exact).max()) * reference_size
    estimate = estimate_order([1 / n for n in sizes], errors, expected=expected, floor=floor)
    return GridStudy(
        rule=rule, axis=axis, sizes=sizes, errors=errors, estimate=estimate,
        spectral=is_spectral(sizes, errors),
        reference=f"{reference_size} x {reference_size} tokens",
        versions=versions(), wall_time=time.perf_counter() - started,
    )  # fmt: skip


def vit_grid_study(
    layer: LayerWeights,
    f: Callable[[np.ndarray], np.ndarray],
    rule: str,
    sizes: Sequence[int],
    **options,
) -> GridStudy:
    """The attention integral over [0, 1)^2 with `rule` per axis, against a fine
    Gauss-Legendre grid."""
    return grid_2d_study(
        lambda n, x: attention_2d_at(layer, f, n, rule, x), sizes, rule=rule, axis="tokens (2-D)",
        reference=lambda n, x: attention_2d_at(layer, f, n, "gauss-legendre", x), **options,
    )  # fmt: skip


def cvt_grid_study(
    layer: LayerWeights,
    projection: ConvProjection,
    f: Callable[[np.ndarray], np.ndarray],
    sizes: Sequence[int],
    **options,
) -> GridStudy:
    """The convolutional attention on n x n midpoint grids of T^2 (keys and values on
    the projection's key grid), against a fine grid of the same kind."""
    return grid_2d_study(
        lambda n, x: conv_attention_at(layer, projection, f, n, x), sizes,
        rule="midpoint (2-D tokens)", axis=f"tokens, stride {projection.stride}", **options,
    )  # fmt: skip
