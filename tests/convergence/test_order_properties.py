"""No false PASS: estimate_order on sequences that do not converge, and its coverage on
noisy sequences that do (docs/orders.md section 4).

The families are chosen so that every member is recognisably non-convergent at the
given levels: a bounded stagnation, an oscillation, growth, and a fine end that jumps
back up. (A sequence that merely looks like a power law is one, and gets its order.)
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from convergence.order import OrderVerdict, estimate_order

CONVERGED = (OrderVerdict.PASS, OrderVerdict.SUPERCONVERGENT)

levels = st.integers(min_value=4, max_value=12)
sizes = st.floats(min_value=1e-12, max_value=1e6)
expected = st.one_of(st.none(), st.floats(min_value=0.25, max_value=8))


def _hs(n: int) -> list[float]:
    return [2.0**-k for k in range(n)]


def _judged(errors, expected_order) -> OrderVerdict:
    return estimate_order(_hs(len(errors)), errors, expected=expected_order).verdict


@settings(max_examples=300, deadline=None)
@given(sizes, st.data(), levels, expected)
def test_a_stagnating_sequence_never_passes(size, data, n, expected_order):
    """A constant error with 5% noise (it cannot mimic a decay of order 0.1 or more)."""
    noise = data.draw(st.lists(st.floats(-0.05, 0.05), min_size=n, max_size=n))
    errors = [size * (1 + x) for x in noise]
    assert _judged(errors, expected_order) not in CONVERGED


@settings(max_examples=300, deadline=None)
@given(sizes, st.floats(0.3, 0.95), st.data(), levels, expected)
def test_an_oscillating_sequence_never_passes(size, amplitude, data, n, expected_order):
    """Up and down by 1 +- amplitude, around a level that may itself decay (at most at
    order 0.3 per halving, less than the oscillation)."""
    decay = data.draw(st.floats(0, 0.3))
    errors = [size * 2.0 ** (-decay * k) * (1 + amplitude * (-1) ** k) for k in range(n)]
    assert _judged(errors, expected_order) not in CONVERGED


@settings(max_examples=300, deadline=None)
@given(sizes, st.floats(0.5, 4.0), st.data(), levels, expected)
def test_a_growing_sequence_never_passes(size, order, data, n, expected_order):
    """Errors that grow at order 0.5 or more as h shrinks, with 10% noise (every
    refinement raises the error)."""
    noise = data.draw(st.lists(st.floats(-0.1, 0.1), min_size=n, max_size=n))
    errors = [size * 2.0 ** (order * k) * (1 + x) for k, x in enumerate(noise)]
    assert _judged(errors, expected_order) not in CONVERGED


@settings(max_examples=300, deadline=None)
@given(sizes, st.floats(0.5, 4.0), st.data(), levels, expected)
def test_a_fine_end_that_jumps_back_never_passes(size, order, data, n, expected_order):
    """A convergent start whose finest error returns to the coarsest one or above."""
    jump = data.draw(st.floats(1.0, 100.0))
    errors = [size * 2.0 ** (-order * k) for k in range(n - 1)] + [size * jump]
    assert _judged(errors, expected_order) not in CONVERGED


@given(expected)
def test_the_sequence_that_once_passed_does_not(expected_order):
    errors = [5.16, 5.6, 8.5, 9.41, 11.5, 12.1, 13.1, 14.9, 0.274, 14.9, 14.9, 0.0327]
    assert _judged(errors, expected_order) not in CONVERGED


def _coverage(noise: float, trials: int = 400) -> tuple[float, float]:
    """Over seeded noisy power laws C h^p exp(noise N(0, 1)) (p in [0.5, 6], 5 to 10
    levels): the share whose 95% interval holds p, and the share judged PASS against p."""
    inside = passed = 0
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        order, n = rng.uniform(0.5, 6), int(rng.integers(5, 11))
        hs = np.array(_hs(n + 1)[1:])
        errors = 2.0 * hs**order * np.exp(noise * rng.standard_normal(n))
        estimate = estimate_order(hs, errors, expected=order)
        inside += estimate.interval[0] <= order <= estimate.interval[1]
        passed += estimate.verdict == OrderVerdict.PASS
    return inside / trials, passed / trials


def test_noisy_convergent_sequences_keep_their_coverage():
    inside, passed = _coverage(0.1)
    assert inside >= 0.9 and passed >= 0.9, (inside, passed)
