"""assert_order, the pytest helper for users' own order checks."""

from __future__ import annotations

import numpy as np
import pytest

from convergence.testing import assert_order

HS = 2.0 ** -np.arange(1, 8)


def test_a_second_order_sequence_passes_and_returns_its_estimate():
    estimate = assert_order(HS, 3 * HS**2, expected=2)
    assert estimate.order == pytest.approx(2)


def test_a_wrong_order_fails_with_the_whole_estimate():
    with pytest.raises(AssertionError, match=r"expected order 2, got 0\.5.*verdict FAIL"):
        assert_order(HS, HS**0.5, expected=2)
