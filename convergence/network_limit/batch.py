"""Statistics over a batch of inputs: a per-input quantity's median and range, and a
count's confidence interval (docs/networks.md section 7).

A network study measures one batch. What a paper prints of it is the spread of a
per-input quantity over the batch, and for a count of changed decisions the share with
the uncertainty of having sampled those inputs: the Wilson score interval at 95%, which
keeps its coverage near 0 and n (the Wald interval collapses to a point there). The
judged positions of an LM head are taken as independent draws, which tokens of one
sequence are not: the interval is then a lower bound of the uncertainty.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
"""The level of a count's interval."""


@dataclass(frozen=True)
class Spread:
    """A quantity measured per input: its median and its range (min to max) over the batch."""

    median: float
    low: float
    high: float


@dataclass(frozen=True)
class Share:
    """`count` of `of` judged decisions, with the Wilson interval of the share count / of."""

    count: int
    of: int
    low: float
    high: float


def spread(values: np.ndarray) -> Spread:
    """The median and range of per-input values."""
    values = np.asarray(values, dtype=np.float64)
    return Spread(float(np.median(values)), float(values.min()), float(values.max()))


def per_input_distance(
    states: np.ndarray, limit: np.ndarray, real: np.ndarray, size: float
) -> np.ndarray:
    """max over input b's real entries of |states - limit|, divided by the batch's `size`
    (max |U_limit| over every real token): their maximum is the batch's relative distance."""
    difference = np.where(real[..., None], np.abs(states - limit), 0.0)
    return difference.reshape(len(states), -1).max(axis=-1) / size


def share(count: int, of: int) -> Share:
    """`count` of `of` with the Wilson score interval (CONFIDENCE) of the share."""
    import scipy.stats  # its import costs 0.3 s; only network studies need it

    interval = scipy.stats.binomtest(int(count), int(of)).proportion_ci(CONFIDENCE, "wilson")
    return Share(int(count), int(of), float(interval.low), float(interval.high))
