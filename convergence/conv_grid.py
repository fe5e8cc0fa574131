"""Grid refinement of the CvT's convolutional attention on the 2-D token domain T^2.

`conv_grid_study` evaluates the discrete convolutional attention (solvers.cvt) on n x n
midpoint grids of increasing n, keys and values on every `stride`-th point, at fixed
probe points (the Nystrom extension), against the same operator on a fine reference
grid. The midpoint rule's rate is set by the integrands' smoothness: spectral for a
smooth periodic kernel and data (reported through `spectral`, as for convergence.grid),
order 2 for a kernel with kinks (the tent kernel: Lipschitz, piecewise linear).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from convergence.grid import GridStudy, is_spectral
from convergence.order import estimate_order
from solvers.cvt import ConvAttention, conv_attention_at
from solvers.errors import InvalidInputError
from solvers.provenance import versions


def conv_grid_study(
    layer: ConvAttention,
    f: Callable[[np.ndarray], np.ndarray],
    sizes: Sequence[int],
    *,
    stride: int = 1,
    reference_size: int = 512,
    probes: int = 16,
    seed: int = 0,
    expected: float | None = None,
) -> GridStudy:
    """Errors max |A_n(f)(x) - A_ref(f)(x)| over probe points x for each grid size n."""
    sizes = [int(n) for n in sizes]
    if len(sizes) < 3:
        raise InvalidInputError(f"a grid study needs at least 3 sizes, got {sizes}")
    if reference_size <= max(sizes):
        raise InvalidInputError(
            f"the reference grid ({reference_size}) must be finer than every size {sizes}"
        )
    started = time.perf_counter()
    points = np.random.default_rng(seed).random((probes, 2))
    reference = conv_attention_at(layer, f, reference_size, points, stride)
    errors = [
        float(np.abs(conv_attention_at(layer, f, n, points, stride) - reference).max())
        for n in sizes
    ]
    floor = 1e-15 * float(np.abs(reference).max()) * reference_size
    estimate = estimate_order([1 / n for n in sizes], errors, expected=expected, floor=floor)
    return GridStudy(
        rule="midpoint (2-D tokens)", axis=f"tokens, stride {stride}", sizes=sizes,
        errors=errors, estimate=estimate, spectral=is_spectral(sizes, errors),
        reference=f"midpoint, {reference_size} x {reference_size} tokens",
        versions=versions(), wall_time=time.perf_counter() - started,
    )  # fmt: skip
