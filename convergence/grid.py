"""Grid refinement of the attention operator: its quadrature discretisation as sizes grow.

`grid_study` evaluates the discretised attention operator A(f)(x, zeta) of a continuous
layer (solvers.space.grids.attention_at, the Nystrom extension) at fixed probe points on
grids of increasing size, every axis refined together or one axis alone (the others
held at the reference size), and compares with a fine Gauss-Legendre reference grid. The
order of the error in h = 1/n comes from `estimate_order`; for spectral convergence the
errors fall faster than any power, which shows as a large and growing local order and
is reported through `spectral`: somewhere the local order log(e_i / e_i+1) /
log(n_i+1 / n_i) reaches 10 (a thousandfold fall per doubling), beyond any algebraic rule
in use here.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from convergence.order import OrderEstimate
from convergence.refinement import Refinement, refine, rounding_floor
from solvers.errors import InvalidInputError
from solvers.results.provenance import Provenance, timed
from solvers.space.grids import RULES, Grid, attention_at
from solvers.space.kernels import ContinuousLayer

AXES = ("all", "tokens", "features", "head_features")
SPECTRAL_ORDER = 10.0
FLOAT64_ROUNDOFF = float(np.finfo(np.float64).eps / 2)
"""The quadratures are evaluated in float64 (solvers.space.grids)."""
QUADRATURE_ROUNDOFFS = 9
"""A quadrature's value is rounded to about this many unit roundoffs of its largest
entry (about 1e-15 in float64): the floor of a grid refinement."""


def max_abs_distance(value: np.ndarray, truth: np.ndarray) -> float:
    """max |value - truth| of two float64 arrays."""
    return float(np.abs(value - truth).max())


@dataclass(frozen=True)
class GridStudy(Provenance):
    """Errors at each size against the reference grid, the order estimate and spectral flag."""

    rule: str
    axis: str
    sizes: list[int]
    errors: list[float]
    estimate: OrderEstimate
    spectral: bool
    reference: str

    @classmethod
    def of(
        cls,
        refinement: Refinement,
        rule: str,
        axis: str,
        reference: str,
        expected: float | None = None,
    ) -> GridStudy:
        """The study of a refinement of grid sizes: its order (against `expected`) and
        whether it is spectral."""
        return cls(
            rule=rule,
            axis=axis,
            sizes=refinement.levels,
            errors=refinement.distances,
            estimate=refinement.estimate(expected),
            spectral=is_spectral(refinement.levels, refinement.distances),
            reference=reference,
        )


def is_spectral(sizes: Sequence[int], errors: Sequence[float]) -> bool:
    """Whether some local order log(e_i / e_i+1) / log(n_i+1 / n_i) reaches SPECTRAL_ORDER."""
    local = [
        np.log(e0 / e1) / np.log(n1 / n0)
        for (n0, e0), (n1, e1) in itertools.pairwise(zip(sizes, errors, strict=True))
        if e1 > 0
    ]
    return bool(local) and bool(max(local) >= SPECTRAL_ORDER)


@timed
def grid_study(
    layer: ContinuousLayer,
    f: Callable[[np.ndarray, np.ndarray], np.ndarray],
    rule: str,
    sizes: Sequence[int],
    *,
    axis: str = "all",
    reference_size: int = 128,
    probes: int = 20,
    seed: int = 0,
    expected: float | None = None,
) -> GridStudy:
    """Refine `axis` of the grid over `sizes` with `rule`; see the module docstring."""
    if rule not in RULES:
        raise InvalidInputError(f"unknown quadrature rule {rule!r}; allowed: {RULES}")
    if axis not in AXES:
        raise InvalidInputError(f"unknown axis {axis!r}; allowed: {AXES}")
    if len(sizes) < 3:
        raise InvalidInputError(f"a grid study needs at least 3 sizes, got {list(sizes)}")
    x, zeta = np.random.default_rng(seed).random((2, probes))
    reference = attention_at(
        layer,
        f,
        Grid(reference_size, reference_size, reference_size, 8, "gauss-legendre"),
        x,
        zeta,
    )

    def at(n: int) -> np.ndarray:
        if axis == "all":
            grid = Grid(n, n, n, 8, rule)
        else:
            shape = {name: reference_size for name in AXES[1:]} | {axis: n}
            grid = Grid(shape["tokens"], shape["features"], shape["head_features"], 8, rule)
        return attention_at(layer, f, grid, x, zeta)

    refinement = refine(at, sizes, max_abs_distance, truth=reference).floored(
        rounding_floor(FLOAT64_ROUNDOFF, float(np.abs(reference).max()), QUADRATURE_ROUNDOFFS)
    )
    reference = f"gauss-legendre, {reference_size} points per axis"
    return GridStudy.of(refinement, rule, axis, reference, expected)
