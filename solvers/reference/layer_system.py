"""A layer of a Transformer flow as the System the reference's controller steps
(solvers.reference.system): its field and projection (solvers.equation.flow), errors
measured on the real tokens (docs/model.md section 6), the softmax's reach as the cap of
a step (solvers.reference.softmax_reach, docs/schemes.md section 7) and the ReLU units as
its events (solvers.methods.kinks, docs/schemes.md section 8)."""

from __future__ import annotations

from functools import partial

from solvers.equation.flow import LayerFlow
from solvers.methods.kinks import ActivationPattern
from solvers.reference.softmax_reach import softmax_reach
from solvers.reference.system import System

REACH_SHARE = 0.5
"""Steps are at most this share of the softmax's reach (solvers.reference.softmax_reach):
the h^2 expansion of the extrapolation converges on a step about as (h / reach)^2 a
column, and its differences stop describing the error of the step as h nears the reach
(docs/schemes.md section 7)."""


def layer_system(flow: LayerFlow, n: int) -> System:
    """Layer n of `flow` on [n, n + 1] as a System: u' = Pi_T(u) (A + F (+ g)), projected
    after each step (post-LN), steps capped at REACH_SHARE of the softmax's reach, and the
    ReLU pattern watched when a control of the layer uses ReLU."""
    reach = partial(softmax_reach, flow, n)
    return System(
        bk=flow.bk,
        field=partial(flow.field, n),
        project=partial(flow.project, n),
        judged=flow.judged,
        caps=(lambda t, u, start: REACH_SHARE * reach(t, u, start),),
        events=partial(ActivationPattern.start, flow, n),
        layer=n,
        label=f"layer {n}",
    )
