"""Grid studies: trapezoid spectral on periodic data, midpoint order 2, Gauss-Legendre spectral."""

from __future__ import annotations

import numpy as np
import pytest

from convergence.grid import grid_study
from convergence.order import OrderVerdict
from solvers import InvalidInputError
from solvers.space.kernels import ContinuousLayer, SeriesKernel
from tests.convergence.round_trip import round_trip


def _case(family):
    return ContinuousLayer.random(1, heads=2, family=family), SeriesKernel.random(
        np.random.default_rng(2), family
    )


def test_trapezoid_on_periodic_data_is_spectral_and_below_1e_12_by_32_points():
    study = grid_study(*_case("fourier"), "trapezoid", [4, 8, 16, 32])
    assert study.spectral and study.errors[-1] < 1e-12
    round_trip(study)


@pytest.mark.parametrize("axis", ["all", "tokens", "features"])
def test_midpoint_on_non_periodic_data_has_order_two(axis):
    study = grid_study(*_case("legendre"), "midpoint", [6, 12, 24, 48], axis=axis, expected=2)
    assert study.estimate.verdict == OrderVerdict.PASS and not study.spectral
    assert abs(study.estimate.order - 2) <= 0.15


def test_gauss_legendre_is_spectral():
    study = grid_study(*_case("legendre"), "gauss-legendre", [4, 8, 16])
    assert study.spectral and study.errors[-1] < 1e-13
    assert study.estimate.verdict == OrderVerdict.FLOOR  # it reaches float64 rounding by 16 points


def test_grid_study_rejects():
    layer, f = _case("fourier")
    with pytest.raises(InvalidInputError, match="unknown axis 'time'"):
        grid_study(layer, f, "midpoint", [4, 8, 16], axis="time")
    with pytest.raises(InvalidInputError, match="at least 3 sizes"):
        grid_study(layer, f, "midpoint", [4, 8])
