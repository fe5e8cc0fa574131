"""A trained network against its own time-step limit: how far its outputs, its decisions
and its loss are from the flow that the paper reads it as a step of (docs/networks.md
sections 3 and 5).

For a Model and a batch of inputs (token states, with an optional padding mask): the
limit (the flow of `lie_limit`, solved by the error-controlled reference, with its error
assessed against a second run, docs/schemes.md section 7) when there is one. Post-LN
layers with per-feature norms have none: then the refined network's sequence is
classified by `limit_check` (NO-LIMIT when the tokens collapse; UNDECIDED where its
levels cannot tell). Then, per method and steps per unit:
the relative distance of the refined network's final states from the limit, with its
fitted order; and where the readout decides, the decisions that differ from the
network's own (dt = 1, Lie) and, with targets (labels, or an LM's own next tokens), the
accuracy and the cross-entropy loss. Beside them: how smooth the weights are in depth,
and the distance of the network from its twin with smoothly interpolated weights. Every
measurement is taken on the real tokens; what the model cannot measure is None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from convergence.layer_norm_eps import lie_limit
from convergence.limit import LimitCheck, limit_check
from convergence.order import OrderEstimate, estimate_order
from solvers import Problem, solve, solve_reference
from solvers.equation.controls import SmoothControls
from solvers.equation.weights import LayerWeights
from solvers.errors import InvalidInputError, UndefinedOperationError
from solvers.network.model import Model
from solvers.network.readout import Judged
from solvers.results.provenance import Provenance, timed
from solvers.solving import METHODS, checked_method
from solvers.validation import finite_array

LIMIT_TOLERANCE = 1e-8
"""The reference's per-step tolerance for the limit: the distances measured against it are
1e-6 and more (relative), and decisions turn on differences far larger than its global
error (reported beside them); the default of 1000 u would buy digits no decision turns on
at several times the cost."""


ASYMPTOTIC = 0.1
"""A level whose relative distance from the limit exceeds this is far outside the range
where the error behaves like C dt^p: it is left out of the order fit (docs/networks.md
section 3)."""


@dataclass(frozen=True)
class MethodLevels:
    """One method at each level of steps per unit."""

    method: str
    relative_distance: list[float] | None
    """max |U_m - U_limit| / max |U_limit| at the final time (None without a limit)."""
    decisions_changed: list[int] | None
    """How many of the judged decisions differ from the network's own (dt = 1)."""
    accuracy: list[float] | None
    """The share of decisions equal to their targets (None without targets)."""
    loss: list[float] | None
    """The readout's cross-entropy against the targets, in nats (None without targets)."""
    order: OrderEstimate | None
    """The fitted order of the relative distances against dt = 1/m over the levels within
    ASYMPTOTIC of the limit, the limit's own relative error as the floor (None without a
    limit, or with fewer than 3 such levels)."""


@dataclass(frozen=True)
class NetworkLimit(Provenance):
    """A network's distance from its time-step limit (module docstring)."""

    source: str
    steps_per_unit: list[int]
    methods: list[MethodLevels]
    limit_error: float | None
    """The reference's max-abs error of the limit's final states, assessed against a second
    run (docs/schemes.md section 7)."""
    network_distance: float | None
    """The network's (Lie at dt = 1) relative distance from the limit."""
    limit_size: float | None
    """max |U_limit|: what the relative distances are relative to."""
    limit_decisions_changed: int | None
    limit_accuracy: float | None
    network_accuracy: float | None
    """The network's own accuracy (dt = 1) against the targets."""
    limit_loss: float | None
    network_loss: float | None
    """The network's own loss (dt = 1) against the targets."""
    decisions: int | None
    """How many decisions judge one final state: one per input (a classifier), one per
    real token (an LM head); None when the readout decides nothing."""
    targets: str | None
    """What the decisions are judged against: "labels", "next tokens", or None."""
    no_limit: LimitCheck | None
    """For post-LN per-feature norms: the refined sequence's classification."""
    depth_change: list[float]
    """||theta_{n+1} - theta_n|| / ||theta_n|| for consecutive layers (all weights)."""
    smooth_twin_distance: float
    """Relative distance of the network's final states from its smooth twin's (dt = 1)."""
    smooth_twin_decisions_changed: int | None
    batch: int
    tokens: int
    """Tokens per input (padding included)."""
    real_tokens: int
    """How many tokens of the batch are real (all of them without a mask)."""


def depth_change(layers: Sequence[LayerWeights]) -> list[float]:
    """Relative Frobenius change of all of a layer's weights from one layer to the next."""

    def flat(w: LayerWeights) -> np.ndarray:
        parts = [getattr(w, name) for name in w.map_names]
        parts += [np.broadcast_to(v, (w.d_model,)) for v in (*w.norm1, *w.norm2)]
        return np.concatenate([np.ravel(p) for p in parts])

    vectors = [flat(w) for w in layers]
    return [float(np.linalg.norm(b - a) / np.linalg.norm(a)) for a, b in pairwise(vectors)]


def smooth_twin(model: Model, inputs: np.ndarray, mask: np.ndarray | None = None) -> Problem:
    """The network with its weights interpolated smoothly in depth: layer n's weights are
    the keyframe at t = n + 1/2 of a Lagrange interpolation (SmoothControls), so that the
    Lie step of layer n samples the interpolant at t = n (docs/networks.md section 3)."""
    layers = model.layers
    times = [n + 0.5 for n in range(len(layers))]
    controls = SmoothControls(list(layers), times, len(layers))
    return Problem(inputs, controls, len(layers), norm=model.norm, causal=model.causal, mask=mask)


@timed
def network_limit(
    model: Model,
    inputs: np.ndarray,
    targets: np.ndarray | None = None,
    *,
    mask: np.ndarray | None = None,
    methods: Sequence[str] = ("lie",),
    steps_per_unit: Sequence[int] = (1, 2, 4, 8, 16),
    max_steps_per_unit: int | None = None,
) -> NetworkLimit:
    """The network `model` on initial token states `inputs` (B, N, d; `model.embed` makes
    them from token ids or images) against its time-step limit, in float64. `targets` are
    labels (B,) for a classifier, or the token ids (B, N) for an LM head; `mask` (B, N)
    marks the real tokens. `max_steps_per_unit` lets the limit check of a network without
    a limit refine on its own until it can tell (convergence.limit)."""
    inputs = finite_array("inputs", inputs, (None, None, model.d_model))
    steps = sorted({int(m) for m in steps_per_unit})
    if steps[0] < 1:
        raise InvalidInputError(f"steps_per_unit must be >= 1, got {steps}")
    problem = model.problem(inputs, mask)
    readout = model.readout if model.readout is not None and model.readout.classifies else None
    if targets is not None:
        if readout is None:
            raise InvalidInputError("targets need a model whose readout takes decisions")
        name = "tokens" if readout.next_token else "labels"
        targets = readout.check_targets(targets, inputs.shape[:2], name)
    for method in methods:  # before any work: post-LN per-feature norms have only "lie"
        checked_method(problem, method)
    real = np.broadcast_to(problem.real_tokens(), inputs.shape[:2])
    network = solve(problem, "lie", 1)

    def judge(states: np.ndarray) -> Judged | None:
        return None if readout is None else readout.judge(states, problem.mask, targets)

    own = judge(network)

    def changed(judged: Judged | None) -> int | None:
        return None if judged is None else int(np.sum(judged.decisions != own.decisions))

    def relative(states: np.ndarray, limit: np.ndarray) -> float:
        return float(np.abs(states - limit)[real].max() / np.abs(limit[real]).max())

    limit, limit_error, no_limit = None, None, None
    try:
        limit_problem = lie_limit(problem)
    except UndefinedOperationError:  # per-feature post-LN norms: no limit to measure against
        no_limit = limit_check(problem, steps, max_steps_per_unit=max_steps_per_unit)
    else:
        solution = solve_reference(limit_problem, LIMIT_TOLERANCE, assess=True)
        limit, limit_error = solution.states[-1], float(solution.error[-1])
    size = None if limit is None else float(np.abs(limit[real]).max())
    levels = []
    for method in methods:
        distances, judged = [], []
        for m in steps:
            states = network if (method, m) == ("lie", 1) else solve(problem, method, m)
            if limit is not None:
                distances.append(relative(states, limit))
            judged.append(judge(states))
        levels.append(_method_levels(method, steps, distances, judged, changed, limit_error, size))
    at_limit = None if limit is None else judge(limit)
    twin = solve(smooth_twin(model, inputs, problem.mask), "lie", 1)
    return NetworkLimit(
        source=model.source,
        steps_per_unit=steps,
        methods=levels,
        limit_error=limit_error,
        network_distance=None if limit is None else relative(network, limit),
        limit_size=size,
        limit_decisions_changed=changed(at_limit),
        limit_accuracy=None if at_limit is None else at_limit.accuracy,
        network_accuracy=None if own is None else own.accuracy,
        limit_loss=None if at_limit is None else at_limit.loss,
        network_loss=None if own is None else own.loss,
        decisions=None if own is None else len(own.decisions),
        targets=None if targets is None else ("next tokens" if readout.next_token else "labels"),
        no_limit=no_limit,
        depth_change=depth_change(model.layers),
        smooth_twin_distance=relative(network, twin),
        smooth_twin_decisions_changed=changed(judge(twin)),
        batch=len(inputs),
        tokens=inputs.shape[1],
        real_tokens=int(real.sum()),
    )


def _method_levels(method, steps, distances, judged, changed, limit_error, size) -> MethodLevels:
    """One method's record: what was measured at each level, and the distances' order over
    the levels within ASYMPTOTIC of the limit."""
    near = [(m, e) for m, e in zip(steps, distances, strict=False) if e <= ASYMPTOTIC]
    order = None
    if len(near) >= 3:
        order = estimate_order(
            [1 / m for m, _ in near],
            [e for _, e in near],
            expected=float(METHODS[method].order),
            floor=limit_error / size,
            floor_name="limit's own error",
        )
    decided = judged[0] is not None
    targeted = decided and judged[0].correct is not None
    return MethodLevels(
        method,
        distances or None,
        [changed(j) for j in judged] if decided else None,
        [j.accuracy for j in judged] if targeted else None,
        [j.loss for j in judged] if targeted else None,
        order,
    )
