"""Gronwall bounds on the Lipschitz constants of u0 -> u(T) and theta -> u(T).

`gronwall_bound` derives them from a Transformer stack's weights: per layer a field
constant L_n and a weight sensitivity K_n (properties.well_posedness.layer_bounds,
docs/well-posedness.md section 2), composed over the stack (section 3), on the balls of
initial data and weights that section 1 describes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from properties.well_posedness.layer_bounds import (
    RowSet,
    WeightNorms,
    attention_lipschitz,
    attention_row_size,
    control_sensitivity,
    exp_or_inf,
    expm1_over,
    ffn_row_size,
    grown_radius,
    norm_image,
    norm_lipschitz,
    product_or_zero,
)
from solvers import LayerWeights, PiecewiseControls, Problem
from solvers.errors import InvalidInputError
from solvers.methods.driver import layer_lengths
from solvers.validation import finite_array, positive_int


@dataclass(frozen=True)
class LayerBound:
    """The figures of one layer: L_n and its parts, the row set, K_n, and the factors.

    The layer is cut into `pieces` equal sub-intervals, each with the constant of its end
    (docs/well-posedness.md section 3). `field_lipschitz` is the largest L (at the layer
    end), `mean_lipschitz` the average over the pieces (log growth / l_n), and the parts
    are those at the layer end: `attention_lipschitz`, `ffn_lipschitz`, `tangent_term`
    (Gmax / R, post), `norm_lipschitz` (Lip_1, Lip_2, pre; 1 otherwise), `state_radius`
    (r of the attention input ball), `row_size` (Gmax), `min_centred_norm` (pre rmin; nan
    otherwise), `control_sensitivity` (K). `start_factor` multiplies perturbations at the
    layer start (Lip_P0 for layer 0 of a post-LN problem, R_n / R_{n-1} later; 1
    otherwise); `growth` = e^{int L}; `control_factor` the layer's contribution per unit
    |Delta theta_n| at its end.
    """

    layer: int
    length: float
    pieces: int
    field_lipschitz: float
    mean_lipschitz: float
    attention_lipschitz: float
    ffn_lipschitz: float
    tangent_term: float
    norm_lipschitz: tuple[float, float]
    state_radius: float
    row_size: float
    min_centred_norm: float
    control_sensitivity: float
    start_factor: float
    growth: float
    control_factor: float


@dataclass(frozen=True)
class GronwallBound:
    """Bounds on the Lipschitz constants of u0 -> u(T) (`initial_data`) and theta -> u(T)
    (`controls`), valid on the balls |v0 - u0| <= initial_radius and
    |theta' - theta| <= control_radius (docs/well-posedness.md section 1)."""

    norm: str
    t_final: float
    initial_radius: float
    control_radius: float
    initial_projection: float
    layers: list[LayerBound]
    initial_data: float
    controls: float


def checked_problem(problem: object) -> Problem:
    """`problem` if the bounds are derived for it: a PiecewiseControls stack, u0 of shape
    (N, d), no feature weights, forcing or token maps, and post-LN norms that project."""
    if not isinstance(problem, Problem):
        raise InvalidInputError(f"problem must be a Problem, got {type(problem).__name__}")
    if not isinstance(problem.controls, PiecewiseControls):
        raise InvalidInputError(
            "well-posedness bounds are derived for PiecewiseControls (a Transformer stack), "
            f"got {type(problem.controls).__name__}"
        )
    if problem.u0.ndim != 2:
        raise InvalidInputError(
            f"u0 must have shape (N, d) (no batch axis), got {problem.u0.shape}"
        )
    if any(
        x is not None for x in (problem.feature_weights, problem.manufactured, problem.token_maps)
    ):
        raise InvalidInputError(
            "well-posedness bounds are derived for the uniform feature grid without forcing "
            "or token maps: feature_weights, manufactured and token_maps must be None"
        )
    if problem.norm.constrained:
        for n, layer in enumerate(problem.controls.layers):
            gain, bias = layer.norm1
            same = all(np.array_equal(a, b) for a, b in zip(layer.norm1, layer.norm2, strict=True))
            if layer.eps != 0 or np.ndim(gain) or np.ndim(bias) or not gain > 0 or not same:
                raise InvalidInputError(
                    f"layer {n}: the post-LN bound needs the projection onto one S1 per layer "
                    "(eps = 0, equal scalar norms with gain > 0)"
                )
    return problem


def _centred_norms(u: np.ndarray) -> np.ndarray:
    return np.linalg.norm(u - u.mean(axis=-1, keepdims=True), axis=-1)


@dataclass(frozen=True)
class _Piece:
    """One sub-interval's constants: L, K and the parts reported in LayerBound."""

    field: float
    attention: float
    tangent: float
    norm_lipschitz: tuple[float, float]
    radius: float
    size: float
    centred: float
    sensitivity: float


@dataclass(frozen=True)
class _Shape:
    """What every piece needs besides the weights: N, d, score bias, pieces per layer."""

    tokens: int
    d: int
    biased: bool
    pieces: int


def _post_pieces(norms: WeightNorms, layer: LayerWeights, shape: _Shape) -> list[_Piece]:
    """On S1 the constants do not change with t: one piece repeated."""
    rows = norm_image(*layer.norm1, shape.d)
    attention_l = attention_lipschitz(norms, rows, shape.tokens, shape.biased)
    size = attention_row_size(norms, rows) + ffn_row_size(norms, rows)
    tangent = size / rows.radius
    piece = _Piece(
        attention_l + norms.ffn_lipschitz + tangent,
        attention_l,
        tangent,
        (1.0, 1.0),
        rows.radius,
        size,
        math.nan,
        control_sensitivity(norms, rows, rows, shape.tokens),
    )
    return [piece] * shape.pieces


def _pre_pieces(
    norms: WeightNorms, layer: LayerWeights, shape: _Shape, dt: float, spread: float
) -> tuple[list[_Piece], float]:
    """The pieces as the lower bound `spread` on the centred row norms shrinks; its end."""
    rows1, rows2 = norm_image(*layer.norm1, shape.d), norm_image(*layer.norm2, shape.d)
    attention_l = attention_lipschitz(norms, rows1, shape.tokens, shape.biased)
    size = attention_row_size(norms, rows1) + ffn_row_size(norms, rows2)
    sensitivity = control_sensitivity(norms, rows1, rows2, shape.tokens)
    sequence = []
    for _ in range(shape.pieces):
        spread = max(spread - dt * size, 0.0)
        lip = tuple(
            norm_lipschitz(rows.radius, spread, shape.d * layer.eps) for rows in (rows1, rows2)
        )
        field_l = product_or_zero(attention_l, lip[0]) + product_or_zero(
            norms.ffn_lipschitz, lip[1]
        )
        sequence.append(
            _Piece(field_l, attention_l, 0.0, lip, rows1.radius, size, spread, sensitivity)
        )
    return sequence, spread


def _none_pieces(
    norms: WeightNorms, shape: _Shape, dt: float, radius: float
) -> tuple[list[_Piece], float]:
    """The pieces as the bound `radius` on the row norms grows; its end."""
    rate, offset = norms.row_growth()
    sequence = []
    for _ in range(shape.pieces):
        radius = grown_radius(radius, rate, offset, dt)
        rows = RowSet(np.zeros(shape.d), radius, radius)
        attention_l = attention_lipschitz(norms, rows, shape.tokens, shape.biased)
        size = attention_row_size(norms, rows) + ffn_row_size(norms, rows)
        sequence.append(
            _Piece(
                attention_l + norms.ffn_lipschitz,
                attention_l,
                0.0,
                (1.0, 1.0),
                radius,
                size,
                math.nan,
                control_sensitivity(norms, rows, rows, shape.tokens),
            )
        )
    return sequence, radius


def _post_start_factors(problem: Problem, eps_u: float) -> list[float]:
    """Lip_P0 for layer 0, then R_n / R_{n-1}: what each layer's projection multiplies."""
    d = problem.u0.shape[1]
    spheres = [norm_image(*layer.norm1, d).radius for layer in problem.controls.layers]
    r = float(np.min(_centred_norms(problem.u0)))
    inner = r * (r - eps_u)
    factors = [spheres[0] / math.sqrt(inner) if inner > 0 else math.inf]
    return factors + [now / before for before, now in pairwise(spheres)]


def _layer_bound(
    n: int, length: float, norms: WeightNorms, sequence: list[_Piece], start: float
) -> LayerBound:
    """Compose the pieces: w <- e^{L dt} w + Phi K |Delta theta_n| over the layer."""
    dt = length / len(sequence)
    exponent, factor = 0.0, 0.0
    for piece in sequence:
        phi = dt if piece.field == 0 else expm1_over(piece.field, dt)
        factor = product_or_zero(exp_or_inf(piece.field * dt), factor) + product_or_zero(
            phi, piece.sensitivity
        )
        exponent += piece.field * dt
    last = sequence[-1]
    return LayerBound(
        layer=n,
        length=length,
        pieces=len(sequence),
        field_lipschitz=max(p.field for p in sequence),
        mean_lipschitz=exponent / length,
        attention_lipschitz=last.attention,
        ffn_lipschitz=norms.ffn_lipschitz,
        tangent_term=last.tangent,
        norm_lipschitz=last.norm_lipschitz,
        state_radius=last.radius,
        row_size=last.size,
        min_centred_norm=last.centred,
        control_sensitivity=last.sensitivity,
        start_factor=start,
        growth=exp_or_inf(exponent),
        control_factor=factor,
    )


def gronwall_bound(
    problem: Problem,
    *,
    initial_radius: float = 0.0,
    control_radius: float = 0.0,
    pieces: int = 32,
) -> GronwallBound:
    """The Gronwall bounds of docs/well-posedness.md section 3 for `problem` (u0 of shape
    (N, d), PiecewiseControls, no feature weights or forcing; post-LN norms must project).

    initial_radius >= 0 bounds |v0 - u0| and control_radius >= 0 bounds |theta' - theta|
    (Frobenius over every perturbed weight); 0 gives the infinitesimal constants. Each
    layer is cut into `pieces` sub-intervals whose constants are taken at their ends
    (only the none and pre bounds change with t inside a layer). Returns infinite bounds
    where the derivation gives none (pre-LN rows that may reach zero spread with eps = 0;
    a post-LN u0 with a row within initial_radius of constant; overflow).
    """
    problem = checked_problem(problem)
    eps_u = float(finite_array("initial_radius", initial_radius, ()))
    eps_theta = float(finite_array("control_radius", control_radius, ()))
    if eps_u < 0 or eps_theta < 0:
        raise InvalidInputError(
            f"initial_radius and control_radius must be >= 0, got {eps_u!r}, {eps_theta!r}"
        )
    pieces = positive_int("pieces", pieces)
    u0, layers = problem.u0, problem.controls.layers
    shape = _Shape(*u0.shape, problem.causal or problem.token_weights is not None, pieces)
    lengths = [float(length) for length in layer_lengths(problem.t_final)]
    if problem.norm.constrained:
        starts = _post_start_factors(problem, eps_u)
    else:
        starts = [1.0] * len(lengths)

    radius = float(np.max(np.linalg.norm(u0, axis=-1))) + eps_u  # none: m(t)
    spread = max(float(np.min(_centred_norms(u0))) - eps_u, 0.0)  # pre: rmin(t)
    figures = []
    for n, length in enumerate(lengths):
        layer, dt = layers[n], length / pieces
        norms = WeightNorms(layer, eps_theta)
        if problem.norm.constrained:
            sequence = _post_pieces(norms, layer, shape)
        elif problem.norm.normalises_inputs:
            sequence, spread = _pre_pieces(norms, layer, shape, dt, spread)
        else:
            sequence, radius = _none_pieces(norms, shape, dt, radius)
        figures.append(_layer_bound(n, length, norms, sequence, starts[n]))

    initial_bound = 1.0
    for figure in figures:
        initial_bound = product_or_zero(
            initial_bound, product_or_zero(figure.start_factor, figure.growth)
        )
    # controls: C_n = (prod_{k > n} start_k growth_k) control_factor_n; Cauchy-Schwarz over n
    contributions, later = [], 1.0
    for figure in reversed(figures):
        contributions.append(product_or_zero(later, figure.control_factor))
        later = product_or_zero(later, product_or_zero(figure.start_factor, figure.growth))
    return GronwallBound(
        norm=problem.norm,
        t_final=problem.t_final,
        initial_radius=eps_u,
        control_radius=eps_theta,
        initial_projection=starts[0] if problem.norm.constrained else 1.0,
        layers=figures,
        initial_data=initial_bound,
        controls=math.sqrt(sum(c * c for c in contributions)),
    )
