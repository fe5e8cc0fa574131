"""time_step_study and splitting_table on a manufactured post-LN problem, in float64."""

from __future__ import annotations

import pytest

from convergence.order import OrderVerdict
from convergence.time_step import SPLITTING_METHODS, splitting_table, time_step_study
from solvers import InvalidInputError
from tests.convergence.round_trip import round_trip
from tests.exact_layers import manufactured_post_ln

EXPECTED = {"lie": 1, "strang-rk2": 2, "projected-rk4": 4, "ambient-rk4": 1}
STEPS = {"lie": [16, 32, 64, 128, 256, 512]}  # Lie reaches its asymptotic range by 512
"""Step counts per method where the default [8, ..., 256] is still pre-asymptotic."""


@pytest.fixture(scope="module")
def problem():
    return manufactured_post_ln()


@pytest.mark.parametrize("reference", ["exact", "richardson"])
def test_orders_pass_against_the_exact_solution_and_without_a_reference(problem, reference):
    studies = [
        time_step_study(
            problem,
            [name],
            STEPS.get(name, [8, 16, 32, 64, 128, 256]),
            reference=reference,
            expected=EXPECTED,
            configuration={"seed": 1},
        )
        for name in EXPECTED
    ]
    for method in (m for study in studies for m in study.methods):
        assert method.estimate.verdict == OrderVerdict.PASS, (method.method, method.estimate)
        assert abs(method.estimate.order - EXPECTED[method.method]) <= 0.1
        assert len(method.max_abs_per_layer[0]) == 3  # t = 0, 1, 2
        assert len(method.per_token_max[0]) == 5
    record = round_trip(studies[0])
    assert record["configuration"] == {"norm": "post", "t_final": 2.0, "seed": 1}


def test_splitting_table_covers_every_variant(problem):
    table = splitting_table(problem, [16, 32, 64, 128], reference="richardson")
    assert [m.method for m in table.methods] == list(SPLITTING_METHODS)
    orders = {m.method: m.estimate.order for m in table.methods}
    assert abs(orders["strang-rk2"] - 2) < 0.15 and abs(orders["strang-rk2-ambient"] - 1) < 0.15
    assert abs(orders["strang-euler"] - 1) < 0.15
    # Lie is first order whatever its sub-solvers: the splitting error, not theirs
    for name in SPLITTING_METHODS:
        if name.startswith("lie"):
            assert abs(orders[name] - 1) < 0.15, (name, orders[name])


def test_study_rejects(problem):
    with pytest.raises(InvalidInputError, match="at least 3 step counts"):
        time_step_study(problem, ["lie"], [8, 16])
    with pytest.raises(InvalidInputError, match="unknown method 'heun'"):
        time_step_study(problem, ["heun"], [8, 16, 32])
    with pytest.raises(InvalidInputError, match="unknown reference 'oracle'"):
        time_step_study(problem, ["lie"], [8, 16, 32], reference="oracle")
