"""Rounding error against depth: each precision's error after 1, 2, ..., L layers.

The reference is the same problem solved at high precision (mpmath or arb at 50 digits
by default), whose own error is far below every float format's unit roundoff u. The
error after n layers is the relative max-abs error max|u_n - u_n^ref| / max|u_n^ref|.

Documented bound. A layer's rounding errors are a few u relative to the state, and the
normalised layers neither amplify nor damp a perturbation much on average, so the errors
of successive layers add like a random walk: error(n) <= C sqrt(n) u with C = 8, an
allowance of about twice the largest error / (sqrt(n) u) that the precision study and
tests/convergence/test_rounding.py measure on seeded random stacks, post- and pre-LN, in
float64, float32, float16 and bfloat16.
`within_bound` records whether it held. The fitted power law error(n) = c n^alpha u
(least squares on log n, log error: solvers.results.line_fit.fit_line) is reported next to
it; with fewer than 3 depths c and alpha are not fitted (nan).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from solvers import Problem, backend, solve_layers
from solvers.backends import Backend
from solvers.results.line_fit import fit_line
from solvers.results.provenance import Provenance, timed

BOUND_CONSTANT = 8.0


@dataclass(frozen=True)
class RoundingByDepth(Provenance):
    """Errors per precision (keyed by repr of the backend) at depths 1..L, with the bound."""

    depths: list[int]
    errors: dict[str, list[float]]
    unit_roundoff: dict[str, float]
    within_bound: dict[str, bool]
    fitted_constant: dict[str, float]
    fitted_exponent: dict[str, float]
    reference: str
    configuration: dict[str, object]


@timed
def rounding_error_by_depth(
    problem: Problem,
    precisions: Sequence[str | Backend],
    reference: str | Backend | None = None,
    configuration: dict[str, object] | None = None,
) -> RoundingByDepth:
    """Solve `problem` in each precision and measure the error after every layer.

    `configuration` (seed, sizes, ...) is recorded as given, for provenance.
    """
    reference = backend("mpmath", 50) if reference is None else backend(reference)
    exact = reference.to_float64(solve_layers(problem, backend=reference))[1:]
    scale = np.abs(exact).reshape(len(exact), -1).max(axis=1)
    depths = list(range(1, len(exact) + 1))
    errors, roundoff, within, constant, exponent = {}, {}, {}, {}, {}
    for precision in precisions:
        bk = backend(precision)
        got = bk.to_float64(solve_layers(problem, backend=bk))[1:]
        error = np.abs(got - exact).reshape(len(exact), -1).max(axis=1) / scale
        name = repr(bk)
        errors[name] = [float(e) for e in error]
        roundoff[name] = bk.unit_roundoff
        within[name] = bool(np.all(error <= BOUND_CONSTANT * np.sqrt(depths) * bk.unit_roundoff))
        line = fit_line(np.log(depths), np.log(error / bk.unit_roundoff))
        constant[name], exponent[name] = float(np.exp(line.intercept)), line.slope
    return RoundingByDepth(
        depths=depths,
        errors=errors,
        unit_roundoff=roundoff,
        within_bound=within,
        fitted_constant=constant,
        fitted_exponent=exponent,
        reference=repr(reference),
        configuration={"norm": problem.norm, **(configuration or {})},
    )
