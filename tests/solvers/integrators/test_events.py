"""locate_event on pre-activations given in closed form: the earliest crossing, time that
only moves forward, and bounded work (docs/schemes.md section 4)."""

from __future__ import annotations

import numpy as np

from solvers import backend
from solvers.integrators.events import locate_event

BK = backend("float64")


def _trial(slopes: np.ndarray, calls: list[float]):
    """z_i(tau) = 1 - slopes_i tau, the state being z itself."""

    def trial(tau):
        calls.append(float(tau))
        z = 1.0 - slopes * tau
        return z, z

    return trial


def test_the_earliest_of_several_crossings_is_found():
    calls: list[float] = []
    slopes = np.array([1.5, 4.0, 2.0])  # roots 2/3, 1/4, 1/2
    positive, silent = np.ones(3, bool), np.zeros(3, bool)
    offset, _, unit = locate_event(
        BK, _trial(slopes, calls), np.ones(3), 1.0, positive, silent, "test"
    )
    assert unit == (1,) and abs(offset - 0.25) <= 1e-15
    assert all(0 < tau <= 1 for tau in calls)


def test_crossings_together_at_the_end_of_the_step_settle():
    """Two units reach zero at the step's end: the root of the first is the bracket's end,
    where the second has crossed too; the search tries the second and stops there instead
    of repeating the same search until its budget runs out."""
    calls: list[float] = []
    slopes = np.array([1.0, 1.0, 0.5])
    positive, silent = np.ones(3, bool), np.zeros(3, bool)
    offset, _, unit = locate_event(
        BK, _trial(slopes, calls), np.ones(3), 1.0, positive, silent, "test"
    )
    assert offset == 1.0 and unit in ((0,), (1,))
    assert len(calls) < 50
