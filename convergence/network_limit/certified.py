"""The network's limit proved rather than estimated: an enclosure of the limit's flow, the
decisions it certifies against the network's own, and the true error of the float64
limit reference that every other figure of the record rests on (docs/networks.md
section 8, docs/enclosures.md sections 4 and 7).

The enclosure (solvers.enclosure.enclose) holds, per component, a ball that contains the
exact limit at t_final. A decision of the limit is certified where its leader's score
ball lies above every other's (solvers.enclosure.certified_decisions); against the
network's own decisions (dt = 1) it is certified the same, certified changed, or
uncertain (the balls too wide to tell: not a wrong decision). For the reference's final
states U_ref, each real component's |U_ref - ball| is a ball containing its true error,
so the largest lower and upper ends over the components bracket max |U_ref - U_limit|:
the limit's assessed error is proved to bound its true error when it is at least the
upper end, and proved to fall short when it is below the lower end. An enclosure that
cannot validate a step (IntegrationError: its sets grew too wide, docs/enclosures.md
section 6) proves nothing: the record keeps the reason, and no figure.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from solvers.backends import backend
from solvers.enclosure import certified_decisions, default_order, default_tolerance, enclose
from solvers.equation.problem import Problem
from solvers.errors import IntegrationError
from solvers.network.readout import Readout

_distance = np.frompyfunc(lambda ball, x: abs(ball - x), 2, 1)


@dataclass(frozen=True)
class CertifiedLimit:
    """An enclosure of the limit and what it proves (module docstring)."""

    digits: int
    """arb's working digits."""
    tolerance: float
    """The local truncation allowed per unit time, relative to max(1, |u|)."""
    order: int
    """The Taylor order K of the enclosure's steps."""
    seconds: float
    failure: str | None
    """Why the enclosure stopped short (None: it reached t_final; otherwise every figure
    below is None)."""
    width: float | None
    """The largest radius at t_final relative to max(1, max |u|)."""
    steps: int | None
    rejected: int | None
    decisions: int | None
    """Judged decisions (as NetworkLimit.decisions); None when the readout decides nothing."""
    certified_same: int | None
    """Certified decisions of the limit equal to the network's own."""
    certified_changed: int | None
    """Certified decisions of the limit that differ from the network's own."""
    uncertain: int | None
    """Decisions the enclosure's balls are too wide to certify."""
    reference_error: tuple[float, float] | None
    """[low, high] bracketing the float64 limit reference's true max-abs error at t_final
    over the real tokens."""


def certified_limit(
    limit: Problem,
    readout: Readout | None,
    own: np.ndarray | None,
    reference: np.ndarray,
    real: np.ndarray,
    digits: int,
    tolerance: float | None = None,
) -> CertifiedLimit:
    """The enclosure of `limit` (the continuous problem) in arb at `digits` with the local
    `tolerance` (enclose's default 10^-(digits - 5) when None), its certified decisions
    against the network's own decisions `own` (flat, as Readout.judge; None without a
    classifier), and the bracket of the error of `reference` (the float64 limit's final
    states) over the real tokens `real` (B, N)."""
    started = time.perf_counter()
    tolerance = default_tolerance(digits) if tolerance is None else tolerance
    try:
        enclosure = enclose(limit, backend("arb", digits), tol=tolerance)
    except IntegrationError as exc:
        return CertifiedLimit(
            digits=digits,
            tolerance=tolerance,
            order=default_order(tolerance),
            seconds=time.perf_counter() - started,
            failure=str(exc),
            width=None,
            steps=None,
            rejected=None,
            decisions=None,
            certified_same=None,
            certified_changed=None,
            uncertain=None,
            reference_error=None,
        )
    counts = None
    if readout is not None and own is not None:
        counts = certified_decisions(readout, enclosure, limit.mask).against(own)
    arb = backend("arb", digits)
    with arb.active():
        gaps = np.asarray(_distance(enclosure.states[-1], arb.asarray(reference)), dtype=object)
        gaps = gaps[np.broadcast_to(real, reference.shape[:-1])]
        # one float64 step outward: float() rounds to nearest
        low = math.nextafter(max(float(g.lower()) for g in np.ravel(gaps)), -math.inf)
        high = math.nextafter(max(float(g.upper()) for g in np.ravel(gaps)), math.inf)
    return CertifiedLimit(
        digits=digits,
        tolerance=enclosure.tolerance,
        order=enclosure.order,
        seconds=enclosure.seconds,
        failure=None,
        width=enclosure.width[-1],
        steps=enclosure.steps,
        rejected=enclosure.rejected,
        decisions=None if counts is None else len(own),
        certified_same=None if counts is None else counts["certified same"],
        certified_changed=None if counts is None else counts["certified changed"],
        uncertain=None if counts is None else counts["uncertain"],
        reference_error=(max(low, 0.0), high),
    )
