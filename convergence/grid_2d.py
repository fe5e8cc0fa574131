"""Grid refinement on the 2-D token domain: the ViT's attention integral and the CvT's
convolutional attention, and their whole flows, as the token grid refines.

`grid_2d_study(evaluate, sizes)` compares the discrete operator's Nystrom extension at
probe points on each grid with a fine reference grid; the flow studies carry the
solution to the same points on every grid with passive probe tokens and compare
successive grids. The expected rates, and when pre-LN or a kinked kernel spoil them, are
in docs/vision.md section 3 and docs/orders.md section 2.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from itertools import pairwise

import numpy as np

from convergence.grid import (
    FLOAT64_ROUNDOFF,
    QUADRATURE_ROUNDOFFS,
    GridStudy,
    max_abs_distance,
)
from convergence.refinement import refine, rounding_floor
from solvers import PiecewiseControls, Problem, solve
from solvers.equation.weights import LayerWeights
from solvers.errors import InvalidInputError
from solvers.results.provenance import timed
from solvers.space.cvt import ConvProjection, conv_attention_at
from solvers.space.cvt import probed_problem as cvt_probed_problem
from solvers.space.vit import attention_2d_at
from solvers.space.vit import probed_problem as vit_probed_problem

Evaluate = Callable[[int, np.ndarray], np.ndarray]


def in_constant_ratio(sizes: Sequence[int]) -> bool:
    """Whether n_i+1 / n_i is the same for every i: successive differences |u_n - u_rn| =
    C (1 - r^-p) h^p behave like h^p only for one ratio r."""
    return len({Fraction(b, a) for a, b in pairwise(sorted(sizes))}) <= 1


@timed
def grid_2d_study(
    evaluate: Evaluate,
    sizes: Sequence[int],
    *,
    rule: str,
    axis: str,
    reference: Evaluate | None = None,
    reference_size: int | None = 512,
    probes: int = 16,
    seed: int = 0,
    expected: float | None = None,
) -> GridStudy:
    """Errors max |evaluate(n, x) - reference(reference_size, x)| over probe points x;
    with reference_size None, the successive differences max |evaluate(n_i, x) -
    evaluate(n_i+1, x)| (reported at n_i; the finest size has no entry of its own), which
    behave like h^p only for sizes in a constant ratio (n_i+1 / n_i the same for all i)."""
    sizes = sorted(int(n) for n in sizes)
    needed = 3 if reference_size is not None else 4
    if len(sizes) < needed:
        raise InvalidInputError(f"a grid study needs at least {needed} sizes, got {sizes}")
    if reference_size is None and reference is not None:
        raise InvalidInputError("a reference evaluator needs a reference_size")
    if reference_size is None and not in_constant_ratio(sizes):
        raise InvalidInputError(
            f"successive differences need sizes in a constant ratio, got {sizes}"
        )
    if reference_size is not None and reference_size <= max(sizes):
        raise InvalidInputError(
            f"the reference grid ({reference_size}) must be finer than every size {sizes}"
        )
    points = np.random.default_rng(seed).random((probes, 2))

    def at(n: int) -> np.ndarray:
        return evaluate(n, points)

    if reference_size is None:
        refinement = refine(at, sizes, max_abs_distance, successive=True)
        described = "successive refinements"
    else:
        truth = (reference or evaluate)(reference_size, points)
        refinement = refine(at, sizes, max_abs_distance, truth=truth)
        described = f"{reference_size} x {reference_size} tokens"
    # the finest grid's quadrature sums about n terms of the truth's size per token
    finest = reference_size or max(sizes)
    size = float(np.abs(refinement.truths[-1]).max()) * finest
    refinement = refinement.floored(rounding_floor(FLOAT64_ROUNDOFF, size, QUADRATURE_ROUNDOFFS))
    return GridStudy.of(refinement, rule, axis, described, expected)


def flow_grid_2d_study(
    build: Callable[[int, np.ndarray], Problem],
    sizes: Sequence[int],
    *,
    method: str = "lie",
    steps_per_unit: int = 1,
    **options,
) -> GridStudy:
    """grid_2d_study of the flow's final state at the probes: build(n, points) is the
    problem on the n x n grid with probe tokens last (the probed_problem functions)."""

    def evaluate(n: int, points: np.ndarray) -> np.ndarray:
        return solve(build(n, points), method, steps_per_unit)[..., -len(points) :, :]

    options.setdefault("reference_size", None)
    return grid_2d_study(evaluate, sizes, **options)


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
        lambda n, x: attention_2d_at(layer, f, n, rule, x),
        sizes,
        rule=rule,
        axis="tokens (2-D)",
        reference=lambda n, x: attention_2d_at(layer, f, n, "gauss-legendre", x),
        **options,
    )


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
        lambda n, x: conv_attention_at(layer, projection, f, n, x),
        sizes,
        rule="midpoint (2-D tokens)",
        axis=f"tokens, stride {projection.stride}",
        **options,
    )


def vit_flow_grid_study(
    layers: Sequence[LayerWeights],
    f: Callable[[np.ndarray], np.ndarray],
    rule: str,
    sizes: Sequence[int],
    *,
    norm: str = "pre",
    **options,
) -> GridStudy:
    """The ViT flow (the layers from u0 = f on the grid of `rule` per axis, over their
    depth) refined in the token grid, compared at probe points."""
    controls = PiecewiseControls(layers)
    return flow_grid_2d_study(
        lambda n, x: vit_probed_problem(controls, f, n, rule, x, len(layers), norm),
        sizes,
        rule=rule,
        axis="tokens (2-D), flow",
        **options,
    )


def cvt_flow_grid_study(
    layers: Sequence[LayerWeights],
    projection: ConvProjection,
    f: Callable[[np.ndarray], np.ndarray],
    sizes: Sequence[int],
    *,
    norm: str = "pre",
    **options,
) -> GridStudy:
    """The CvT flow (the layers with the projection's convolutions, from u0 = f on the
    midpoint grid of T^2, over their depth) refined in the token grid, compared at probe
    points."""
    controls = PiecewiseControls(layers)
    return flow_grid_2d_study(
        lambda n, x: cvt_probed_problem(controls, projection, f, n, x, len(layers), norm),
        sizes,
        rule="midpoint (2-D tokens)",
        axis=f"tokens, stride {projection.stride}, flow",
        **options,
    )
