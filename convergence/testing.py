"""Order checks for users' own test suites.

    from convergence.testing import assert_order

    def test_my_scheme_is_second_order():
        assert_order(step_sizes, errors, expected=2)

`assert_order` runs `estimate_order` and raises AssertionError with the whole estimate
(order, 95% interval, verdict, dropped levels and why) unless the verdict is one of
`accept` (PASS by default).
"""

from __future__ import annotations

from collections.abc import Sequence

from convergence.order import OrderEstimate, OrderVerdict, estimate_order


def assert_order(
    hs: Sequence[float],
    errors: Sequence[float],
    expected: float,
    *,
    tolerance: float = 0.1,
    floor: float = 0.0,
    accept: Sequence[str] = (OrderVerdict.PASS,),
) -> OrderEstimate:
    """Fail unless the errors converge at `expected` order (see estimate_order); return the
    estimate for further checks."""
    estimate = estimate_order(hs, errors, expected=expected, tolerance=tolerance, floor=floor)
    if estimate.verdict not in accept:
        lo, hi = estimate.interval
        dropped = "; ".join(f"level {k}: {v}" for k, v in estimate.dropped.items()) or "none"
        raise AssertionError(
            f"expected order {expected:g}, got {estimate.order:.4g} (95% interval "
            f"[{lo:.4g}, {hi:.4g}]), verdict {estimate.verdict}; dropped levels: {dropped}; "
            f"errors {list(errors)} at step sizes {list(hs)}"
        )
    return estimate
