"""relu and the layer-norm projection P as maps, as claim checks: relu is an idempotent,
non-expansive projection (exactly, in every precision), and P, the nearest-point map onto a
sphere of radius R = sigma2 sqrt(d), is expansive inside the ball of radius R and
non-expansive outside, measured against its local Lipschitz constant R / r
(docs/model.md section 1; tolerances docs/rounding.md section 3)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from properties.claim_check import ClaimCheck, largest_magnitude
from properties.conditioning.rounding_bounds import projection_rounding, row_norms
from properties.exactness.projection_theorem import Projection, s1_projection
from solvers import backend
from solvers.backends import Backend
from solvers.errors import InvalidInputError
from solvers.results.provenance import Provenance, timed
from solvers.validation import finite_array, positive_int

RADII = (0.03, 0.1, 0.3, 0.7, 1.0, 1.5, 3.0, 10.0)
"""Radial distances of the measured pairs, as fractions of R."""


def check_relu_projection(
    x: np.ndarray, y: np.ndarray, *, precision: str | Backend = "float64"
) -> list[ClaimCheck]:
    """relu = max(., 0), the projection onto {z >= 0}: relu(relu(x)) = relu(x) and
    |relu(x) - relu(y)| <= |x - y| entrywise. Domain: finite x, y of equal shape.

    Both hold exactly in floating point (relu is exact, rounding is monotone): tolerance 0.
    """
    bk = backend(precision)
    x, y = finite_array("x", x), finite_array("y", y)
    if x.shape != y.shape:
        raise InvalidInputError(f"x and y must have the same shape, got {x.shape} and {y.shape}")
    configuration = {"precision": repr(bk), "shape": list(x.shape)}
    with bk.active():
        a, b = bk.asarray(x, "x"), bk.asarray(y, "y")
        once = bk.relu_(a.copy())
        twice = bk.relu_(once.copy())
        idempotent = largest_magnitude(bk, twice - once)
        gap = bk.to_float64(abs(bk.relu_(a.copy()) - bk.relu_(b.copy())) - abs(a - b))
    return [
        ClaimCheck(
            "relu is idempotent", configuration, idempotent, 0.0, "max |relu(relu x) - relu x|"
        ),
        ClaimCheck(
            "relu is non-expansive",
            configuration,
            max(float(np.max(gap, initial=0.0)), 0.0),
            0.0,
            "max of |relu x - relu y| - |x - y| entrywise",
        ),
    ]


@dataclass(frozen=True)
class ProjectionExpansion(Provenance):
    """Measured |P(x) - P(y)| / |x - y| against the radial distance, and the claims.

    `local_ratio[k]` is the largest ratio over tangent pairs y = x + step r t at radial
    distance r = radii[k] R (t a unit tangent of the sphere |v - mean v| = r);
    `predicted_local[k]` = R / r is P's local Lipschitz constant there. `pair_*` are the
    random pairs (minimum radial distance of the pair, ratio).
    """

    radius: float
    radii: list[float]
    local_ratio: list[float]
    predicted_local: list[float]
    max_ratio_outside: float
    max_ratio_inside: float
    pair_min_radius: list[float]
    pair_ratio: list[float]
    checks: list[ClaimCheck]
    inputs: dict[str, Any]


def _unit_mean_zero(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    z = rng.standard_normal(shape)
    z -= z.mean(axis=-1, keepdims=True)
    return z / row_norms(z)[..., None]


@timed
def measure_projection_expansion(
    d: int,
    sigma1: float,
    sigma2: float,
    seed: int = 0,
    *,
    radii: Sequence[float] = RADII,
    samples: int = 8,
    step: float = 1e-3,
    precision: str | Backend = "float64",
    projection: Projection | None = None,
) -> ProjectionExpansion:
    """Where P (eps = 0, scalar gain) is and is not non-expansive, measured.

    P(v) = sigma1 + R (v - mean v) / |v - mean v| with R = sigma2 sqrt(d): the nearest
    point of a sphere of radius R in the mean-zero subspace, so
    |P(x) - P(y)| <= R / min(r(x), r(y)) |x - y|, r(v) = |v - mean v|, and tangent pairs
    at radial distance r attain the exact ratio (R / r) 2 sin(atan(step) / 2) / step.
    Pairs: `samples` tangent and `samples` random-direction pairs y = x + step r z at each
    radial distance r = f R (f in `radii`), and samples * len(radii) independent random
    pairs with r log-uniform over the radii. Rows get random means. Domain: d >= 3,
    sigma2 > 0, radii and step > 0. A ratio's tolerance: each P off by its rounding
    bound, the distances by (d + 2) u relatively.
    """
    bk = backend(precision)
    d = positive_int("d", d)
    if d < 3:
        raise InvalidInputError(
            f"d must be >= 3 (with d = 2 the sphere in the mean-zero plane is two points and "
            f"has no tangent direction), got {d}"
        )
    samples = positive_int("samples", samples)
    factors = finite_array("radii", radii)
    if factors.ndim != 1 or not len(factors) or (factors <= 0).any():
        raise InvalidInputError(f"radii must be a non-empty list of positive numbers, got {radii}")
    step = float(finite_array("step", step, ()))
    if step <= 0:
        raise InvalidInputError(f"step must be > 0, got {step!r}")
    projection = projection or s1_projection(sigma1, sigma2)
    rng = np.random.default_rng(seed)
    big_r = sigma2 * math.sqrt(d)
    size = abs(sigma1) + big_r
    unit = bk.unit_roundoff

    # x = m + r w (w unit, mean zero); random pairs are built in float64
    count = len(factors) * samples
    r = np.repeat(factors * big_r, samples)
    w = _unit_mean_zero(rng, (count, d))
    t = _unit_mean_zero(rng, (count, d))
    z = _unit_mean_zero(rng, (count, d)) + rng.standard_normal((count, 1)) / math.sqrt(d)
    z /= row_norms(z)[:, None]
    x_local = sigma1 + rng.standard_normal((count, 1)) + r[:, None] * w
    random_y = x_local + step * r[:, None] * z
    log_r = rng.uniform(np.log(factors.min()), np.log(factors.max()), (2, count))
    x_far = sigma1 + rng.standard_normal((count, 1)) + np.exp(log_r[0])[:, None] * big_r * w
    y_far = sigma1 + rng.standard_normal((count, 1)) + np.exp(log_r[1])[:, None] * big_r * t

    with bk.active():
        # tangent pairs in the backend, so that they are tangent to its precision: t made
        # mean-zero and orthogonal to x - mean x there, y = x + step r t
        x = bk.asarray(x_local, "x")
        centred = x - bk.sum(x, -1) / d
        radial = bk.sqrt(bk.sum(centred * centred, -1))
        direction = bk.asarray(t)
        direction -= bk.sum(direction, -1) / d
        direction -= bk.sum(direction * centred, -1) / (radial * radial) * centred
        direction /= bk.sqrt(bk.sum(direction * direction, -1))
        tangent_y = x + bk.asarray(step) * radial * direction
        # exact ratio of a tangent pair: (R / r) chord / a with a = |y - x| / r and
        # chord / a = 2 sin(atan(a) / 2) / a = sqrt(2 / ((s + 1) s)), s = sqrt(1 + a^2)
        a = bk.sqrt(bk.sum((tangent_y - x) * (tangent_y - x), -1)) / radial
        s = bk.sqrt(a * a + 1)
        exact = (
            bk.asarray(sigma2)
            * bk.sqrt(bk.asarray(d))
            / radial
            * bk.sqrt(bk.asarray(2.0) / ((s + 1) * s))
        )
        a = np.concatenate([x, x, bk.asarray(x_far, "x")])
        b = np.concatenate([tangent_y, bk.asarray(random_y, "y"), bk.asarray(y_far, "y")])
        image = projection(bk, a) - projection(bk, b)
        gap = a - b
        ratios = bk.sqrt(bk.sum(image * image, -1)) / bk.sqrt(bk.sum(gap * gap, -1))
        attained = bk.to_float64(abs(ratios[:count] - exact) / exact)[..., 0]
        ratio, exact = bk.to_float64(ratios)[..., 0], bk.to_float64(exact)[..., 0]
        a64, b64 = bk.to_float64(a), bk.to_float64(b)
    radial_a = row_norms(a64 - a64.mean(-1, keepdims=True))
    radial_b = row_norms(b64 - b64.mean(-1, keepdims=True))
    nearest = np.minimum(radial_a, radial_b)
    bound = big_r / nearest
    distance = row_norms(a64 - b64)
    # P's rounding at each end of a pair (std = radial / sqrt(d) with eps = 0)
    rounding_a, _ = projection_rounding(a64, radial_a / math.sqrt(d), size, unit)
    rounding_b, _ = projection_rounding(b64, radial_b / math.sqrt(d), size, unit)
    slack = (rounding_a + rounding_b) / distance
    slack += 2 * (d + 2) * unit * ratio
    tangent = slice(0, count)
    inside = nearest < big_r
    configuration = {
        "precision": repr(bk),
        "d": d,
        "sigma1": sigma1,
        "sigma2": sigma2,
        "seed": seed,
        "step": step,
        "samples": samples,
        "radii": factors.tolist(),
    }
    loose = np.maximum(1.0, bound)
    claims = (
        (
            "|P(x) - P(y)| <= max(1, R / min radial distance) |x - y|",
            float(np.max((ratio - loose) / loose)),
            float(np.max(slack / loose)),
            "max over pairs of (ratio - bound) / bound: non-expansive outside the ball of "
            "radius R, at most R / r inside",
        ),
        (
            "|P(x) - P(y)| <= R / min(r(x), r(y)) |x - y|",
            float(np.max((ratio - bound) / bound)),
            float(np.max(slack / bound)),
            "max over pairs of (ratio - bound) / bound (the radial retraction onto the ball of "
            "radius r is non-expansive)",
        ),
        (
            "tangent pairs attain the local Lipschitz constant R / r",
            float(np.max(attained)),
            float(np.max(slack[tangent] / exact)),
            "max |ratio - (R/r) 2 sin(atan(a)/2)/a| / that over tangent pairs, a = |x - y| / r",
        ),
    )
    local = ratio[tangent].reshape(len(factors), samples).max(axis=1)
    far = slice(2 * count, 3 * count)
    return ProjectionExpansion(
        radius=big_r,
        radii=factors.tolist(),
        local_ratio=local.tolist(),
        predicted_local=(1 / factors).tolist(),
        max_ratio_outside=float(np.max(ratio[~inside], initial=0.0)),
        max_ratio_inside=float(np.max(ratio[inside], initial=0.0)),
        pair_min_radius=nearest[far].tolist(),
        pair_ratio=ratio[far].tolist(),
        checks=[ClaimCheck(claim, configuration, *numbers) for claim, *numbers in claims],
        inputs=configuration,
    )
