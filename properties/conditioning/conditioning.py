"""Measured conditioning: the Lipschitz constant of the LN projection P near constant rows
(expected sigma2 / std) and of attention as the inverse temperature beta grows (linear
growth where a row's top scores tie, the hard-attention limit where they do not), with
the rounding of each measurement derived (docs/rounding.md section 5).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from properties.check_inputs import checked_layer
from properties.claim_check import CheckVerdict, largest_magnitude
from properties.conditioning.rounding_bounds import (
    attention_rounding_bound,
    head_magnitudes,
    score_rounding,
)
from solvers import LayerWeights, backend
from solvers.backends import Backend
from solvers.equation.jacobian import jacobian
from solvers.equation.operators import attention, attention_heads, combine_heads, project_to_s1
from solvers.errors import InvalidInputError
from solvers.results.allowances import projection_allowance
from solvers.results.line_fit import Fit, fit_line
from solvers.results.provenance import Provenance, timed
from solvers.validation import finite_array, positive_int, positive_number, positive_sweep

DEFAULT_STDS = tuple(10.0 ** (-k / 2) for k in range(13))  # 1 down to 1e-6: six decades
DEFAULT_BETAS = tuple(2.0 ** (k / 3) for k in range(31))  # 1 .. 1024, three per octave
DECAY_WINDOW = 3.0
"""The decay is fitted where beta gap >= 3: there the local slope of log distance,
-gap / (1 + exp(-beta gap)), is within 5% of -gap."""
ROUNDING_LIMIT = 0.01
"""LN points whose derived relative rounding error exceeds this are left out of the fit."""
FLOOR_FACTOR = 10.0
"""Distances to hard attention within this factor of the rounding bound are not fitted."""


def _confidence(value: object) -> float:
    number = float(finite_array("confidence", value, ()))
    if not 0 < number < 1:
        raise InvalidInputError(f"confidence must lie in (0, 1), got {number!r}")
    return number


@dataclass(frozen=True)
class LayerNormConditioning(Provenance):
    """Measured Lipschitz constants of P at rows of std `stds`, and the fitted power law.

    `lipschitz[k]` is measured at std `stds[k]`; `scaled` = lipschitz * std (expected sigma2);
    `rounding[k]` the derived relative rounding error of lipschitz[k]; `fitted` the stds
    kept (rounding <= ROUNDING_LIMIT). `slope` of log L against log std (expected -1) with
    its interval, and the constant C = exp(intercept) (expected sigma2) with its interval,
    over the fitted points; `decades` is the span of the fitted stds. `verdict` is holds
    when at least 3 points are fitted, the slope interval contains -1 or
    |slope + 1| <= tolerance, and likewise for C / sigma2.
    """

    stds: list[float]
    lipschitz: list[float]
    scaled: list[float]
    rounding: list[float]
    fitted: list[float]
    fit: Fit
    expected_constant: float
    decades: float
    verdict: CheckVerdict
    inputs: dict[str, Any]

    @property
    def slope(self) -> float:
        return self.fit.slope

    @property
    def slope_interval(self) -> tuple[float, float]:
        return self.fit.slope_interval

    @property
    def constant(self) -> float:
        """C = exp(intercept) of the log-log fit (nan where the fit is)."""
        return _exp(self.fit.intercept)

    @property
    def constant_interval(self) -> tuple[float, float]:
        low, high = self.fit.intercept_interval
        return _exp(low), _exp(high)


def _exp(x: float) -> float:
    return math.exp(x) if math.isfinite(x) else math.nan


@timed
def layer_norm_conditioning(
    stds: Sequence[float] = DEFAULT_STDS,
    *,
    d: int = 16,
    offset: float = 0.7,
    sigma1: float = 0.0,
    sigma2: float = 1.0,
    relative_step: float = 1e-4,
    direction: np.ndarray | None = None,
    seed: int = 0,
    precision: str | Backend | None = None,
    confidence: float = 0.95,
    tolerance: float = 0.05,
) -> LayerNormConditioning:
    """Lipschitz constant of P(V) = sigma2 (V - mean V) / std V + sigma1 at V = offset + s w.

    For each s in `stds`: L(s) = |P(v + h t) - P(v - h t)| / (2 h |t|), h = relative_step s,
    t a tangent direction (mean zero, orthogonal to w); expected sigma2 / s. Points whose
    derived relative rounding error exceeds ROUNDING_LIMIT are dropped, and log L =
    log C + slope log s is fitted on the rest (docs/rounding.md section 5; expected slope
    -1 and C = sigma2). `direction` w (length d) defaults to a
    Gaussian draw from default_rng(seed); it is made mean-zero with unit variance. Domain:
    stds > 0 (at least 3), d >= 3, sigma2 > 0, relative_step > 0. precision None means
    mpmath with 30 digits.
    """
    s = positive_sweep("stds", stds, minimum=3)
    d = positive_int("d", d)
    if d < 3:
        raise InvalidInputError(f"d must be >= 3 (room for a tangent direction), got {d}")
    offset = float(finite_array("offset", offset, ()))
    sigma1 = float(finite_array("sigma1", sigma1, ()))
    sigma2 = positive_number("sigma2", sigma2)
    relative_step = positive_number("relative_step", relative_step)
    confidence = _confidence(confidence)
    tolerance = positive_number("tolerance", tolerance)
    bk = backend("mpmath", 30) if precision is None else backend(precision)
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(d) if direction is None else finite_array("direction", direction, (d,))
    w = w - w.mean()
    if not np.std(w) > 0:
        raise InvalidInputError("direction must not be constant (it has no mean-zero part)")
    t = rng.standard_normal(d)

    with bk.active():
        # w, t made mean-zero, unit-variance and orthogonal in the backend's precision
        wb = bk.asarray(w, "direction")
        wb -= bk.sum(wb, -1) / d
        wb /= bk.sqrt(bk.sum(wb * wb, -1) / d)
        tb = bk.asarray(t)
        tb -= bk.sum(tb, -1) / d
        tb -= bk.sum(tb * wb, -1) / bk.sum(wb * wb, -1) * wb
        tb /= bk.sqrt(bk.sum(tb * tb, -1) / d)
        spreads = bk.asarray(s[:, None], "stds")
        rows = bk.asarray(offset) + spreads * wb
        h = bk.asarray(relative_step) * spreads
        plus = project_to_s1(bk, rows + h * tb, sigma1, sigma2)
        minus = project_to_s1(bk, rows - h * tb, sigma1, sigma2)
        gap = plus - minus
        length = bk.sqrt(bk.sum(tb * tb, -1))
        measured = bk.sqrt(bk.sum(gap * gap, -1)) / (2 * h * length)
        lipschitz = bk.to_float64(measured)[:, 0]
        scaled = bk.to_float64(measured * spreads)[:, 0]
        largest = np.max(np.abs(bk.to_float64(rows)), axis=-1)
    unit = bk.unit_roundoff
    size = abs(sigma1) + sigma2 * math.sqrt(d)
    kappa = largest / s
    rounding = (
        projection_allowance(unit, kappa, d) * size / sigma2 + unit * largest / s
    ) / relative_step
    kept = rounding <= ROUNDING_LIMIT
    fit = fit_line(np.log(s[kept]), np.log(lipschitz[kept]), confidence)
    low, high = fit.slope_interval
    slope_ok = low <= -1 <= high or abs(fit.slope + 1) <= tolerance
    low, high = (_exp(x) for x in fit.intercept_interval)
    constant_ok = low <= sigma2 <= high or abs(_exp(fit.intercept) / sigma2 - 1) <= tolerance
    return LayerNormConditioning(
        stds=s.tolist(),
        lipschitz=lipschitz.tolist(),
        scaled=scaled.tolist(),
        rounding=rounding.tolist(),
        fitted=s[kept].tolist(),
        fit=fit,
        expected_constant=sigma2,
        decades=float(np.log10(s[kept].max() / s[kept].min())) if kept.any() else 0.0,
        verdict=CheckVerdict.HOLDS
        if fit.points >= 3 and slope_ok and constant_ok
        else CheckVerdict.FAILS,
        inputs={
            "d": d,
            "offset": offset,
            "sigma1": sigma1,
            "sigma2": sigma2,
            "relative_step": relative_step,
            "seed": seed,
            "direction_given": direction is not None,
            "precision": repr(bk),
            "confidence": confidence,
            "tolerance": tolerance,
        },
    )


@dataclass(frozen=True)
class AttentionConditioning(Provenance):
    """Attention's local Lipschitz constant and its distance to hard attention against beta.

    Per beta in `betas`: `lipschitz` (spectral norm of the measured Jacobian at U),
    `saturation` (mean over heads and rows of max_j P_ij: 1 is one-hot), `distance_to_hard`
    (max |A_beta(U) - A_hard(U)| / max |A_hard(U)|). `growth` fits log L against log beta
    on `growth_betas` (exponent 1: linear growth); `hard_lipschitz` is the constant of hard
    attention, the limit of saturated rows. `decay` fits log distance against beta on
    `decay_betas` (slope -score_gap expected), `score_gap` the smallest gap between a row's
    top score and the best score outside its tie, at beta = 1.
    """

    betas: list[float]
    lipschitz: list[float]
    saturation: list[float]
    distance_to_hard: list[float]
    growth: Fit
    growth_betas: list[float]
    hard_lipschitz: float
    score_gap: float
    decay: Fit
    decay_betas: list[float]
    rounding_floor: list[float]
    inputs: dict[str, Any]

    @property
    def growth_exponent(self) -> float:
        """The fitted power of beta in the Lipschitz constant on the large-beta tail."""
        return self.growth.slope

    @property
    def decay_rate(self) -> float:
        """-slope of log distance_to_hard against beta (expected: score_gap)."""
        return -self.decay.slope


def _hard_weights(u: np.ndarray, layer: LayerWeights) -> tuple[np.ndarray, float]:
    """Hard attention rows H (uniform over each row's tied maxima) and the smallest gap.

    Scores are computed in float64; two scores tie when they differ by at most twice
    their float64 rounding bound gamma_{d_k + 2d + 6} m_i (docs/rounding.md section 2).
    """
    heads = head_magnitudes(u, layer, None)
    scores = layer.attention_scale * heads.q @ np.swapaxes(heads.k, -1, -2)
    unit = backend("float64").unit_roundoff
    slack = 2 * score_rounding(layer, unit)
    slack = slack * np.max(heads.score_magnitude, -1, keepdims=True)
    top = np.max(scores, -1, keepdims=True)
    tied = scores >= top - slack
    hard = tied / np.sum(tied, -1, keepdims=True)
    rest = np.max(np.where(tied, -np.inf, scores), -1)
    return hard, float(np.min(top[..., 0] - rest))


def _jacobian_norm(bk: Backend, u: np.ndarray, layer: LayerWeights, step: float) -> float:
    """Spectral norm of the central-difference Jacobian of A at u."""
    with bk.active():
        w = layer.on(bk)
        columns = jacobian(bk, lambda batch: attention(bk, batch, w), bk.asarray(u), step)
        return float(np.linalg.norm(bk.to_float64(columns), 2))


@timed
def attention_conditioning(
    layer: LayerWeights,
    u: np.ndarray,
    betas: Sequence[float] = DEFAULT_BETAS,
    *,
    precision: str | Backend = "float64",
    relative_step: float = 1e-5,
    fit_from: float | None = None,
    confidence: float = 0.95,
) -> AttentionConditioning:
    """Lipschitz constant of U -> A_beta(U) and distance to hard attention, against beta.

    A_beta is `layer` with its scale multiplied by beta: A_beta(U) = sum_h
    softmax_rows(beta s Q_h K_h^T) V_h Wo_h + bo. Hard attention A_hard(U) = sum_h H_h V_h
    Wo_h + bo, H_h uniform over each row's (tied) maximal scores. The growth fit uses
    betas >= `fit_from` (default: the upper half of the sweep), the decay fit betas with
    beta gap >= 3 above the rounding floor. The Jacobian's step is
    relative_step * max(1, max|U|) / beta, so that the scores move alike at every beta
    (docs/rounding.md section 5). Domain: U of shape (N, d), finite; betas > 0 (at least
    3); relative_step > 0.
    """
    layer = checked_layer(layer)
    u = finite_array("u", u, (None, layer.d_model))
    if u.shape[0] == 0:
        raise InvalidInputError("u must have at least one token (row), got 0")
    b = np.sort(positive_sweep("betas", betas, minimum=3))
    relative_step = positive_number("relative_step", relative_step)
    confidence = _confidence(confidence)
    start = b[len(b) // 2] if fit_from is None else positive_number("fit_from", fit_from)
    bk = backend(precision)
    unit = bk.unit_roundoff
    hard, gap = _hard_weights(u, layer)
    size = max(1.0, float(np.max(np.abs(u))))

    # hard attention: H_h V_h Wo_h + bo in the backend, and its (linear) Jacobian
    with bk.active():
        w = layer.on(bk)
        x = bk.asarray(u, "u")
        _, values, _ = attention_heads(bk, x, w)
        mixed = bk.matmul(bk.asarray(hard), values)
        hard_output = combine_heads(bk, mixed, w)
        hard_scale = max(largest_magnitude(bk, hard_output), np.finfo(float).tiny)
    value_maps = np.einsum("hdv,hve->hde", layer.wv, layer.wo)
    hard_jacobian = sum(np.kron(hard[h], value_maps[h].T) for h in range(layer.heads))
    hard_lipschitz = float(np.linalg.norm(hard_jacobian, 2))

    lipschitz, saturation, distance, floor = [], [], [], []
    for beta in b:
        scaled = dataclasses.replace(layer, scale=float(beta) * layer.attention_scale)
        lipschitz.append(_jacobian_norm(bk, u, scaled, relative_step * size / max(1.0, beta)))
        with bk.active():
            ws = scaled.on(bk)
            weights, _, _ = attention_heads(bk, bk.asarray(u), ws)
            output = attention(bk, bk.asarray(u), ws)
            gap_to_hard = largest_magnitude(bk, output - hard_output)
        saturation.append(float(np.mean(np.max(bk.to_float64(weights), -1))))
        distance.append(gap_to_hard / hard_scale)
        bound = float(np.max(attention_rounding_bound(u, scaled, None, unit)))
        floor.append(FLOOR_FACTOR * 2 * bound / hard_scale)

    lipschitz_a, distance_a, floor_a = np.array(lipschitz), np.array(distance), np.array(floor)
    tail = b >= start
    growth = fit_line(np.log(b[tail]), np.log(lipschitz_a[tail]), confidence)
    above = (b * gap >= DECAY_WINDOW) & (distance_a > floor_a)
    decay = fit_line(b[above], np.log(distance_a[above]), confidence)
    return AttentionConditioning(
        betas=b.tolist(),
        lipschitz=lipschitz,
        saturation=saturation,
        distance_to_hard=distance,
        growth=growth,
        growth_betas=b[tail].tolist(),
        hard_lipschitz=hard_lipschitz,
        score_gap=gap,
        decay=decay,
        decay_betas=b[above].tolist(),
        rounding_floor=floor,
        inputs={
            "precision": repr(bk),
            "shape": list(u.shape),
            "d": layer.d_model,
            "heads": layer.heads,
            "d_k": layer.d_k,
            "scale": layer.attention_scale,
            "relative_step": relative_step,
            "fit_from": float(start),
            "confidence": confidence,
        },
    )
