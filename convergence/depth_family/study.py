"""A family of networks of growing depth with depth-scaled residuals, against their own
flows and against each other (docs/depth.md).

Members are Models whose residual branches were scaled by h = T / L (folded into their
attention output maps and biases and their FFNs' down maps and biases, docs/depth.md
section 1), each read as an ordinary network of L layers of one unit of time. Per member:
the own-flow distance (the network at dt = 1 against the reference of its own flow, with
the tolerance and assessment of a network-limit study, docs/networks.md section 3), the
family distance (against the next deeper member, section 3), the unscaled weights'
largest increment and variation over depth (section 4), and where the readout decides,
the accuracy and loss, the decisions its own flow changes and those the next member
changes. Then the three rates in 1 / L with their intervals and the family's verdict
(section 5). Every measurement is over the real tokens; what a member cannot measure is
None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from convergence.depth_family.rates import FittedRate, fit_rate
from convergence.depth_family.verdict import FamilyVerdict, family_verdict
from convergence.layer_norm_eps import lie_limit
from convergence.network_limit import ASYMPTOTIC, LIMIT_TOLERANCE
from convergence.network_limit.batch import Share, share
from convergence.weights_in_depth import unscaled, weight_increments
from solvers import solve, solve_reference
from solvers.errors import InvalidInputError, UndefinedOperationError
from solvers.network.model import Model
from solvers.network.readout import Judged
from solvers.results.provenance import Provenance, timed
from solvers.solving import METHODS
from solvers.validation import finite_array, positive_number


@dataclass(frozen=True)
class Member:
    """One member of a depth family (module docstring)."""

    source: str
    depth: int
    step: float
    """h = T / L, the residual scale folded into the member's weights."""
    own_flow_distance: float
    """max |U_L - V(T)| / max |V(T)| over the real tokens, V the member's own flow."""
    own_flow_error: float
    """The own flow's assessed error relative to max |V(T)| (the floor of the fit)."""
    family_distance: float | None
    """max |U_L - U_next| / max |U_next|, the next deeper member (None for the deepest)."""
    weight_increment: float | None
    """max_k |theta_{k+1} - theta_k| / max_k |theta_k|, unscaled weights (None: one layer)."""
    weight_variation: float | None
    """sum_k |theta_{k+1} - theta_k| / max_k |theta_k|, unscaled weights."""
    accuracy: float | None
    loss: float | None
    flow_accuracy: float | None
    flow_loss: float | None
    flow_decisions_changed: Share | None
    """Decisions of the own flow that differ from the network's (dt = 1)."""
    next_decisions_changed: Share | None
    """Decisions of the next deeper member that differ from this member's."""


@dataclass(frozen=True)
class DepthFamily(Provenance):
    """A depth family's members, its rates in 1 / L and its verdict (module docstring)."""

    horizon: float
    """T: the members' residual branches are scaled by h = T / L."""
    depth_ratio: int
    """The constant factor from one member's depth to the next."""
    members: list[Member]
    own_flow_rate: FittedRate
    """Over the members within ASYMPTOTIC of their flow; Lie's order 1 expected."""
    family_rate: FittedRate
    """Over the members with a deeper one, within ASYMPTOTIC of it."""
    increment_rate: FittedRate
    """Over the members of two or more layers."""
    verdict: FamilyVerdict
    reason: str
    batch: int
    tokens: int
    real_tokens: int
    decisions: int | None
    """How many decisions judge one member's final states (None: its readout takes none)."""
    targets: str | None
    """What the accuracy and the loss are against: "labels", "next tokens", or None."""


def check_family(models: Sequence[Model]) -> list[int]:
    """The members' order by depth, after the checks of a family (docs/depth.md section 3):
    at least two members, one width, distinct depths growing by one constant integer
    factor, every member with a time-step limit. InvalidInputError names the member."""
    if len(models) < 2:
        raise InvalidInputError(f"a depth family needs at least two members, got {len(models)}")
    widths = {m.d_model for m in models}
    if len(widths) > 1:
        first = models[0]
        other = next(m for m in models if m.d_model != first.d_model)
        raise InvalidInputError(
            f"members of different widths: d = {first.d_model} ({first.source}) and "
            f"d = {other.d_model} ({other.source})"
        )
    order = sorted(range(len(models)), key=lambda i: len(models[i].layers))
    depths = [len(models[i].layers) for i in order]
    for a, b in pairwise(order):
        if len(models[a].layers) == len(models[b].layers):
            raise InvalidInputError(
                f"members of equal depth L = {len(models[a].layers)}: {models[a].source} and "
                f"{models[b].source}"
            )
    ratios = {b / a for a, b in pairwise(depths)}
    ratio = ratios.pop()
    if ratios or ratio != int(ratio):
        sources = ", ".join(models[i].source for i in order)
        raise InvalidInputError(
            f"the depths {depths} ({sources}) do not grow by one constant integer factor "
            "(docs/depth.md section 3: e.g. 2, 4, 8, 16)"
        )
    for m in models:
        try:
            lie_limit(m.problem(np.zeros((1, m.d_model))))
        except UndefinedOperationError as exc:
            raise InvalidInputError(f"{m.source} has no time-step limit: {exc}") from None
    return order


@timed
def depth_family(
    models: Sequence[Model],
    inputs: Sequence[np.ndarray],
    targets: np.ndarray | None = None,
    *,
    mask: np.ndarray | None = None,
    horizon: float = 1.0,
) -> DepthFamily:
    """The family `models` (any order; check_family) on initial token states `inputs`, one
    (B, N, d) array per member (its own embedding of the same data, or the same states),
    with optional `targets` (labels (B,), or an LM head's token ids (B, N)) and padding
    `mask` (B, N); `horizon` is T, so that member L's folded step is h = T / L."""
    if len(inputs) != len(models):
        raise InvalidInputError(f"{len(models)} members need as many inputs, got {len(inputs)}")
    horizon = positive_number("horizon", horizon)
    order = check_family(models)
    models = [models[i] for i in order]
    starts = [finite_array("inputs", inputs[i], (None, None, models[0].d_model)) for i in order]
    if len({s.shape for s in starts}) > 1:
        raise InvalidInputError(f"the members' inputs differ in shape: {[s.shape for s in starts]}")
    measured = [_measure(m, s, targets, mask, horizon) for m, s in zip(models, starts, strict=True)]
    members = []
    for i, here in enumerate(measured):
        deeper = measured[i + 1] if i + 1 < len(measured) else None
        members.append(
            Member(
                **here.fields,
                family_distance=None if deeper is None else _distance(here, deeper),
                next_decisions_changed=None if deeper is None else _changed(here, deeper),
            )
        )
    depths = [m.depth for m in members]
    own = fit_rate(
        depths,
        [m.own_flow_distance for m in members],
        within=ASYMPTOTIC,
        floor=max(m.own_flow_error for m in members),
        floor_name="own flows' error",
        expected=float(METHODS["lie"].order(models[0].norm)),
    )
    family = fit_rate(depths, [m.family_distance for m in members], within=ASYMPTOTIC)
    increments = fit_rate(depths, [m.weight_increment for m in members])
    verdict, reason = family_verdict(family, increments)
    first = measured[0]
    return DepthFamily(
        horizon=horizon,
        depth_ratio=depths[1] // depths[0],
        members=members,
        own_flow_rate=own,
        family_rate=family,
        increment_rate=increments,
        verdict=verdict,
        reason=reason,
        batch=len(starts[0]),
        tokens=starts[0].shape[1],
        real_tokens=int(first.real.sum()),
        decisions=None if first.network is None else len(first.network.decisions),
        targets=first.targets,
    )


@dataclass
class _Measured:
    """One member's solves and judgements before its neighbour is known."""

    fields: dict
    states: np.ndarray
    real: np.ndarray
    network: Judged | None
    targets: str | None


def _measure(model: Model, states, targets, mask, horizon) -> _Measured:
    problem = model.problem(states, mask)
    real = np.broadcast_to(problem.real_tokens(), states.shape[:2])
    network = solve(problem, "lie", 1)
    flow = solve_reference(lie_limit(problem), LIMIT_TOLERANCE, assess=True)
    final = flow.states[-1]
    size = float(np.abs(final[real]).max())
    readout = model.readout if model.readout is not None and model.readout.classifies else None
    what = None
    if readout is not None and targets is not None:
        what = "next tokens" if readout.next_token else "labels"
        targets = readout.check_targets(targets, states.shape[:2], what)

    def judge(u: np.ndarray) -> Judged | None:
        return None if readout is None else readout.judge(u, problem.mask, targets)

    own, at_flow = judge(network), judge(final)
    depth = len(model.layers)
    increments = weight_increments(unscaled(model.layers, horizon / depth))
    fields = dict(
        source=model.source,
        depth=depth,
        step=horizon / depth,
        own_flow_distance=float(np.abs(network - final)[real].max() / size),
        own_flow_error=float(flow.error[-1]) / size,
        weight_increment=increments.largest,
        weight_variation=increments.variation,
        accuracy=None if own is None else own.accuracy,
        loss=None if own is None else own.loss,
        flow_accuracy=None if at_flow is None else at_flow.accuracy,
        flow_loss=None if at_flow is None else at_flow.loss,
        flow_decisions_changed=None if own is None else _share(own, at_flow),
    )
    return _Measured(fields, network, real, own, what)


def _distance(here: _Measured, deeper: _Measured) -> float:
    real = here.real & deeper.real
    return float(
        np.abs(here.states - deeper.states)[real].max() / np.abs(deeper.states[real]).max()
    )


def _changed(here: _Measured, deeper: _Measured) -> Share | None:
    if here.network is None or deeper.network is None:
        return None
    if len(here.network.decisions) != len(deeper.network.decisions):
        return None
    return _share(here.network, deeper.network)


def _share(a: Judged, b: Judged) -> Share:
    return share(int(np.sum(a.decisions != b.decisions)), len(a.decisions))
