"""The softmax's reach (docs/schemes.md section 7): the distance to the nearest complex
singularity of a row's softmax along the linearised flow, checked against the zero of
exp(s_m) + exp(s_j) found in complex arithmetic, and the reference's steps capped by it
on a flow whose attention switches within a small fraction of the steps it took before."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solvers import backend, solve_reference
from solvers.reference.softmax_reach import softmax_reach
from tests.scipy_truth import dop853_final_state
from tests.switching_flow import growing_gated_flow


class LinearScores:
    """A stand-in flow with one row of scores s0 + c x, x the state's one entry: the
    linear model the reach assumes, made exact."""

    bk = backend("float64")

    def __init__(self, scores: list[float], rates: list[float]) -> None:
        self.scores, self.rates = np.array(scores), np.array(rates)

    def size(self, x: np.ndarray) -> float:
        return float(np.max(np.abs(x)))

    def error_scale(self, u: np.ndarray) -> float:
        return max(1.0, self.size(u))

    def attention_scores(self, n, t, u):
        return self.scores + self.rates * u[0, 0]


class MovingWeights(LinearScores):
    """Scores that move with the time alone (weights under SmoothControls): s0 + c t."""

    def attention_scores(self, n, t, u):
        return self.scores + self.rates * t


def _nearest_zero(scores: list[float], rates: list[int]) -> float:
    """The nearest complex tau with sum_j exp(s_j + c_j tau) = 0, for integer rates c_j >= 0:
    the roots z of the polynomial sum_j exp(s_j) z^c_j, tau = log z + 2 pi i k."""
    degree = max(rates)
    coefficients = np.zeros(degree + 1, dtype=complex)
    for score, rate in zip(scores, rates, strict=True):
        coefficients[degree - rate] += math.exp(score)
    roots = np.roots(np.trim_zeros(coefficients, "b"))
    return min(abs(np.log(z) + 2j * math.pi * k) for z in roots for k in range(-3, 4))


ONE, ZERO = np.ones((1, 1)), np.zeros((1, 1))


def test_the_reach_is_the_nearest_zero_of_the_leading_pair():
    scores, rates = [2.0, 0.5, -1.0], [1.0, 4.0, -3.0]
    flow = LinearScores(scores, rates)
    reach = softmax_reach(flow, 0, 0.0, np.zeros((1, 1)), np.ones((1, 1)))
    nearest = []
    for j in (1, 2):  # key 0 leads; its sum with key j vanishes at tau (complex)
        gap, closing = scores[0] - scores[j], rates[0] - rates[j]
        tau = (1j * math.pi - gap) / closing
        pair = np.exp(scores[0] + rates[0] * tau) + np.exp(scores[j] + rates[j] * tau)
        assert abs(pair) < 1e-12 * np.exp(scores[0] + rates[0] * tau.real)
        nearest.append(abs(tau))
    assert reach == pytest.approx(min(nearest), rel=1e-6)


def test_keys_close_below_the_leader_are_taken_together():
    """K keys ln K below the leader, all at one rate: the sum's nearest zero is at pi / c,
    not at the pair's sqrt(ln^2 K + pi^2) / c (1.96 times further at K = 196)."""
    for keys in (10, 196):
        scores, rates = [math.log(keys)] + [0.0] * keys, [0] + [1] * keys
        reach = softmax_reach(LinearScores(scores, rates), 0, 0.0, np.zeros((1, 1)), ONE)
        assert reach == pytest.approx(_nearest_zero(scores, rates), rel=1e-9)


def test_the_reach_is_within_the_measured_factor_of_the_nearest_zero():
    """Random rows of 2 to 11 keys with integer rates against the polynomial's roots: the
    pair and cluster models never put the zero more than 1.6 times too far (measured
    worst 1.51 over 3000 rows), so a step of half the reach stays inside it."""
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(300):
        keys = int(rng.integers(2, 12))
        rates = [int(c) for c in rng.integers(0, 4, keys)]
        if len(set(rates)) < 2:
            continue
        scores = list(rng.normal(0, 2, keys))
        reach = softmax_reach(LinearScores(scores, rates), 0, 0.0, np.zeros((1, 1)), ONE)
        worst = max(worst, reach / _nearest_zero(scores, rates))
    assert worst <= 1.6


def test_weights_that_move_with_time_limit_the_reach():
    """Under SmoothControls the scores move with t even where the state stands still."""
    scores, rates = [1.0, 0.0], [0.0, 3.0]
    reach = softmax_reach(MovingWeights(scores, rates), 0, 0.0, np.zeros((1, 1)), ZERO)
    assert reach == pytest.approx(math.sqrt(1 + math.pi**2) / 3, rel=1e-6)


def test_masked_keys_and_still_scores_do_not_limit_the_reach():
    flow = LinearScores([0.0, -math.inf, -math.inf], [1.0, 5.0, 0.0])
    assert softmax_reach(flow, 0, 0.0, np.zeros((1, 1)), np.ones((1, 1))) == math.inf
    moving = LinearScores([0.0, -1.0], [1.0, 5.0])
    assert softmax_reach(moving, 0, 0.0, np.zeros((1, 1)), np.zeros((1, 1))) == math.inf


@pytest.mark.parametrize("tol", [1e-6, 1e-8])
def test_the_estimate_holds_where_the_softmax_switches_within_a_step(tol):
    # Before the reach capped the steps, one step of 3.4e-4 jumped a switch of width
    # about 5e-6: the tableau's differences fell steadily to 2e-7 while every column was
    # off by 4e-5, and the final state was off by 1.0e-3 (tol 1e-8) and 0.16 (tol 1e-6)
    # under estimates of 3.8e-5 and 6.7e-3. DOP853 at 1e-13 is within 1e-8 of an arb
    # reference at 22 digits (tol 1e-18) here.
    problem = growing_gated_flow()
    truth = dop853_final_state(problem, 1e-13)
    result = solve_reference(problem, tol=tol)
    assert np.abs(result.states[-1] - truth).max() <= result.error[-1]


def test_the_reach_lets_the_tolerance_control_the_error():
    """At tol 1e-8 the state is 1.2e-7 from the truth (|u| about 160); without the cap,
    with the diagonal estimate that still covers the error, it is 1.5e-5 (estimate
    5.2e-5): the steps that jump a switch are off by far more than the tolerance
    asks, and the estimate holds only by its caution."""
    problem = growing_gated_flow()
    truth = dop853_final_state(problem, 1e-13)
    result = solve_reference(problem, tol=1e-8)
    assert np.abs(result.states[-1] - truth).max() <= 100 * 1e-8
