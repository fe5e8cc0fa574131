"""A trained network against its own time-step limit: how far its outputs, its decisions
and its loss are from the flow that the paper reads it as a step of (docs/networks.md
sections 3, 5 and 7).

For a Model and a batch of inputs (token states, with an optional padding mask): the
limit (the flow of `lie_limit`, solved by the error-controlled reference, with its error
assessed against a second run, docs/schemes.md section 7) when there is one. Post-LN
layers with per-feature norms have none: then the refined network's sequence is
classified by `limit_check` (NO-LIMIT when the tokens collapse; UNDECIDED where its
levels cannot tell). Then, per method and steps per unit (refined into the asymptotic
range within a budget, levels.refine): the relative distance of the refined network's
final states from the limit, over the batch and per input, with its fitted order; and
where the readout decides, the decisions that differ from the network's own (dt = 1,
Lie) with their interval and classes and, with targets (labels, or an LM's own next
tokens), the accuracy and the cross-entropy loss. For the limit: its decisions split by
its margin (decisions.limit_decisions), and which layer drives the distance
(layers.layer_shares). Beside them: the network in other number systems
(rounding.rounded_networks), how smooth the weights are in depth, the distance of the
network from its twin with smoothly interpolated weights, and, when asked, an enclosure
of the limit that certifies its decisions and brackets the reference's true error
(certified.certified_limit). Every measurement is taken on the real tokens; what the
model cannot measure, or was not asked to, is None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from convergence.layer_norm_eps import lie_limit
from convergence.limit import LimitCheck, limit_check
from convergence.network_limit.batch import Share, Spread, per_input_distance, share, spread
from convergence.network_limit.certified import CertifiedLimit, certified_limit
from convergence.network_limit.decisions import Classes, LimitDecisions, classes, limit_decisions
from convergence.network_limit.layers import LayerShare, layer_shares
from convergence.network_limit.levels import Level, MethodLevels, method_levels, refine
from convergence.network_limit.rounding import RoundedNetwork, rounded_networks
from convergence.weights_in_depth import depth_change, weight_increments
from solvers import Problem, solve_reference
from solvers.backends import Backend
from solvers.enclosure.scope import check_scope
from solvers.equation.controls import SmoothControls
from solvers.errors import InvalidInputError, UndefinedOperationError
from solvers.network.model import Model
from solvers.network.readout import Judged
from solvers.results.provenance import Provenance, timed
from solvers.solving import METHODS, checked_method, solve, solve_layers
from solvers.validation import finite_array

LIMIT_TOLERANCE = 1e-8
"""The reference's per-step tolerance for the limit: the distances measured against it are
1e-6 and more (relative), and decisions turn on differences far larger than its global
error (reported beside them); the default of 1000 u would buy digits no decision turns on
at several times the cost."""


@dataclass(frozen=True)
class NetworkLimit(Provenance):
    """A network's distance from its time-step limit (module docstring)."""

    source: str
    steps_per_unit: list[int]
    """The levels asked for (a method's own list may go finer: MethodLevels.steps_per_unit)."""
    methods: list[MethodLevels]
    limit_error: float | None
    """The reference's max-abs error of the limit's final states, assessed against a second
    run (docs/schemes.md section 7)."""
    network_distance: float | None
    """The network's (Lie at dt = 1) relative distance from the limit."""
    network_spread: Spread | None
    """The same per input: median and range over the batch."""
    limit_size: float | None
    """max |U_limit|: what the relative distances are relative to."""
    limit_decisions: LimitDecisions | None
    """The limit's decisions against the network's own, split by the limit's margin."""
    limit_classes: Classes | None
    network_classes: Classes | None
    limit_accuracy: float | None
    network_accuracy: float | None
    """The network's own accuracy (dt = 1) against the targets."""
    limit_loss: float | None
    network_loss: float | None
    """The network's own loss (dt = 1) against the targets."""
    decisions: int | None
    """How many decisions judge one final state: one per input (a classifier), one per
    real token (an LM head); None when the readout decides nothing."""
    decided_at: str | None
    """What a decision is taken on: "inputs" (a classifier) or "real positions" (an LM head)."""
    scored: int | None
    """How many of them have a target (inputs with a label, or next-token positions whose
    next token is real): what the accuracy and the loss are over."""
    targets: str | None
    """What the decisions are judged against: "labels", "next tokens", or None."""
    no_limit: LimitCheck | None
    """For post-LN per-feature norms: the refined sequence's classification."""
    layers: list[LayerShare] | None
    """Per layer, its defect and its share of the network's distance (None without a limit)."""
    rounding: list[RoundedNetwork]
    """The network at dt = 1 in each precision asked for, against its float64 solve."""
    depth_change: list[float]
    """||theta_{n+1} - theta_n|| / ||theta_n|| for consecutive layers (all weights)."""
    weight_increment: float | None
    """max_n ||theta_{n+1} - theta_n|| / max_n ||theta_n|| (docs/depth.md section 4; None
    for one layer)."""
    weight_variation: float | None
    """sum_n ||theta_{n+1} - theta_n|| / max_n ||theta_n||, the variation over depth."""
    smooth_twin_distance: float
    """Relative distance of the network's final states from its smooth twin's (dt = 1)."""
    smooth_twin_decisions_changed: int | None
    batch: int
    tokens: int
    """Tokens per input (padding included)."""
    real_tokens: int
    """How many tokens of the batch are real (all of them without a mask)."""
    certified: CertifiedLimit | None
    """The enclosure of the limit and what it proves (None: not asked for)."""


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
    precisions: Sequence[Backend] = (),
    certify: int | None = None,
    certify_tolerance: float | None = None,
) -> NetworkLimit:
    """The network `model` on initial token states `inputs` (B, N, d; `model.embed` makes
    them from token ids or images) against its time-step limit, in float64. `targets` are
    labels (B,) for a classifier, or the token ids (B, N) for an LM head; `mask` (B, N)
    marks the real tokens. `max_steps_per_unit` lets a method whose levels do not reach the
    asymptotic range refine on (levels.refine), and the limit check of a network without
    a limit refine on its own until it can tell (convergence.limit). `precisions`: number
    systems to run the network in beside float64 (rounding.rounded_networks). `certify`:
    the arb digits of an enclosure of the limit (certified.certified_limit, with the local
    `certify_tolerance`; None: none), for smooth flows only (docs/enclosures.md section 5:
    OutOfScopeError before any work otherwise)."""
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
    if certify is not None:
        check_scope(problem)
    real = np.broadcast_to(problem.real_tokens(), inputs.shape[:2])
    boundaries = solve_layers(problem, "lie", 1)
    network = boundaries[-1]

    def judge(states: np.ndarray) -> Judged | None:
        return None if readout is None else readout.judge(states, problem.mask, targets)

    own = judge(network)

    def changed(judged: Judged | None) -> Share | None:
        if judged is None:
            return None
        return share(int(np.sum(judged.decisions != own.decisions)), len(own.decisions))

    limit, limit_problem, no_limit = None, None, None
    try:
        limit_problem = lie_limit(problem)
    except UndefinedOperationError:  # per-feature post-LN norms: no limit to measure against
        no_limit = limit_check(problem, steps, max_steps_per_unit=max_steps_per_unit)
    else:
        limit = solve_reference(limit_problem, LIMIT_TOLERANCE, assess=True)
    final = None if limit is None else limit.states[-1]
    limit_error = None if limit is None else float(limit.error[-1])
    size = None if limit is None else float(np.abs(final[real]).max())

    def measure(states: np.ndarray) -> Level:
        judged = judge(states)
        per_input = None if final is None else per_input_distance(states, final, real, size)
        return Level(
            None if per_input is None else float(per_input.max()),
            None if per_input is None else spread(per_input),
            changed(judged),
            None if judged is None else classes(judged.decisions),
            None if judged is None else judged.accuracy,
            None if judged is None else judged.loss,
        )

    levels = []
    for method in methods:

        def at(m: int, method: str = method) -> Level:
            return measure(network if (method, m) == ("lie", 1) else solve(problem, method, m))

        levels.append(
            method_levels(
                method,
                *refine(steps, at, max_steps_per_unit),
                expected=float(METHODS[method].order(problem.norm)),
                floor=None if limit is None else limit_error / size,
            )
        )
    own_level = measure(network)
    at_limit = None if final is None else judge(final)
    twin = solve(smooth_twin(model, inputs, problem.mask), "lie", 1)

    def rounding_judge(states: np.ndarray) -> tuple:
        judged = judge(states)
        if judged is None:
            return None, None, None
        return changed(judged), judged.accuracy, judged.loss

    def reach(error: float) -> int | None:
        if readout is None:
            return None
        return int(readout.margins(network, problem.mask, error).uncertain.sum())

    increments = weight_increments(model.layers)
    return NetworkLimit(
        source=model.source,
        steps_per_unit=steps,
        methods=levels,
        limit_error=limit_error,
        network_distance=own_level.distance,
        network_spread=own_level.spread,
        limit_size=size,
        limit_decisions=(
            None
            if at_limit is None
            else limit_decisions(readout, network, final, problem.mask, limit_error)
        ),
        limit_classes=None if at_limit is None else classes(at_limit.decisions),
        network_classes=own_level.classes,
        limit_accuracy=None if at_limit is None else at_limit.accuracy,
        network_accuracy=None if own is None else own.accuracy,
        limit_loss=None if at_limit is None else at_limit.loss,
        network_loss=None if own is None else own.loss,
        decisions=None if own is None else len(own.decisions),
        decided_at=None if own is None else ("real positions" if readout.next_token else "inputs"),
        scored=None if own is None else own.scored,
        targets=None if targets is None else ("next tokens" if readout.next_token else "labels"),
        no_limit=no_limit,
        layers=(None if limit is None else layer_shares(limit_problem, boundaries, limit, real)),
        rounding=rounded_networks(problem, precisions, network, real, rounding_judge, reach),
        depth_change=depth_change(model.layers),
        weight_increment=increments.largest,
        weight_variation=increments.variation,
        smooth_twin_distance=float(np.abs(network - twin)[real].max() / np.abs(twin[real]).max()),
        smooth_twin_decisions_changed=(
            None if own is None else int(np.sum(judge(twin).decisions != own.decisions))
        ),
        batch=len(inputs),
        tokens=inputs.shape[1],
        real_tokens=int(real.sum()),
        certified=(
            None
            if certify is None
            else certified_limit(
                limit_problem,
                readout,
                None if own is None else own.decisions,
                final,
                real,
                certify,
                certify_tolerance,
            )
        ),
    )
