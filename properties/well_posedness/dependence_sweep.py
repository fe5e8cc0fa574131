"""The seeded sweep of continuous dependence over norm placements, sizes and weight scales.

`continuous_dependence_sweep` runs properties.well_posedness.continuous_dependence on
seeded problems (`DEFAULT_CONFIGURATIONS`) and summarises the ratios measured / bound
(docs/well-posedness.md section 4).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any

import numpy as np

from properties.claim_check import CheckVerdict
from properties.well_posedness.continuous_dependence import (
    ContinuousDependence,
    continuous_dependence,
)
from solvers import LayerWeights, PiecewiseControls, Problem
from solvers.equation.norms import Placement, as_placement
from solvers.errors import InvalidInputError
from solvers.results.provenance import Provenance, timed
from solvers.validation import positive_int, positive_number

PROBLEM_STREAM = 7919
"""Entropy prefix of the sweep problems' generator, so that they never share the random
stream of the perturbation directions (default_rng(seed)): a direction equal to u0 is
radial, and P removes it."""


@dataclass(frozen=True)
class Configuration:
    """A seeded problem for the sweep: LayerWeights.random layers, u0 ~ input_scale N(0, 1)."""

    d: int
    tokens: int
    heads: int
    d_ff: int
    layers: int
    norm: Placement | str
    weight_scale: float
    input_scale: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("d", "tokens", "heads", "d_ff", "layers"):
            positive_int(name, getattr(self, name))
        object.__setattr__(self, "norm", as_placement(self.norm))
        positive_number("weight_scale", self.weight_scale)
        positive_number("input_scale", self.input_scale)
        if self.d % self.heads:
            raise InvalidInputError(f"heads={self.heads} does not divide d={self.d}")

    def problem(self) -> Problem:
        """u0 and the layers drawn from default_rng(seed); t_final = layers."""
        rng = np.random.default_rng([PROBLEM_STREAM, self.seed])  # not the directions' stream
        u0 = self.input_scale * rng.standard_normal((self.tokens, self.d))
        layers = [
            LayerWeights.random(self.d, self.heads, self.d_ff, rng, weight_scale=self.weight_scale)
            for _ in range(self.layers)
        ]
        return Problem(u0, PiecewiseControls(layers), float(self.layers), norm=self.norm)


SWEEP_SCALES = {
    Placement.POST: (0.25, 0.5),
    Placement.PRE: (0.1, 0.25),
    Placement.NONE: (0.1, 0.25),
}
"""Weight scales of the default sweep per norm placement: larger ones make the bounds
astronomically loose or infinite (docs/well-posedness.md section 3)."""

DEFAULT_CONFIGURATIONS = tuple(
    Configuration(
        d=d,
        tokens=(3, 5, 7, 4)[k % 4],
        heads=(1, 2)[(k // 3) % 2],
        d_ff=2 * d,
        layers=layers,
        norm=norm,
        weight_scale=SWEEP_SCALES[norm][scale],
        input_scale=5.0 if norm.normalises_inputs else 1.0,
        seed=k,
    )
    for k, (norm, d, scale, layers) in enumerate(product(Placement, (4, 8), (0, 1), (1, 2)))
)
"""24 seeded configurations: every norm placement, d in {4, 8}, 3 to 7 tokens, 1 or 2
heads, 1 or 2 layers, two weight scales each (SWEEP_SCALES); pre-LN inputs of scale 5
keep the rows away from constant over the horizon, so that its bound is finite."""


def _summary(values: Sequence[float]) -> dict[str, float]:
    array = np.asarray(values, dtype=float)
    return {
        "min": float(np.min(array)),
        "median": float(np.median(array)),
        "max": float(np.max(array)),
    }


@dataclass(frozen=True)
class DependenceSweep(Provenance):
    """continuous_dependence over configurations: per configuration the ratios measured /
    bound for the initial data and the controls, their min / median / max, and the verdict
    (holds when every configuration's claims hold)."""

    configurations: list[Configuration]
    results: list[ContinuousDependence]
    initial_ratios: list[float]
    control_ratios: list[float]
    initial_summary: dict[str, float]
    control_summary: dict[str, float]
    verdict: CheckVerdict


@timed
def continuous_dependence_sweep(
    configurations: Sequence[Configuration] = DEFAULT_CONFIGURATIONS, **options: Any
) -> DependenceSweep:
    """continuous_dependence (with `options`) on every configuration's problem, seeded by
    the configuration's seed unless `options` give one."""
    configurations = list(configurations)
    if not configurations:
        raise InvalidInputError("configurations must hold at least one configuration, got none")
    for k, configuration in enumerate(configurations):
        if not isinstance(configuration, Configuration):
            raise InvalidInputError(
                f"configuration {k} must be a Configuration, got {type(configuration).__name__}"
            )
    results = [
        continuous_dependence(c.problem(), **{"seed": c.seed, **options}) for c in configurations
    ]
    initial = [r.initial.ratio for r in results]
    control = [r.controls.ratio for r in results]
    holds = all(r.verdict == CheckVerdict.HOLDS for r in results)
    return DependenceSweep(
        configurations=configurations,
        results=results,
        initial_ratios=initial,
        control_ratios=control,
        initial_summary=_summary(initial),
        control_summary=_summary(control),
        verdict=CheckVerdict.HOLDS if holds else CheckVerdict.FAILS,
    )
