"""Measured conditioning of the layer-norm projection P near constant rows: its Lipschitz
constant against the rows' standard deviation (expected sigma2 / std), with the rounding of
each measurement derived (docs/rounding.md section 5)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from properties.check_inputs import checked_confidence
from properties.claim_check import CheckVerdict
from solvers import backend
from solvers.backends import Backend
from solvers.equation.norms import project_to_s1
from solvers.errors import InvalidInputError
from solvers.results.allowances import projection_allowance
from solvers.results.line_fit import Fit, fit_line
from solvers.results.provenance import Provenance, timed
from solvers.validation import finite_array, positive_int, positive_number, positive_sweep

DEFAULT_STDS = tuple(10.0 ** (-k / 2) for k in range(13))  # 1 down to 1e-6: six decades
ROUNDING_LIMIT = 0.01
"""LN points whose derived relative rounding error exceeds this are left out of the fit."""


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
    confidence = checked_confidence(confidence)
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
