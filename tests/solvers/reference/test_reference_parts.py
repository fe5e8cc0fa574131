"""The reference's parts, each alone: ODEX's step-size rule, the truncation estimate, one
attempted step on a flow known exactly, the carried global error on a linear field, and the
cut of a step at its first kink (docs/schemes.md sections 4 and 7)."""

from __future__ import annotations

import dataclasses
import math
import re
import sys
from itertools import pairwise
from types import SimpleNamespace

import numpy as np
import pytest

from solvers import LayerWeights, PiecewiseControls, Problem, backend, solve, solve_reference
from solvers.equation.exact import uniform_attention_solution
from solvers.equation.flow import LayerFlow
from solvers.integrators.tableaux import extrapolation_evaluations
from solvers.methods.kinks import ActivationPattern
from solvers.methods.stepping import Step
from solvers.reference.global_error import GlobalError
from solvers.reference.layer_system import layer_system
from solvers.reference.step_control import (
    GROWTH_LIMITS,
    SAFETY,
    SAFETY_ERROR,
    StepControl,
    step_factor,
)
from solvers.reference.stepper import TRUNCATION_SAFETY, attempt, truncation
from solvers.reference.system import System
from tests.exact_layers import uniform_attention_linear_ffn
from tests.scipy_truth import dop853_layer

BK = backend("float64")


@pytest.mark.parametrize("column", [2, 5, 12])
def test_the_step_factor_is_odex_rule(column):
    """h_new / h = SAFETY (SAFETY_ERROR / err)^(1 / (2j - 1)) inside the limits: SAFETY at
    err = SAFETY_ERROR, falling as err grows, the limits at err 0 and inf."""
    low, high = GROWTH_LIMITS
    assert step_factor(SAFETY_ERROR, column, low, high) == pytest.approx(SAFETY, rel=1e-15)
    err = 1e-3
    expected = SAFETY * (SAFETY_ERROR / err) ** (1 / (2 * column - 1))
    assert step_factor(err, column, low, high) == pytest.approx(min(high, expected), rel=1e-15)
    ratios = np.logspace(-6, 6, 25)
    factors = [step_factor(r, column, low, high) for r in ratios]
    assert all(a >= b for a, b in pairwise(factors))
    assert step_factor(0.0, column, low, high) == high
    assert step_factor(math.inf, column, low, high) == low


def test_the_next_column_is_the_one_of_least_work_per_unit_step():
    """Accepted at column j: j - 1 when its step per evaluation is clearly larger; j + 1
    when the target column was met at its own column."""
    control = StepControl(BK.unit_roundoff, 1e-10, max_step=1.0)
    j = control.columns
    control.accepted(0.5, j, {j - 1: 1e-8, j: 0.9})  # j - 1 would take a far longer step
    assert control.columns == j - 1
    control = StepControl(BK.unit_roundoff, 1e-10, max_step=1.0)
    j = control.columns
    control.accepted(0.5, j, {j - 1: 5.0, j: 0.5})
    assert control.columns == j + 1
    ratio = extrapolation_evaluations(j + 1) / extrapolation_evaluations(j)
    own = 0.5 * step_factor(0.5, j, *GROWTH_LIMITS)
    assert control.h == pytest.approx(min(0.5 * GROWTH_LIMITS[1], own * ratio))


def test_a_difference_that_cancels_by_chance_does_not_pass_for_convergence():
    """d_j far below what d_j-1 and d_j-2 predict: the prediction is taken instead."""
    differences = [1e-2, 1e-4, 1e-14]
    assert truncation(differences) == pytest.approx(TRUNCATION_SAFETY * 1e-4 * 1e-2)
    assert truncation([1e-2, 1e-4, 1e-3]) == pytest.approx(TRUNCATION_SAFETY * 1e-3)


def test_at_high_columns_the_diagonal_difference_bounds_the_error():
    """One step of 1/8 of two pre-LN GELU layers at 42 digits, columns up to 16: there
    d_j (the error of T_j,j-1) falls below the true error of T_jj even doubled, and
    |T_jj - T_j-1,j-1|, which `truncation` takes too, bounds it. The truth: fixed-step
    extrapolation of order 16 at 50 digits in 16 steps."""
    from solvers.methods.extrapolation import Extrapolation

    layers = [LayerWeights.random(8, 2, 16, seed, activation="gelu") for seed in range(2)]
    u0 = np.random.default_rng(0).standard_normal((4, 8))
    problem = Problem(u0, PiecewiseControls(layers), 0.125, norm="pre")
    high = backend("mpmath", 50)
    truth = solve(problem, Extrapolation(levels=8), 128, high)
    bk = backend("mpmath", 42)
    errors, d, diagonal = _tableau_errors(problem, bk, 0.125, 16, high, truth)
    j = 16
    assert errors[j - 1] > TRUNCATION_SAFETY * d[j - 2]  # d_j fails
    assert errors[j - 1] <= diagonal[j - 2]  # the diagonal difference holds


def test_on_a_long_step_the_diagonal_difference_bounds_the_error_at_every_column():
    """One step of length 1 of the first of two GELU layers without norms (d 4, d_ff 8,
    3 tokens, seed 1 of a review's sweep): from column 8 on, T_jj is no closer than
    T_j,j-1 and twice d_j is 4.5 times below its error (a float64 reference at tol 1e-10
    took that step and reported 4 times less than its true error); |T_jj - T_j-1,j-1|
    bounds the error of T_jj at every column. The truth: DOP853 at rtol 1e-13 (about
    1e-14 off here)."""
    rng = np.random.default_rng(1)
    layers = [LayerWeights.random(4, 2, 8, rng, activation="gelu", bias_scale=0.5) for _ in "ab"]
    problem = Problem(rng.standard_normal((3, 4)), PiecewiseControls(layers), 2, norm="none")
    flow = LayerFlow.from_problem(problem, BK)
    truth = dop853_layer(flow, 0, np.array(problem.u0), 1e-13).y[:, -1].reshape(3, 4)
    errors, d, diagonal = _tableau_errors(problem, BK, 1.0, 10, BK, truth)
    assert errors[7] > 4 * TRUNCATION_SAFETY * d[6]  # d_8 fails at column 8
    for j in range(2, 11):
        assert errors[j - 1] <= truncation(d[: j - 1], diagonal[j - 2])


def _tableau_errors(problem, bk, h, columns, high, truth):
    """The errors of T_11, ..., T_cc of one step of size h from u0 in bk, measured in
    `high` against `truth`, and the differences d_j = |T_jj - T_j,j-1| and
    |T_jj - T_j-1,j-1| (j = 2, ..., c)."""
    from solvers.integrators.tableaux import extrapolation_rows

    with bk.active():
        flow = LayerFlow.from_problem(problem, bk)
        field = lambda t, u: flow.field(0, t, u)  # noqa: E731
        start, size = bk.asarray(0), bk.asarray(h)
        rows = list(extrapolation_rows(bk, field, start, bk.asarray(problem.u0), size, columns))
    with high.active():
        exact = high.asarray(truth)

        def size_of(x) -> float:
            return float(np.max(np.abs(high.to_float64(high.asarray(x) - exact))))

        errors = [size_of(value) for value, _ in rows]
    with bk.active():
        d = [float(np.max(np.abs(bk.to_float64(v - n)))) for v, n in rows[1:]]
        diagonal = [float(np.max(np.abs(bk.to_float64(b[0] - a[0])))) for a, b in pairwise(rows)]
    return errors, d, diagonal


def test_an_accepted_attempt_is_within_its_estimate_of_the_exact_flow():
    """Uniform attention with a linear FFN (docs/model.md section 5): one attempted step of
    the whole first layer, accepted, is no further from the exact flow than its own
    estimate, which is within the tolerance; a tolerance the first columns cannot meet
    in that step is refused with ratios above 1."""
    problem = dataclasses.replace(uniform_attention_linear_ffn(), t_final=1)
    flow = LayerFlow.from_problem(problem, BK)
    u = problem.initial_state(BK)
    tol, scale = 1e-10, flow.error_scale(u)
    control = StepControl(BK.unit_roundoff, tol, max_step=1.0)
    system, t, h = layer_system(flow, 0), BK.asarray(0), BK.asarray(1.0)
    tried = attempt(system, t, u, h, pattern=None, tol=tol, scale=scale, control=control)
    assert tried.value is not None
    error = float(np.abs(tried.value - uniform_attention_solution(problem, BK)).max())
    assert error <= tried.estimate <= tol * scale
    assert tried.evaluations == extrapolation_evaluations(tried.column)
    control.columns = 2
    refused = attempt(system, t, u, h, pattern=None, tol=1e-14, scale=scale, control=control)
    assert refused.value is None and min(refused.ratio.values()) > 1


@pytest.mark.parametrize("rate", [2.0, -1.0])
def test_the_carried_error_grows_as_the_flow_stretches_it(rate):
    """On u' = rate u every direction is stretched at `rate`: the carried error grows by
    exp(h rate) over a step of h when the flow expands, and is kept when it contracts."""
    system, u = System(BK, lambda t, u, pattern: rate * u), np.ones((2, 3))
    carried = GlobalError()
    assert carried.carry(system, Step(0, 0.0, 0.1, u, u), 1e-9, np.full((2, 3), 1e-9)) == 0
    assert carried.error == 1e-9
    assert carried.carry(system, Step(0, 0.1, 0.25, u, u), 2e-9, np.full((2, 3), 2e-9)) == 2
    growth = math.exp(0.25 * max(rate, 0.0))
    assert carried.error == pytest.approx(1e-9 * growth + 2e-9, rel=1e-6)
    np.testing.assert_allclose(carried.direction, 1e-9 * growth + 2e-9, rtol=1e-6)


def test_a_step_is_cut_at_its_first_kink_and_the_pattern_flips_there():
    """u(t) = u0 + v t crosses thresholds c at t = (c - u0) / v: the first is (1.5 - 1) / 2
    = 0.25 for unit 1, before unit 0's (2 - 0) / 1 = 2; the step ends there and unit 1
    switches on for the steps that follow."""
    thresholds, u0, v = np.array([[2.0, 1.5, -1.0]]), np.array([[0.0, 1.0, 0.0]]), 2.0
    z, weights = (lambda t, u: u - thresholds), np.ones(thresholds.shape)
    pattern = ActivationPattern.watch(BK, z, 0.0, u0, weights, BK.error_scale)
    assert pattern.positive.tolist() == [[False, False, True]]
    velocity = np.array([[1.0, v, 1.0]])

    def trial(tau):
        return u0 + velocity * tau

    size, state, unit = pattern.cut(0.0, u0, 1.0, trial(1.0), trial)
    assert unit == (0, 1) and size == pytest.approx(0.25, abs=1e-14)
    np.testing.assert_allclose(state, trial(0.25), atol=1e-14)
    assert pattern.positive.tolist() == [[False, True, True]]
    after = state + velocity * 0.1  # from the kink on, nothing crosses within 0.1
    assert pattern.cut(0.25, state, 0.1, after, lambda tau: state + velocity * tau) == (
        0.1,
        after,
        None,
    )


def test_a_smooth_layer_has_no_pattern():
    layer = SimpleNamespace(activation="gelu", w2=np.ones((2, 2)))
    flow = SimpleNamespace(bk=BK, controls=SimpleNamespace(acting_on=lambda n: [layer]))
    assert ActivationPattern.start(flow, 0, 0.0, np.ones((1, 2))) is None


@pytest.mark.parametrize("digits", [5, 30, 45, 60, 200])
def test_guard_digits_are_the_fewest_that_keep_the_first_columns_usable(digits):
    """At D digits the reference works at D + G to 10^-D / 10; with G digits the first
    column for that tolerance and the next (at most MAX_COLUMNS) keep their rounding
    within the share of the tolerance, with G - 1 they would not (unless G is the floor);
    fixed formats keep their precision and their 1000 u."""
    from solvers.reference.guard_digits import GUARD_FLOOR, reference_precision
    from solvers.reference.step_control import (
        MAX_COLUMNS,
        ROUNDING_SHARE,
        column_rounding,
        first_column,
    )

    bk = backend("mpmath", digits)
    working, tol = reference_precision(bk, None)
    assert tol == pytest.approx(10.0**-digits / 10)
    assert reference_precision(bk, 1e-300)[1] == tol  # the floor
    columns = min(first_column(tol) + 1, MAX_COLUMNS)
    assert column_rounding(columns, working.unit_roundoff) <= ROUNDING_SHARE * tol
    guard = working.digits - digits
    if guard > GUARD_FLOOR:
        fewer = bk.widened(guard - 1)
        assert column_rounding(columns, fewer.unit_roundoff) > ROUNDING_SHARE * tol
    for fixed in ("float32", "float64", "longdouble"):
        fixed_bk = backend(fixed)
        assert reference_precision(fixed_bk, None) == (fixed_bk, 1000 * fixed_bk.unit_roundoff)


@pytest.mark.parametrize("assess", [False, True])
@pytest.mark.parametrize("name", ["mpmath", "arb"])
def test_a_reference_beyond_float64s_normal_range_is_refused_naming_the_digits_it_can_have(
    name, assess
):
    """The reference carries its tolerance, rounding allowance and unit roundoff as float64
    numbers: at D digits its floor 10^-D / 10, the unit roundoff its rounding allows and
    that of its D + G working digits must be normal floats (at least 2.2e-308; 10^-330 is
    0.0), and with `assess` those of its tighter run too. Beyond, a refusal before any
    run that names the most digits; at those digits a reference runs and knows its error
    to within them, and at one more it is refused."""
    from solvers.errors import InvalidInputError
    from solvers.reference.guard_digits import reference_precision

    problem = Problem(
        np.random.default_rng(0).standard_normal((2, 4)),
        PiecewiseControls([LayerWeights.random(4, 2, 8, 0, activation="gelu")]),
        1e-4,  # one step at ~300 digits
        norm="pre",
    )
    with pytest.raises(InvalidInputError, match=r"at most \d+ digits") as refused:
        solve_reference(problem, backend=backend(name, 330), assess=assess)
    most = int(re.search(r"at most (\d+) digits", str(refused.value)).group(1))
    working, tol = reference_precision(backend(name, most), None)
    assert min(working.unit_roundoff, tol) >= sys.float_info.min
    with pytest.raises(InvalidInputError, match=f"at most {most} digits"):
        solve_reference(problem, backend=backend(name, most + 1), assess=assess)
    result = solve_reference(problem, backend=backend(name, most), assess=assess)
    assert sys.float_info.min <= result.error[-1] <= 10.0 ** -(most - 1)


@pytest.mark.parametrize(
    ("name", "digits", "tol"),
    [
        ("float64", None, 1e-10),
        ("float64", None, 1000 * 2.0**-53 / 100),
        ("float64", None, 1e-19),
        ("float16", None, 1e-5),
        ("bfloat16", None, 1e-3),
        ("longdouble", None, 1e-18),
        ("mpmath", 30, 1e-33),
        ("arb", 30, 1e-25),
    ],
)
def test_an_assessment_runs_where_the_tighter_tolerance_is_above_the_floor(name, digits, tol):
    """The tighter run of an assessment works in the given number system where its
    floor allows `tol`, else in the cheapest wider one whose floor does (no narrower
    digits than asked; no cheaper fixed format of bk's range reaches the tolerance)."""
    from solvers.backends import registered
    from solvers.reference.guard_digits import (
        TOLERANCE_FLOOR,
        _seconds,
        reference_precision,
        tighter_precision,
    )

    bk = backend(name, digits)
    chosen = tighter_precision(bk, tol, 10**6)
    working, tolerance = reference_precision(chosen, tol)
    assert working.unit_roundoff <= bk.unit_roundoff
    assert tolerance == tol  # the floor allows it
    if chosen.digits is not None:  # variable precision: no digit to spare
        if chosen.digits > (bk.digits or 0):
            assert reference_precision(chosen.widened(-1), tol)[1] > tol
    else:
        assert chosen.largest >= bk.largest  # it holds bk's range
        if chosen != bk:
            assert TOLERANCE_FLOOR * bk.unit_roundoff > tol
            for other in registered(fixed_only=True):
                if other.largest >= bk.largest and other.unit_roundoff < bk.unit_roundoff:
                    cheaper = _seconds(other, 10**6) < _seconds(chosen, 10**6)
                    assert not cheaper or TOLERANCE_FLOOR * other.unit_roundoff > tol


@pytest.mark.parametrize(("size", "tighter"), [("small", "longdouble"), ("large", "float64x2")])
def test_a_float64_assessment_tightens_in_the_cheaper_of_long_double_and_float64x2(size, tighter):
    """The default tighter tolerance of a float64 reference, 1000 u / 100, is within long
    double's floor and float64x2's; the cheaper for the problem's multiply-adds takes it
    (docs/schemes.md section 7): long double on a small flow (2.3e3 multiply-adds an
    evaluation: 0.48 against 0.69 ms measured), float64x2 on a 64-token, d 64 one (3.7e6:
    4.2 against 12.6 ms)."""
    from solvers.reference.guard_digits import (
        TOLERANCE_FLOOR,
        multiply_adds,
        tighter_precision,
        tolerance_for,
    )
    from solvers.reference.solution import ASSESSMENT_RATIO

    tokens, d, heads, d_ff = (4, 8, 2, 16) if size == "small" else (64, 64, 4, 256)
    layers = [LayerWeights.random(d, heads, d_ff, seed) for seed in range(2)]
    u0 = np.random.default_rng(0).standard_normal((tokens, d))
    problem = Problem(u0, PiecewiseControls(layers), 2, norm="pre")
    assert multiply_adds(problem) == tokens * (4 * d * d + 2 * d * d_ff + 2 * tokens * d)
    tol = tolerance_for(backend("float64"), None) / ASSESSMENT_RATIO
    assert TOLERANCE_FLOOR * backend("longdouble").unit_roundoff <= tol
    assert tighter_precision(backend("float64"), tol, multiply_adds(problem)) == backend(tighter)
