"""Which layer drives a network's distance from its limit (docs/networks.md section 7).

With U_n the network's state after n layers (U_{n+1} = Lie_n(U_n), one step of size 1)
and Phi_n the flow of layer n over its unit of time, let V_n = Phi_{L-1} ... Phi_n (U_n):
the limit of the remaining layers started from the network's own state at n. Then V_0 is
the limit, V_L = U_L the network, and

    U_L - U_limit = sum_n (V_{n+1} - V_n),
    V_{n+1} - V_n = Phi_{>n}(Lie_n(U_n)) - Phi_{>n}(Phi_n(U_n)),

exactly (the sum telescopes; the error "fan" of Hairer, Norsett and Wanner I.8): term n
is layer n's one-layer defect Lie_n(U_n) - Phi_n(U_n), carried to the final time by the
later layers' flow. Its share of the final distance is max |V_{n+1} - V_n| /
max |U_L - U_limit| (maxima over the real tokens; the terms add up as arrays, so shares
in the max norm need not sum to 1). V_n for n >= 1 is the error-controlled reference
from U_n at SHARE_TOLERANCE (unassessed: its carried estimate is its error), and
Phi_n(U_n) is its first layer boundary.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from solvers import Problem, solve_reference
from solvers.equation.controls import PiecewiseControls
from solvers.reference.solution import ReferenceSolution

SHARE_TOLERANCE = 1e-4
"""The per-step tolerance of the references V_n, n >= 1. Shares are ratios read to two
digits; at 1e-4 the extrapolation's lowest columns pass (a third of the field
evaluations of the limit's 1e-8), and each V_n's carried estimate, a fraction of a
percent of max |U_limit| on the shipped networks, is returned beside the shares as their
error."""


@dataclass(frozen=True)
class LayerShare:
    """Layer n's part in the network's distance from its limit (module docstring)."""

    layer: int
    defect: float
    """max |U_{n+1} - Phi_n(U_n)| / max |U_limit|: the layer's one-step error from the
    network's own state."""
    contribution: float
    """max |V_{n+1} - V_n| / max |U_limit|: that defect carried to the final time."""
    share: float | None
    """max |V_{n+1} - V_n| / max |U_L - U_limit|: its part of the final distance (None when
    the network equals its limit, and there is no distance to share)."""
    error: float
    """The absolute error of V_{n+1} - V_n: the references' estimates at the final time."""


def layer_shares(
    limit_problem: Problem,
    network: np.ndarray,
    limit: ReferenceSolution,
    real: np.ndarray,
) -> list[LayerShare]:
    """Per layer of `limit_problem` (the limit's problem, PiecewiseControls, one unit per
    layer): its defect, carried contribution and share, from the network's states at every
    layer boundary `network` (L + 1, B, N, d), the limit's reference solution from U_0
    (every boundary, assessed), and the real tokens `real` (B, N); the references of the
    remaining layers at SHARE_TOLERANCE."""
    layers = limit_problem.controls.layers
    depth = len(layers)
    runs = [(limit.states, limit.error)]  # V_0: the limit itself
    for n in range(1, depth):
        rest = dataclasses.replace(
            limit_problem,
            u0=network[n],
            controls=PiecewiseControls(layers[n:]),
            t_final=depth - n,
        )
        solution = solve_reference(rest, SHARE_TOLERANCE)
        runs.append((solution.states, solution.error))
    ends = [states[-1] for states, _ in runs] + [network[-1]]  # V_L: the network itself
    errors = [float(error[-1]) for _, error in runs] + [0.0]  # the network: its rounding

    def peak(a: np.ndarray) -> float:
        return float(np.abs(a[real]).max())

    size, total = peak(limit.states[-1]), peak(network[-1] - limit.states[-1])
    shares = []
    for n, (states, _) in enumerate(runs):
        carried = peak(ends[n + 1] - ends[n])
        shares.append(
            LayerShare(
                n,
                peak(network[n + 1] - states[1]) / size,
                carried / size,
                carried / total if total > 0 else None,
                errors[n] + errors[n + 1],
            )
        )
    return shares
