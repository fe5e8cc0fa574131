"""Order estimation that knows when not to trust itself (docs/orders.md section 4).

`estimate_order(hs, errors)` fits log e = log C + p log h by least squares on the
asymptotic window of the levels and returns the order with a 95% interval, the levels it
used, those it dropped (pre-asymptotic, at the precision floor) with the reason, and a
verdict (OrderVerdict). `richardson(hs, values)` is the reference-free three-level
estimate: the observed order, the extrapolated limit and an error bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import scipy.special

from solvers.errors import InvalidInputError
from solvers.results.line_fit import fit_line


class OrderVerdict(StrEnum):
    """What an order estimate concludes (see the module docstring)."""

    PASS = "PASS"
    SUPERCONVERGENT = "SUPERCONVERGENT"
    PRE_ASYMPTOTIC = "PRE-ASYMPTOTIC"
    FLOOR = "FLOOR"
    FAIL = "FAIL"
    NO_LIMIT = "NO-LIMIT"
    UNDECIDED = "UNDECIDED"
    """Only from a limit check (convergence.limit): the levels cannot tell whether the
    refinements have a limit."""


RISE = 1.5
"""A refinement that raises the error by more than this factor is an increase, not noise."""
FLOOR_ORDER_FRACTION = 0.5
"""A finest level is at the floor when its local order is below this fraction of the rest's."""
MIN_RELATIVE_NOISE = 0.002
"""The smallest noise assumed in log e (0.2%): exact data still allow small wiggles."""


@dataclass(frozen=True)
class OrderEstimate:
    """The fitted order, its 95% interval, the verdict, and what was used or dropped."""

    order: float
    interval: tuple[float, float]
    constant: float
    verdict: OrderVerdict
    used: list[int]
    dropped: dict[int, str]
    expected: float | None
    hs: list[float]
    errors: list[float]
    reason: str = ""
    """Why the verdict: what the window showed."""


def estimate_order(
    hs: Sequence[float],
    errors: Sequence[float],
    *,
    expected: float | None = None,
    tolerance: float = 0.1,
    floor: float = 0.0,
    floor_factor: float = 10.0,
    floor_name: str = "precision floor",
    confidence: float = 0.95,
) -> OrderEstimate:
    """Order of convergence of `errors` against step sizes `hs` (see the module docstring)."""
    h = np.asarray(hs, dtype=np.float64)
    e = np.asarray(errors, dtype=np.float64)
    if h.ndim != 1 or h.shape != e.shape or len(h) < 3:
        raise InvalidInputError(
            f"need at least 3 step sizes and as many errors, got {h.shape} and {e.shape}"
        )
    if not (np.isfinite(h).all() and (h > 0).all()):
        raise InvalidInputError(f"step sizes must be finite and positive, got {list(hs)}")
    if not (np.isfinite(e).all() and (e >= 0).all()):
        raise InvalidInputError(f"errors must be finite and non-negative, got {list(errors)}")
    order_of = np.argsort(-h)  # coarse to fine
    h, e = h[order_of], e[order_of]
    levels = [int(i) for i in order_of]
    dropped: dict[int, str] = {}

    def result(verdict, reason, fit=None, used=()):
        nan = float("nan")
        slope, (lo, hi), intercept = (
            (nan, (nan, nan), nan)
            if fit is None
            else (fit.slope, fit.slope_interval, fit.intercept)
        )
        return OrderEstimate(
            order=slope,
            interval=(lo, hi),
            constant=math.exp(intercept),
            verdict=verdict,
            used=[levels[i] for i in used],
            dropped=dropped,
            expected=expected,
            hs=[float(x) for x in hs],
            errors=[float(x) for x in errors],
            reason=reason,
        )

    # once a level reaches the floor, the finer ones are rounding too (it accumulates)
    at_floor = np.flatnonzero((e <= floor_factor * floor) | (e == 0))
    first_floor = int(at_floor[0]) if len(at_floor) else len(h)
    keep = list(range(first_floor))
    for i in range(first_floor, len(h)):
        dropped[levels[i]] = (
            f"at or past the {floor_name}: within a factor {floor_factor:g} of {floor:.3g}"
        )
    keep = _drop_rounding_tail(h, e, keep, levels, dropped)
    if len(keep) >= 2:
        kept_h, kept_e = h[keep], e[keep]
        slope_all = np.polyfit(np.log(kept_h), np.log(kept_e), 1)[0]
        rises = int(np.sum(kept_e[1:] / kept_e[:-1] > RISE))  # clear increases: oscillation
        refinements = len(keep) - 1
        if slope_all <= 0.1 or kept_e[-1] >= kept_e[0] or rises >= refinements / 3:
            return result(
                OrderVerdict.NO_LIMIT,
                f"the errors do not decrease: fitted slope {slope_all:.3g}, finest/coarsest "
                f"{kept_e[-1] / kept_e[0]:.3g}, {_rises(rises, refinements)}",
            )
    if len(keep) < 3:
        if dropped:
            return result(OrderVerdict.FLOOR, f"fewer than 3 levels above the {floor_name}")
        return result(OrderVerdict.NO_LIMIT, "fewer than 3 levels with a non-zero error")

    window = keep
    start = _consistent_from_the_fine_end(np.log(h[window]), np.log(e[window]))
    for i in window[:start]:
        dropped[levels[i]] = "pre-asymptotic: off the line through the finer levels"
    window = window[start:]
    while len(window) > 3 and _curved(np.log(h[window]), np.log(e[window])):
        dropped[levels[window[0]]] = "pre-asymptotic: the log-log curve still bends there"
        window = window[1:]
    log_h, log_e = np.log(h[window]), np.log(e[window])
    fit = fit_line(log_h, log_e, confidence)
    slope, (lo, hi) = fit.slope, fit.slope_interval
    ratios = np.exp(np.diff(log_e))
    if ratios.max() >= 1:
        return result(
            OrderVerdict.NO_LIMIT,
            "the errors do not decrease over the asymptotic window: a refinement changes "
            f"the error by a factor {ratios.max():.3g}",
            fit,
            window,
        )
    if not lo > 0:
        return result(
            OrderVerdict.PRE_ASYMPTOTIC,
            f"no significant decrease: the 95% interval [{lo:.3g}, {hi:.3g}] reaches 0",
            fit,
            window,
        )
    local = np.diff(log_e) / np.diff(log_h)
    if len(window) == 3 and abs(local[1] - local[0]) > max(0.2 * abs(slope), 0.2):
        return result(
            OrderVerdict.PRE_ASYMPTOTIC,
            f"the local orders of the 3 levels disagree ({local[0]:.3g}, {local[1]:.3g})",
            fit,
            window,
        )
    changes = np.diff(local)
    drifting = (np.all(changes < 0) or np.all(changes > 0)) and np.all(
        np.abs(changes[1:]) < np.abs(changes[:-1])
    )
    if drifting and abs(local[-1] - slope) > max(tolerance / 2, (hi - lo) / 2):
        # local orders still converging (by shrinking steps) to a value off the fit:
        # pre-asymptotic; growing steps near a floor are rounding, not this
        return result(
            OrderVerdict.PRE_ASYMPTOTIC,
            f"the local orders still drift (finest {local[-1]:.3g} against the fit {slope:.3g})",
            fit,
            window,
        )
    return result(*_against_expected(slope, lo, hi, local[-1], expected, tolerance), fit, window)


def _rises(rises: int, refinements: int) -> str:
    """How many refinements raise the error by more than RISE, in words."""
    if rises == 0:
        return f"no refinement raises it by more than {RISE:g}x"
    verb = "raises" if rises == 1 else "raise"
    return f"{rises} of {refinements} refinements {verb} it by more than {RISE:g}x"


def _against_expected(
    slope: float, lo: float, hi: float, finest: float, expected: float | None, tolerance: float
) -> tuple[OrderVerdict, str]:
    """The verdict of a significant, decreasing fit: PASS needs the whole interval on the
    right side (above 0, which the caller checked; with an expected order q, containing q
    or inside q +- tolerance)."""
    interval = f"[{lo:.3g}, {hi:.3g}]"
    if expected is None:
        return OrderVerdict.PASS, f"converges: order {slope:.3g}, interval {interval} above 0"
    if lo <= expected <= hi or expected - tolerance <= lo <= hi <= expected + tolerance:
        return OrderVerdict.PASS, f"order {slope:.3g}, interval {interval} agrees with {expected:g}"
    if lo > expected + tolerance:
        return (
            OrderVerdict.SUPERCONVERGENT,
            f"interval {interval} above {expected:g} + {tolerance:g}",
        )
    if abs(finest - expected) <= tolerance:  # the finest pair agrees; the coarser ones not yet
        return OrderVerdict.PRE_ASYMPTOTIC, (
            f"interval {interval} misses {expected:g}, the finest local order {finest:.3g} agrees"
        )
    return OrderVerdict.FAIL, f"order {slope:.3g}, interval {interval} misses {expected:g}"


def _drop_rounding_tail(h, e, keep, levels, dropped) -> list[int]:
    """Drop the finest levels where rounding has taken over.

    Only when the sequence converges (median local order above 0.5): every level past the
    smallest error, and then a finest level whose local order against the previous kept
    level is below half the median before it (the error stagnates, wanders or grows as
    rounding accumulates), is a floor level. A level whose error reaches the coarsest
    level's is never taken for rounding: the sequence does not converge.
    """
    keep = list(keep)
    if len(keep) < 3:
        return keep
    lowest = int(np.argmin(e[keep]))
    below_start = e[keep[lowest + 1 :]].max(initial=0) < e[keep[0]]  # rounding never exceeds it
    if 2 <= lowest < len(keep) - 1 and below_start:
        prefix = keep[: lowest + 1]
        local = np.diff(np.log(e[prefix])) / np.diff(np.log(h[prefix]))
        if np.median(local) > 0.5:  # converged down to the minimum, then rounding took over
            for i in keep[lowest + 1 :]:
                dropped[levels[i]] = "floor: past the smallest error, rounding accumulates"
            keep = prefix
    while len(keep) > 3:
        local = np.diff(np.log(e[keep])) / np.diff(np.log(h[keep]))
        typical = float(np.median(local[:-1]))
        rounding_like = e[keep[-1]] < e[keep[0]]  # rounding never exceeds the coarsest error
        if typical <= 0.5 or local[-1] >= FLOOR_ORDER_FRACTION * typical or not rounding_like:
            break
        dropped[levels[keep[-1]]] = (
            f"floor: local order {local[-1]:.2f} against {typical:.2f} before it (rounding)"
        )
        keep = keep[:-1]
    return keep


def _curved(log_h: np.ndarray, log_e: np.ndarray) -> bool:
    """Is the quadratic term of log e in log h significant (t-test at 95%)?

    The noise is taken as at least MIN_RELATIVE_NOISE, so exact data with a slight bend
    keep their levels while a bend far above the noise drops the coarsest level.
    """
    design = np.vander(log_h - log_h.mean(), 3)
    coefficients, *_ = np.linalg.lstsq(design, log_e, rcond=None)
    residuals = log_e - design @ coefficients
    dof = len(log_h) - 3
    sigma = max(math.sqrt(float(residuals @ residuals) / dof), MIN_RELATIVE_NOISE)
    covariance = np.linalg.inv(design.T @ design) * sigma**2
    return abs(coefficients[0]) / math.sqrt(covariance[0, 0]) > scipy.special.stdtrit(dof, 0.975)


def _consistent_from_the_fine_end(log_h: np.ndarray, log_e: np.ndarray) -> int:
    """The first (coarsest) level of the window grown from the finest four levels, one
    coarser level at a time, until a level and the next coarser one both lie outside the
    99% prediction interval of the line through the levels finer than them.

    This catches a coarse end that bends away in a shape a quadratic does not fit (an
    S-curve, a saturation), which `_curved` can miss. The prediction's standard error is
    sigma sqrt(1 + 1/n + (x0 - mean)^2 / Sxx), sigma the residual noise of the line (at
    least MIN_RELATIVE_NOISE). Asking for two levels in a row keeps a single noisy level
    from cutting the window (each cut level biases the fit on the rest, and the interval
    covers the true order less often).
    """
    start = max(len(log_h) - 4, 0)
    while start > 0:
        x = log_h[start:]
        line = fit_line(x, log_e[start:])
        slope, intercept, sigma = line.slope, line.intercept, line.residual
        candidates = slice(max(start - 2, 0), start)  # the next one or two coarser levels
        x0 = log_h[candidates]
        error = max(sigma, MIN_RELATIVE_NOISE) * np.sqrt(
            1 + 1 / len(x) + (x0 - x.mean()) ** 2 / ((x - x.mean()) ** 2).sum()
        )
        miss = np.abs(log_e[candidates] - (slope * x0 + intercept))
        if np.all(miss > scipy.special.stdtrit(len(x) - 2, 0.995) * error):
            break
        start -= 1
    return start


@dataclass(frozen=True)
class RichardsonEstimate:
    """Observed order from three levels, extrapolated limit and its error bound."""

    order: float
    limit: np.ndarray
    error_bound: float


def richardson(hs: Sequence[float], values: Sequence[np.ndarray], safety: float = 1.25):
    """Three solutions u1, u2, u3 on step sizes h1 > h2 > h3 with h1/h2 = h2/h3 = r.

    p = log(|u1 - u2| / |u2 - u3|) / log r (max norms), limit u3 + (u3 - u2) / (r^p - 1),
    bound safety * |u3 - u2| / (r^p - 1).
    """
    if len(hs) != 3 or len(values) != 3:
        raise InvalidInputError(f"richardson needs exactly 3 levels, got {len(hs)}")
    h1, h2, h3 = (float(x) for x in hs)
    if not h1 > h2 > h3 > 0 or not math.isclose(h1 / h2, h2 / h3, rel_tol=1e-9):
        raise InvalidInputError(f"step sizes must decrease with a constant ratio, got {list(hs)}")
    u1, u2, u3 = (np.asarray(v, dtype=np.float64) for v in values)
    r = h1 / h2
    coarse, fine = float(np.abs(u1 - u2).max()), float(np.abs(u2 - u3).max())
    if fine == 0 or coarse <= fine:
        raise InvalidInputError(
            f"the differences do not shrink (|u1 - u2| = {coarse:.3g}, |u2 - u3| = {fine:.3g}): "
            "no observed order"
        )
    p = math.log(coarse / fine) / math.log(r)
    factor = r**p - 1
    return RichardsonEstimate(p, u3 + (u3 - u2) / factor, safety * fine / factor)
