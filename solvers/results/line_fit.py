"""A least-squares line with Student-t confidence intervals for its slope and intercept."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.special


@dataclass(frozen=True)
class Fit:
    """y = intercept + slope x by least squares, with confidence intervals (Student t).

    `slope_error` is the slope's standard error and `residual` the residual standard
    deviation s = sqrt(sum r^2 / (n - 2)).
    """

    slope: float
    slope_interval: tuple[float, float]
    intercept: float
    intercept_interval: tuple[float, float]
    points: int
    slope_error: float
    residual: float


def fit_line(x: object, y: object, confidence: float = 0.95) -> Fit:
    """Least-squares line y = a + b x with `confidence` intervals for a and b (n >= 3 points).

    se(b) = s / sqrt(Sxx), se(a) = s sqrt(1 / n + mean(x)^2 / Sxx) with s the residual
    standard deviation (scipy.stats.linregress takes them from 1 - r^2, which cancels to
    0 on data this close to a line); the half-widths are Student t quantiles with n - 2
    degrees of freedom. Fewer than 3 points: every number nan.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    if n < 3:
        nan = math.nan
        return Fit(nan, (nan, nan), nan, (nan, nan), n, nan, nan)
    centred = x - x.mean()
    spread = float(centred @ centred)
    b = float(centred @ (y - y.mean())) / spread
    a = float(y.mean() - b * x.mean())
    residuals = y - (a + b * x)
    sigma = math.sqrt(float(residuals @ residuals) / (n - 2))
    quantile = float(scipy.special.stdtrit(n - 2, 0.5 + confidence / 2))  # Student t quantile
    se_b = sigma / math.sqrt(spread)
    db = quantile * se_b
    da = quantile * sigma * math.sqrt(1 / n + x.mean() ** 2 / spread)
    return Fit(b, (b - db, b + db), a, (a - da, a + da), n, se_b, sigma)
