"""The refinement engine (convergence.refinement) on sequences whose limits are known:
a first-order sequence against its limit, and a second-order one by successive
differences; and the floor, in unit roundoffs of the number system asked for."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest

from convergence.order import OrderVerdict
from convergence.refinement import FLOOR_ROUNDOFFS, refine, rounding_floor
from solvers import backend
from solvers.errors import InvalidInputError


def _distance(value: float, truth: float) -> float:
    return abs(value - truth)


def test_a_first_order_sequence_against_its_limit():
    """(1 + 1/n)^n -> e with error e / (2n) + O(1/n^2): order 1 against the limit."""
    refinement = refine(lambda n: (1 + 1 / n) ** n, [64, 8, 16, 32, 128], _distance, truth=math.e)
    assert refinement.levels == [8, 16, 32, 64, 128]
    assert refinement.hs == [1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128]
    assert refinement.distances[0] == pytest.approx(abs((9 / 8) ** 8 - math.e))
    estimate = refinement.estimate(1.0)
    assert estimate.verdict == OrderVerdict.PASS
    assert estimate.order == pytest.approx(1.0, abs=0.1)
    # judged against the wrong order, the same levels must not pass
    assert refinement.estimate(2.0).verdict == OrderVerdict.FAIL


def test_successive_differences_drop_the_finest_level():
    """The trapezoid rule for the integral of exp on [0, 1] converges at order 2; the
    differences of successive levels at the same order, reported at the coarser level."""

    def trapezoid(n: int) -> float:
        xs = [k / n for k in range(n + 1)]
        return sum((math.exp(a) + math.exp(b)) / (2 * n) for a, b in pairwise(xs))

    refinement = refine(trapezoid, [4, 8, 16, 32, 64], _distance, successive=True)
    assert refinement.levels == [4, 8, 16, 32]
    assert refinement.truths[-1] == trapezoid(64)
    assert refinement.estimate(2.0).verdict == OrderVerdict.PASS


def test_the_floor_is_in_the_number_systems_unit_roundoff():
    """A floor follows the backend, not float64: float32's is 2^29 times float64's."""
    f32, f64 = backend("float32"), backend("float64")
    assert rounding_floor(f64.unit_roundoff, 3.0) == FLOOR_ROUNDOFFS * 2.0**-53 * 3.0
    assert rounding_floor(f32.unit_roundoff, 3.0) / rounding_floor(f64.unit_roundoff, 3.0) == (
        2.0**29
    )
    # a sequence that stops at 1e-6 is at float32's floor and fitted without those levels
    values = {n: 1 / n**2 + 1e-6 for n in (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)}
    refinement = refine(values.get, list(values), _distance, truth=0.0)
    floored = refinement.floored(rounding_floor(f32.unit_roundoff, 1.0) * 200, "float32 floor")
    estimate = floored.estimate(2.0)
    assert any("float32 floor" in reason for reason in estimate.dropped.values())
    assert estimate.verdict == OrderVerdict.PASS


def test_a_refinement_needs_one_truth():
    with pytest.raises(InvalidInputError, match="either a truth or successive"):
        refine(float, [1, 2, 3], _distance)
    with pytest.raises(InvalidInputError, match="either a truth or successive"):
        refine(float, [1, 2, 3], _distance, truth=0.0, successive=True)
