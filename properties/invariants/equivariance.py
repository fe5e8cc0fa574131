"""Permutation equivariance without positional information, as claim checks: f(U[pi]) =
f(U)[pi] for attention, the feed-forward, the layer norm, one Lie layer and a short solve,
each within twice the rounding bound of f (docs/rounding.md sections 2 to 4)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from properties.check_inputs import checked_layer, checked_state, one_layer_problem
from properties.claim_check import ClaimCheck, largest_magnitude, require_finite
from properties.conditioning.rounding_bounds import (
    attention_rounding_bound,
    feed_forward_rounding_bound,
    lie_layer_rounding_bound,
    norm_rounding,
    solve_rounding_bound,
)
from solvers import LayerWeights, backend, solve
from solvers.backends import Array, Backend
from solvers.equation.norms import as_placement, layer_norm
from solvers.equation.operators import TokenLayout, attention, feed_forward
from solvers.errors import InvalidInputError
from solvers.methods.transformer_layer import lie_step
from solvers.methods.unsplit import Unsplit
from solvers.solving import METHODS
from solvers.validation import choice, finite_array, positive_int

OPERATORS = ("attention", "feed_forward", "layer_norm", "lie_layer", "continuous_solve")


def _unsplit(method: str) -> Unsplit:
    stepping = METHODS[choice("method", method, tuple(METHODS))]
    if not isinstance(stepping, Unsplit):
        allowed = [name for name, m in METHODS.items() if isinstance(m, Unsplit)]
        raise InvalidInputError(
            f"method {method!r} is not an unsplit Runge-Kutta method; the solve's rounding "
            f"bound is derived for {', '.join(repr(a) for a in allowed)}"
        )
    return stepping


def check_permutation_equivariance(
    layer: LayerWeights,
    u: np.ndarray,
    permutation: Sequence[int],
    *,
    precision: str | Backend = "float64",
    operators: Sequence[str] = OPERATORS,
    norm: str = "post",
    dt: float = 1.0,
    method: str = "projected-rk4",
    steps_per_unit: int = 2,
    causal: bool = False,
    token_weights: np.ndarray | None = None,
) -> list[ClaimCheck]:
    """f(U[pi]) = f(U)[pi] (tokens permuted along axis -2) for each operator f named.

    f is attention A, feed-forward F, the layer norm norm1 (eps and gains of `layer`), one
    Lie layer with step dt and `norm` placement ("post", "pre", "none"), and the solve of
    Problem(U, [layer], 1, norm) by the unsplit `method` with `steps_per_unit` steps.
    Domain: every finite U of shape (N, d) or (B, N, d) (rows with var > 0 where a norm
    with eps = 0 applies). The claim needs no positional information: `causal` or
    non-uniform `token_weights` (attached to positions, not permuted) break it, which makes
    them negative controls. Defect max |f(U[pi]) - f(U)[pi]| / max |f(U)| (absolute when
    f(U) = 0); tolerance twice the rounding bound of f (both evaluations are within it),
    relative to the same scale.
    """
    layer = checked_layer(layer)
    bk = backend(precision)
    u = checked_state("u", u, layer.d_model)
    tokens = u.shape[-2]
    order = np.asarray(permutation)
    if order.shape != (tokens,) or sorted(order.tolist()) != list(range(tokens)):
        raise InvalidInputError(
            f"permutation must reorder range({tokens}) (the tokens), got {list(permutation)!r}"
        )
    norm = as_placement(norm)
    dt = float(finite_array("dt", dt, ()))
    if dt <= 0:
        raise InvalidInputError(f"dt must be > 0, got {dt!r}")
    for name in operators:
        choice("operator", name, OPERATORS)
    problem = one_layer_problem(u, layer, norm, causal, token_weights)
    bias = problem.score_bias(backend("float64"))
    unit = bk.unit_roundoff
    permuted = u[..., order, :]
    configuration = {
        "precision": repr(bk),
        "shape": list(u.shape),
        "heads": layer.heads,
        "d_ff": layer.d_ff,
        "eps": layer.eps,
        "permutation": order.tolist(),
        "causal": bool(causal),
        "token_weights": token_weights is not None,
    }
    checks: list[ClaimCheck] = []

    def compare(
        claim: str, once: Array, twice: Array, bound: float, note: str, **extra: Any
    ) -> None:
        what = claim.split(" is ")[0]
        require_finite(bk, once, what)
        require_finite(bk, twice, what)
        scale = largest_magnitude(bk, once) or 1.0  # an output of zeros: absolute defects
        with bk.active():
            defect = largest_magnitude(bk, twice - once[..., order, :]) / scale
        checks.append(
            ClaimCheck(claim, {**configuration, **extra}, defect, 2 * bound / scale, note)
        )

    with bk.active(), np.errstate(over="ignore", invalid="ignore"):  # reported as breakdown
        w = layer.on(bk)
        x, y = bk.asarray(u, "u"), bk.asarray(permuted, "u[pi]")
        b = problem.score_bias(bk)
        for name in operators:
            if name == "attention":
                compare(
                    "attention is permutation equivariant",
                    attention(bk, x, w, TokenLayout(b)),
                    attention(bk, y, w, TokenLayout(b)),
                    float(np.max(attention_rounding_bound(u, layer, bias, unit))),
                    "max |A(U[pi]) - A(U)[pi]| / max |A(U)|",
                )
            elif name == "feed_forward":
                compare(
                    "feed-forward is permutation equivariant",
                    feed_forward(bk, x, w),
                    feed_forward(bk, y, w),
                    float(np.max(feed_forward_rounding_bound(u, layer, unit))),
                    "max |F(U[pi]) - F(U)[pi]| / max |F(U)|",
                )
            elif name == "layer_norm":
                if layer.norm_kind.extension:
                    raise InvalidInputError(
                        "the layer-norm equivariance check is for layer norms; this layer has "
                        f"{layer.norm_kind.title}"
                    )
                rounding, _, _ = norm_rounding(u, *layer.norm1, layer.eps, unit)
                compare(
                    "layer norm is permutation equivariant",
                    layer_norm(bk, x, *w.norm1, w.eps),
                    layer_norm(bk, y, *w.norm1, w.eps),
                    float(np.max(rounding)),
                    "max |LN(U[pi]) - LN(U)[pi]| / max |LN(U)|",
                )
            elif name == "lie_layer":
                step = bk.asarray(dt)
                compare(
                    "a Lie layer is permutation equivariant",
                    lie_step(bk, x, layer, step, norm, b),
                    lie_step(bk, y, layer, step, norm, b),
                    lie_layer_rounding_bound(u, layer, norm, dt, bias, unit),
                    "max |L(U[pi]) - L(U)[pi]| / max |L(U)|, L one Lie step",
                    norm=norm,
                    dt=dt,
                )
    if "continuous_solve" in operators:
        stepping = _unsplit(method)
        steps = positive_int("steps_per_unit", steps_per_unit)
        moved = one_layer_problem(permuted, layer, norm, causal, token_weights)
        compare(
            "a continuous solve is permutation equivariant",
            bk.asarray(solve(problem, stepping, steps, bk)),
            bk.asarray(solve(moved, stepping, steps, bk)),
            solve_rounding_bound(problem, stepping, steps, layer, unit),
            f"max |S(U[pi]) - S(U)[pi]| / max |S(U)|, S = {method} with {steps} steps on [0, 1]",
            norm=norm,
            method=method,
            steps_per_unit=steps,
        )
    return checks
