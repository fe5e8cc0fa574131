"""estimate_order on synthetic sequences whose truth is known, and richardson."""

from __future__ import annotations

import numpy as np
import pytest

from convergence.order import OrderVerdict, estimate_order, richardson
from solvers import InvalidInputError

HS = 2.0 ** -np.arange(1, 9)


@pytest.mark.parametrize("order", [1.0, 2.0, 4.0])
def test_exact_power_laws_pass_with_their_order(order):
    estimate = estimate_order(HS, 3.0 * HS**order, expected=order)
    assert estimate.verdict == OrderVerdict.PASS and estimate.order == pytest.approx(
        order, abs=1e-9
    )
    assert estimate.constant == pytest.approx(3.0)


def test_true_order_lies_in_the_95_percent_interval_in_at_least_90_percent_of_trials():
    inside = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        order = rng.uniform(0.5, 6)
        errors = 2.0 * HS**order * np.exp(0.1 * rng.standard_normal(len(HS)))
        estimate = estimate_order(HS, errors)
        inside += estimate.interval[0] <= order <= estimate.interval[1]
    assert inside >= 180, inside


def test_pre_asymptotic_coarse_levels_are_dropped_with_their_reason():
    errors = HS**2 * (1 + 30 * HS**2)  # strong curvature on the coarse levels
    estimate = estimate_order(HS, errors, expected=2)
    assert estimate.verdict == OrderVerdict.PASS
    assert 0 in estimate.dropped and estimate.dropped[0].startswith("pre-asymptotic")
    assert estimate.order == pytest.approx(2, abs=0.1)


def test_a_saturating_coarse_end_is_dropped_as_pre_asymptotic():
    # e = 1 - exp(-h^2): order 2 as h -> 0, saturating at 1 for the coarse levels; the
    # bend is not a quadratic in log h, so only the prediction test catches it
    hs = 2.0 ** np.arange(2, -7, -1)
    estimate = estimate_order(hs, 1 - np.exp(-(hs**2)), expected=2)
    assert estimate.verdict == OrderVerdict.PASS and estimate.order == pytest.approx(2, abs=0.05)
    assert {0, 1} <= set(estimate.dropped)
    assert all(reason.startswith("pre-asymptotic") for reason in estimate.dropped.values())


def test_a_precision_floor_is_dropped_with_its_reason():
    errors = np.maximum(HS**4, 1e-8 * (1 + 0.3 * np.sin(np.arange(len(HS)))))
    estimate = estimate_order(HS, errors, expected=4, floor=1e-8)
    assert estimate.verdict == OrderVerdict.PASS and estimate.order == pytest.approx(4, abs=0.1)
    assert any(reason.startswith(("floor", "at or past")) for reason in estimate.dropped.values())
    stuck = estimate_order(HS, np.maximum(HS**4, 1e-3), floor=1e-4)
    assert stuck.verdict == OrderVerdict.FLOOR


def test_errors_at_a_reference_floor_never_pass():
    """Errors that stop at the reference's own error measure the reference: FLOOR, named as
    the reference floor, where the errors above it PASS order 4."""
    assert estimate_order(HS, HS**4, expected=4).verdict == OrderVerdict.PASS
    errors = np.maximum(HS**4, 1e-3)
    stuck = estimate_order(HS, errors, expected=4, floor=1e-3, floor_name="reference floor")
    assert stuck.verdict == OrderVerdict.FLOOR
    assert "reference floor" in stuck.reason
    assert all("reference floor" in why for why in stuck.dropped.values())


@pytest.mark.parametrize(
    "errors",
    [HS**-1, np.where(np.arange(8) % 2, 0.1, 1.0), np.full(8, 0.3)],
    ids=["divergent", "oscillating", "constant"],
)
def test_sequences_without_a_limit(errors):
    assert estimate_order(HS, errors).verdict == OrderVerdict.NO_LIMIT


@pytest.mark.parametrize(
    ("errors", "phrase"),
    [
        (np.full(4, 0.3), "no refinement raises it by more than 1.5x"),
        ([1.0, 2.0, 1.9, 1.8], "1 of 3 refinements raises it by more than 1.5x"),
        ([1.0, 0.5, 1.0, 0.5, 1.0], "2 of 4 refinements raise it by more than 1.5x"),
    ],
)
def test_the_no_limit_reason_counts_the_rises_in_words(errors, phrase):
    """The reason says how many refinements raise the error, in a sentence that reads."""
    estimate = estimate_order(HS[: len(errors)], errors)
    assert estimate.verdict == OrderVerdict.NO_LIMIT
    assert estimate.reason.endswith(phrase), estimate.reason
    assert "%" not in estimate.reason


def test_superconvergence_and_failure_against_an_expected_order():
    assert estimate_order(HS, HS**3, expected=2).verdict == OrderVerdict.SUPERCONVERGENT
    assert estimate_order(HS, HS**0.5, expected=1).verdict == OrderVerdict.FAIL


def test_too_few_asymptotic_levels():
    # three usable levels whose local orders (0.15, then 3.2) disagree
    estimate = estimate_order(HS[:4], [1.0, 0.9, 0.1, 1e-16], floor=1e-16)
    assert estimate.verdict == OrderVerdict.PRE_ASYMPTOTIC
    assert estimate.dropped == {3: "at or past the precision floor: within a factor 10 of 1e-16"}


def test_bad_input():
    with pytest.raises(InvalidInputError, match="at least 3 step sizes"):
        estimate_order([0.5, 0.25], [1.0, 0.5])
    with pytest.raises(InvalidInputError, match="step sizes must be finite and positive"):
        estimate_order([0.5, 0.0, 0.1], [1.0, 0.5, 0.1])
    with pytest.raises(InvalidInputError, match="errors must be finite and non-negative"):
        estimate_order([0.5, 0.25, 0.1], [1.0, np.nan, 0.1])


def test_richardson_recovers_order_and_limit():
    limit = np.array([1.0, -2.0])
    hs = [0.1, 0.05, 0.025]
    values = [limit + 0.7 * h**2 + 0.3 * h**3 for h in hs]
    estimate = richardson(hs, values)
    assert estimate.order == pytest.approx(2, abs=0.1)
    assert np.abs(estimate.limit - limit).max() <= estimate.error_bound
    with pytest.raises(InvalidInputError, match="constant ratio"):
        richardson([0.1, 0.05, 0.02], values)


def test_real_rk4_errors_in_float64_pass_and_the_rounding_floor_is_dropped():
    from solvers import backend
    from solvers.integrators.tableaux import RK4, rk_step

    bk = backend("float64")
    steps = [2**k for k in range(2, 13)]
    errors = []
    for n in steps:
        u, h = np.array([1.0]), 1.0 / n
        for i in range(n):
            u = rk_step(bk, lambda s, v: -v * s, h * i, u, h, RK4)
        errors.append(abs(u[0] - np.exp(-0.5)))
    estimate = estimate_order([1 / n for n in steps], errors, expected=4, floor=1.1e-16)
    assert estimate.verdict == OrderVerdict.PASS
    # 2^-10 .. 2^-12 are at the rounding floor (errors 7e-16 to 2e-15, growing)
    assert {8, 9, 10} <= set(estimate.dropped)
    assert all(estimate.dropped[i].startswith("at or past") for i in (8, 9, 10))
