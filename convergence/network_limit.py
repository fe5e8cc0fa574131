"""A trained network against its own time-step limit: how far its outputs and its
decisions are from the flow that the paper reads it as a step of (docs/networks.md
section 3).

For a Model and a batch of inputs: the limit (the flow of `lie_limit`, solved by the
error-controlled reference, with its own error) when there is one. Post-LN layers with
per-feature norms have none: then the refined network's sequence is classified by
`limit_check` (NO-LIMIT when the tokens collapse). Then, per method and steps per unit:
the relative distance of the refined network's final states from the limit, the
decisions its readout takes that differ from the network's own (dt = 1, Lie), and the
accuracy against labels. Beside them: how smooth the weights are in depth, and the
distance of the network from its twin with smoothly interpolated weights.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from convergence.layer_norm_eps import lie_limit
from convergence.limit import LimitCheck, limit_check
from solvers import Problem, solve, solve_reference
from solvers.controls import SmoothControls
from solvers.errors import InvalidInputError, UndefinedOperationError
from solvers.methods import checked_method
from solvers.model import Model
from solvers.provenance import Provenance
from solvers.validation import finite_array
from solvers.weights import MAPS, LayerWeights

LIMIT_TOLERANCE = 1e-8
"""The reference's per-step tolerance for the limit: the distances measured against it are
1e-6 and more (relative), and decisions turn on differences far larger than its global
error (reported beside them; on the shipped ViT about 5e-6 where the default 1000 u gives
7e-11 in three times the time)."""


@dataclass(frozen=True)
class MethodLevels:
    """One method at each level of steps per unit."""

    method: str
    relative_distance: list[float] | None
    """max |U_m - U_limit| / max |U_limit| at the final time (None without a limit)."""
    decisions_changed: list[int] | None
    """How many of the batch's decisions differ from the network's own (dt = 1)."""
    accuracy: list[float] | None
    """The share of decisions equal to the labels (None without labels)."""


@dataclass(frozen=True)
class NetworkLimit(Provenance):
    """A network's distance from its time-step limit (module docstring)."""

    source: str
    steps_per_unit: list[int]
    methods: list[MethodLevels]
    limit_error: float | None
    """The reference's own estimated max-abs error of the limit's final states."""
    network_distance: float | None
    """The network's (Lie at dt = 1) relative distance from the limit."""
    limit_size: float | None
    """max |U_limit|: what the relative distances are relative to."""
    limit_decisions_changed: int | None
    limit_accuracy: float | None
    network_accuracy: float | None
    """The network's own accuracy (dt = 1) against the labels."""
    no_limit: LimitCheck | None
    """For post-LN per-feature norms: the refined sequence's classification."""
    depth_change: list[float]
    """||theta_{n+1} - theta_n|| / ||theta_n|| for consecutive layers (all weights)."""
    smooth_twin_distance: float
    """Relative distance of the network's final states from its smooth twin's (dt = 1)."""
    smooth_twin_decisions_changed: int | None
    batch: int


def depth_change(layers: Sequence[LayerWeights]) -> list[float]:
    """Relative Frobenius change of all of a layer's weights from one layer to the next."""

    def flat(w: LayerWeights) -> np.ndarray:
        parts = [getattr(w, name) for name in MAPS]
        parts += [np.broadcast_to(v, (w.d_model,)) for v in (*w.norm1, *w.norm2)]
        return np.concatenate([np.ravel(p) for p in parts])

    vectors = [flat(w) for w in layers]
    return [float(np.linalg.norm(b - a) / np.linalg.norm(a)) for a, b in pairwise(vectors)]


def smooth_twin(model: Model, inputs: np.ndarray) -> Problem:
    """The network with its weights interpolated smoothly in depth: layer n's weights are
    the keyframe at t = n + 1/2 of a Lagrange interpolation (SmoothControls), so that the
    Lie step of layer n samples the interpolant at t = n (docs/networks.md section 3)."""
    layers = model.layers
    times = [n + 0.5 for n in range(len(layers))]
    controls = SmoothControls(list(layers), times, len(layers))
    return Problem(inputs, controls, len(layers), norm=model.norm, causal=model.causal)


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def network_limit(
    model: Model,
    inputs: np.ndarray,
    labels: np.ndarray | None = None,
    *,
    methods: Sequence[str] = ("lie",),
    steps_per_unit: Sequence[int] = (1, 2, 4, 8, 16),
) -> NetworkLimit:
    """The network `model` on `inputs` (B, N, d) against its time-step limit, in float64."""
    started = time.perf_counter()
    inputs = finite_array("inputs", inputs, (None, None, model.d_model))
    steps = sorted({int(m) for m in steps_per_unit})
    if steps[0] < 1:
        raise InvalidInputError(f"steps_per_unit must be >= 1, got {steps}")
    readout = model.readout if model.readout is not None and model.readout.classifies else None
    if labels is not None:
        if readout is None:
            raise InvalidInputError("labels need a model whose readout classifies")
        labels = np.asarray(labels)
        if labels.shape != (len(inputs),) or not np.issubdtype(labels.dtype, np.integer):
            raise InvalidInputError(
                f"labels must be {len(inputs)} class indices, got {labels.dtype} {labels.shape}"
            )
    problem = model.problem(inputs)
    for method in methods:  # before any work: post-LN per-feature norms have only "lie"
        checked_method(problem, method)
    network = solve(problem, "lie", 1)
    own = None if readout is None else readout.decisions(network)

    def judged(states: np.ndarray) -> tuple[int | None, float | None]:
        if readout is None:
            return None, None
        decisions = readout.decisions(states)
        accuracy = None if labels is None else float(np.mean(decisions == labels))
        return int(np.sum(decisions != own)), accuracy

    limit, limit_error, no_limit = None, None, None
    try:
        limit_problem = lie_limit(problem)
    except UndefinedOperationError:  # per-feature post-LN norms: no limit to measure against
        no_limit = limit_check(problem, steps)
    else:
        solution = solve_reference(limit_problem, LIMIT_TOLERANCE)
        limit, limit_error = solution.states[-1], float(solution.error[-1])
    levels = []
    for method in methods:
        distances, changed, accuracy = [], [], []
        for m in steps:
            states = network if (method, m) == ("lie", 1) else solve(problem, method, m)
            if limit is not None:
                distances.append(_relative(states, limit))
            count, share = judged(states)
            changed.append(count)
            accuracy.append(share)
        levels.append(
            MethodLevels(
                method,
                distances if limit is not None else None,
                changed if readout is not None else None,
                accuracy if labels is not None else None,
            )
        )
    limit_changed, limit_accuracy = judged(limit) if limit is not None else (None, None)
    twin = solve(smooth_twin(model, inputs), "lie", 1)
    return NetworkLimit(
        source=model.source,
        steps_per_unit=steps,
        methods=levels,
        limit_error=limit_error,
        network_distance=None if limit is None else _relative(network, limit),
        limit_size=None if limit is None else float(np.abs(limit).max()),
        limit_decisions_changed=limit_changed,
        limit_accuracy=limit_accuracy,
        network_accuracy=judged(network)[1],
        no_limit=no_limit,
        depth_change=depth_change(model.layers),
        smooth_twin_distance=_relative(network, twin),
        smooth_twin_decisions_changed=judged(twin)[0],
        batch=len(inputs),
        wall_time=time.perf_counter() - started,
    )
