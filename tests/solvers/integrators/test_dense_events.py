"""first_crossing on switching functions given in closed form along theta in [0, 1]: the
earliest departure from the pattern's side, a crossing and its return inside the step,
units switching together within the budget, units that start the step off their side,
and the root to the working precision (docs/schemes.md section 8)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from solvers import backend
from solvers.integrators.dense_events import first_crossing

BK = backend("float64")
DEGREE = 10


def _search(z, positive, silent=None, weights=1.0, budget=0.0, bk=BK):
    silent = np.zeros(positive.shape, bool) if silent is None else silent
    return first_crossing(bk, z, positive, silent, DEGREE, np.asarray(weights), budget)


def test_the_earliest_departure_is_found():
    def z(theta):  # roots 2/3, 1/4 (upward: off side), 1/2; unit 1 is off while below 0
        return np.array([1 - 1.5 * theta, theta - 0.25, 1 - 2 * theta])

    crossing = _search(z, np.array([True, False, True]))
    assert abs(crossing.theta - 0.25) <= 1e-15
    assert crossing.switching.tolist() == [False, True, False]
    assert np.allclose(crossing.rates, [-1.5, 1, -2])


def test_a_crossing_and_its_return_inside_the_step_are_seen():
    """z = (theta - 0.4)(theta - 0.43) is below 0 between 0.4 and 0.43 only: at both ends
    of the step the unit is on its (positive) side."""

    def z(theta):
        return np.array([(theta - 0.4) * (theta - 0.43), 1.0 + theta])

    crossing = _search(z, np.array([True, True]))
    assert crossing is not None and abs(crossing.theta - 0.4) <= 1e-14
    assert crossing.switching.tolist() == [True, False]


def test_a_shallow_dip_between_grid_points_is_seen():
    """The dip lasts 1e-3 of the step and falls between two points of the scan (spacing
    1/80): only the test for turns sees it."""
    roots = (0.5031, 0.5041)

    def z(theta):
        return np.array([(theta - roots[0]) * (theta - roots[1])])

    crossing = _search(z, np.array([True]))
    assert crossing is not None and abs(crossing.theta - roots[0]) <= 1e-13


def test_no_departure_no_crossing():
    assert _search(lambda theta: np.array([2 + theta, -1 - theta]), np.array([True, False])) is None


def test_a_unit_returning_to_its_side_is_no_event():
    """A unit switched a hair before its root starts on the old side and returns."""
    crossing = _search(lambda theta: np.array([theta - 1e-14]), np.array([True]))
    assert crossing is None


def test_silent_units_are_ignored():
    def z(theta):
        return np.array([0.3 - theta, 0.6 - theta])

    crossing = _search(z, np.array([True, True]), silent=np.array([True, False]))
    assert abs(crossing.theta - 0.6) <= 1e-15


def test_close_crossings_switch_together_within_the_budget():
    """Roots 0.3, 0.3 + 1e-4 and 0.5: switching the second at 0.3 costs
    w |z'| delta^2 / 2 = 5e-9; the third would cost 0.02."""

    def z(theta):
        return np.array([0.3 - theta, 0.3001 - theta, 0.5 - theta])

    positive = np.ones(3, bool)
    alone = _search(z, positive, budget=1e-9)
    together = _search(z, positive, budget=1e-8)
    assert alone.switching.tolist() == [True, False, False]
    assert together.switching.tolist() == [True, True, False]


def test_a_unit_left_off_its_side_crosses_at_the_start():
    """A unit switched before its crossing, or where it only dipped across zero on a dense
    output, starts the next step off its side: if it does not come to its side during
    the step it crosses at theta = 0 (switched back where it stands), before any later
    crossing."""

    def z(theta):
        return np.array([-1e-9 - theta**2, 0.5 - theta])

    crossing = _search(z, np.array([True, True]))
    assert crossing.theta == 0 and crossing.switching.tolist() == [True, False]


def test_a_unit_at_zero_at_the_start_is_watched():
    """A unit at zero where the step starts (within rounding) and moving off its side
    leaves at once; one coming to its side from off it is watched from there on."""
    at_zero = _search(lambda theta: np.array([-1e-17 - theta, 1 - theta]), np.array([True, True]))
    assert at_zero.switching.tolist() == [True, False] and abs(at_zero.theta) <= 1e-15

    def arriving(theta):  # off its side until 0.1, on it until 0.6
        return np.array([(theta - 0.1) * (0.6 - theta)])

    crossing = _search(arriving, np.array([True]))
    assert crossing is not None and abs(crossing.theta - 0.6) <= 1e-14


def test_the_root_is_polished_to_the_working_precision():
    bk = backend("mpmath", 40)
    third = bk.asarray(Fraction(1, 3))
    with bk.active():
        crossing = _search(lambda theta: np.array([third - theta]), np.array([True]), bk=bk)
        assert abs(bk.to_float64((crossing.theta - third) * 10**38)) <= 1
