"""No claim verdict is a literal: records swapped for ones that should flip a verdict flip it.

The records are those of every kind's tiny study (tests.reports.studies.TINY), stored as
JSON and read back; the exactness claims use small synthetic checks. Each scenario edits
the records (an order estimate's verdict, a defect above its tolerance, a distance above
its threshold) and names the verdict the report must then print. The last test checks
that every experiment that speaks to a claim is driven to each verdict that claim's rule
can give.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from convergence.depth_family import FamilyVerdict
from convergence.network_limit.batch import Share, Spread
from convergence.network_limit.decisions import LimitDecisions
from convergence.order import OrderVerdict
from properties.claim_check import CheckVerdict, ClaimCheck
from properties.stability.stability_point import PointVerdict
from reports.claims import Claim, ClaimVerdict, Evidence
from reports.experiments import EXPERIMENTS
from reports.experiments.base import Record
from reports.experiments.claims import ExactnessResult
from reports.experiments.limits import CLOSE_TO_LIMIT, SAME_FLOW_DISTANCE
from reports.experiments.network.verdict import CLOSE_TO_OWN_LIMIT
from reports.runner import run_case
from reports.study import parse_study
from tests.reports.studies import TINY, tiny_study

VERIFIED, QUALIFIED, REFUTED = ClaimVerdict

RULES = {
    Claim.PROJECTION_THEOREM: {VERIFIED, REFUTED},
    Claim.TORCH_LAYER_NORM: {VERIFIED, QUALIFIED},
    Claim.RELU_PROJECTION: {VERIFIED, REFUTED},
    Claim.LIE_IS_TRANSFORMER: {VERIFIED, REFUTED},
    Claim.MULTI_HEAD: {VERIFIED, REFUTED},
    Claim.SIX_SUBSTEPS: {VERIFIED, QUALIFIED, REFUTED},
    Claim.LIE_FIRST_ORDER: {VERIFIED, REFUTED},
    Claim.TIME_STEP_LIMIT: {VERIFIED, QUALIFIED},
    Claim.TIME_STEP_LIMIT_EPS: {VERIFIED, QUALIFIED, REFUTED},
    Claim.TIME_STEP_LIMIT_AFFINE: {VERIFIED, QUALIFIED, REFUTED},
    Claim.TIME_STEP_LIMIT_TWO_NORMS: {VERIFIED, QUALIFIED, REFUTED},
    Claim.TIME_STEP_LIMIT_PRE_LN: {VERIFIED, QUALIFIED, REFUTED},
    Claim.GRID_LIMIT: {VERIFIED, QUALIFIED},
    Claim.PRECISION_FLOOR: {VERIFIED, QUALIFIED},
    Claim.WELL_POSED: {VERIFIED, REFUTED},
    Claim.TRANSFORMER_NEAR_LIMIT: {VERIFIED, QUALIFIED, REFUTED},
    Claim.TRAINED_NEAR_LIMIT: {VERIFIED, QUALIFIED, REFUTED},
    Claim.DEPTH_SMOOTH_FLOW: {VERIFIED, QUALIFIED, REFUTED},
    Claim.DEPTH_INDEPENDENT_ROUGH: {VERIFIED, QUALIFIED, REFUTED},
    Claim.LAYER_NORM_CONDITIONING: {VERIFIED, REFUTED},
    Claim.STEP_SIZE_STABILITY: {VERIFIED, QUALIFIED, REFUTED},
    Claim.VIT_COVERED: {VERIFIED, REFUTED},
    Claim.VIT_TIME_STEP_LIMIT: {VERIFIED, QUALIFIED},
    Claim.CVT_COVERED: {VERIFIED, QUALIFIED},
    Claim.CVT_TIME_STEP_LIMIT: {VERIFIED, QUALIFIED},
    Claim.VISION_GRID_LIMIT: {VERIFIED, QUALIFIED},
}
"""The verdicts each claim's rule can give."""


THEOREM = "Theorem 3.1: sigma1=0.0 sigma2=1.0 backend('float64')"
IDEMPOTENT = "layer-norm idempotence: eps=0.0 affine=False"
NOT_IDEMPOTENT = "layer-norm idempotence: eps=1e-05 affine=False"
MULTI_HEAD = "Lie dt=1 vs textbook: d=32 heads=4 norm=post backend('float64')"
ONE_HEAD = "Lie dt=1 vs textbook: d=64 heads=1 norm=pre backend('float64')"
SIX_EXACT = "six sub-steps vs post-LN: eps=0.0 affine=False backend('float64')"
SIX_EPS = "six sub-steps vs post-LN: eps=1e-05 affine=False backend('float64')"
LABELS = (THEOREM, IDEMPOTENT, NOT_IDEMPOTENT, MULTI_HEAD, ONE_HEAD, SIX_EXACT, SIX_EPS)


def _exactness(*fails: str) -> list[Record]:
    """Synthetic exactness records, one check per label: it fails for the labels in
    `fails`, and for those docs/model.md predicts to fail (eps > 0) unless "none" is given."""
    failing = set(fails) if "none" in fails else {*fails, NOT_IDEMPOTENT, SIX_EPS}
    return [
        Record(
            label,
            "claims",
            "claims",
            label,
            {"label": label},
            0,
            "ok",
            ExactnessResult(label, CheckVerdict.HOLDS, [_check(label not in failing)]),
        )
        for label in LABELS
    ]


def _check(holds: bool) -> ClaimCheck:
    return ClaimCheck("a check", {}, defect=0.0 if holds else 2.0, tolerance=1.0)


@pytest.fixture(scope="module")
def stored() -> dict[str, list[Record]]:
    """Every kind's tiny-study records, written as JSON and read back into their types."""
    found = {}
    for kind in TINY:
        experiment = EXPERIMENTS[kind]
        cases = tiny_study(kind).cases()
        found[kind] = [experiment.read(json.loads(json.dumps(run_case(c)))) for c in cases]
        assert all(r.ok for r in found[kind]), [r.error for r in found[kind]]
    return found


def _verdicts(kind: str, records: list[Record]) -> dict[Claim, ClaimVerdict]:
    found = {}
    for item in EXPERIMENTS[kind].judge(records).evidence:
        assert item.claim not in found, f"{kind} speaks twice to {item.claim}"
        found[item.claim] = item.verdict
    return found


Change = Callable[[Any], Any]


def on(kind: str, claim: Claim, verdict: ClaimVerdict, change: Change, case: str | None = None):
    """A scenario: the stored records of `kind` with `change` applied to the results (of
    the case kind `case` only) must give `claim` the verdict `verdict`."""

    def records(stored: dict[str, list[Record]]) -> list[Record]:
        return [
            replace(r, result=change(r.result))
            if case is None or r.params.get("case") == case
            else r
            for r in stored[kind]
        ]

    return claim, verdict, kind, records


def flip(kind: str, case: str, claim: Claim, other: ClaimVerdict, good: Change, bad: Change):
    """Two scenarios of the case kind `case`: `good` verifies the claim, `bad` gives `other`."""
    return on(kind, claim, VERIFIED, good, case), on(kind, claim, other, bad, case)


def exact(claim: Claim, verdict: ClaimVerdict, *fails: str):
    """A scenario of the synthetic exactness records."""
    return claim, verdict, "claims", lambda stored: _exactness(*fails)


def _verdict(value: Any) -> Change:
    return lambda result: replace(result, verdict=value)


def _estimate(verdict: OrderVerdict, expected: float | None = None) -> Change:
    return lambda e: replace(e, verdict=verdict, expected=expected or e.expected)


def _methods(last: OrderVerdict) -> Change:
    """A time-step study whose methods all PASS but the last, which gets `last`."""

    def change(study):
        verdicts = [OrderVerdict.PASS] * (len(study.methods) - 1) + [last]
        methods = [
            replace(m, estimate=_estimate(v)(m.estimate))
            for m, v in zip(study.methods, verdicts, strict=True)
        ]
        return replace(study, methods=methods)

    return change


def _lie(verdict: OrderVerdict) -> Change:
    """A method's record: lie (expected order 1) gets `verdict`, the others PASS."""

    def change(run):
        if run.method != "lie":
            return replace(run, estimate=_estimate(OrderVerdict.PASS)(run.estimate))
        return replace(run, estimate=_estimate(verdict, 1.0)(run.estimate))

    return change


def _grid(good: bool) -> Change:
    """A grid study at its expected order 2 (PASS) or off it (FAIL), not spectral."""
    verdict = OrderVerdict.PASS if good else OrderVerdict.FAIL
    return lambda g: replace(g, spectral=False, estimate=_estimate(verdict, 2.0)(g.estimate))


def _grids(good: bool) -> Change:
    return lambda series: replace(series, grids=[_grid(good)(g) for g in series.grids])


def _rate(fitted, verdict: OrderVerdict, rate: tuple[float, float, float]):
    value, lo, hi = rate
    return replace(fitted, rate=value, interval=(lo, hi), verdict=verdict)


def _family(verdict: FamilyVerdict, rate: tuple[float, float, float]) -> Change:
    """A depth family with this verdict and family rate (value, low, high)."""
    fitted = OrderVerdict.NO_LIMIT if verdict == FamilyVerdict.DIVERGES else OrderVerdict.PASS
    return lambda r: replace(r, verdict=verdict, family_rate=_rate(r.family_rate, fitted, rate))


def _undecided(increments: OrderVerdict) -> Change:
    """An undecided depth family whose increments have this verdict."""

    def change(r):
        family = replace(r.family_rate, verdict=OrderVerdict.PRE_ASYMPTOTIC)
        rate = _rate(r.increment_rate, increments, (0.5, 0.4, 0.6))
        return replace(r, verdict=FamilyVerdict.UNDECIDED, family_rate=family, increment_rate=rate)

    return change


def _increments(verdict: OrderVerdict, rate: tuple[float, float, float]) -> Change:
    """A depth family whose weight increments have this verdict and rate (value, low, high)."""
    return lambda r: replace(r, increment_rate=_rate(r.increment_rate, verdict, rate))


def _defects(defect: float, where: str = "") -> Change:
    """Checks with this defect (those whose claim mentions `where`)."""

    def change(result):
        checks = [
            replace(c, defect=defect) if where in c.claim.lower() else c for c in result.checks
        ]
        return replace(result, checks=checks)

    return change


def _with_limit(
    distance: float, changed: int | None, limit_error: float = 1e-9, uncertain: int = 0
) -> Change:
    """A network-limit record with a limit: the network at `distance` from it, `changed`
    of 10 decisions different there (None: not measured) and `uncertain` within the
    limit's own error `limit_error` (states of size 1)."""
    split = None
    if changed is not None:
        gap = Spread(1.0, 0.1, 2.0)
        split = LimitDecisions(
            Share(changed, 10, 0.0, 1.0), uncertain, 10 - changed - uncertain, 1e-9, gap, 1, 1
        )
    return lambda result: replace(
        result,
        no_limit=None,
        network_distance=distance,
        network_spread=Spread(distance / 2, distance / 4, distance),
        limit_decisions=split,
        limit_error=limit_error,
        limit_size=1.0,
    )


def _transformer(relative: list[float], growth: OrderVerdict = OrderVerdict.PASS) -> Change:
    """Relative distances at weight scales 0.25, 0.5 and 1 (trained size), and the growth
    fit's verdict."""
    return lambda result: replace(
        result,
        scales=[0.25, 0.5, 1.0],
        relative_frobenius=relative,
        growth=replace(result.growth, verdict=growth),
    )


def _eps(converges: bool, distance: float) -> Change:
    """Lie's convergence towards the shrunken-set flow for every eps, and that flow's
    distance from the eps = 0 flow."""
    verdict = OrderVerdict.PASS if converges else OrderVerdict.FAIL

    def change(study):
        convergence = [
            replace(c, estimate=_estimate(verdict)(c.estimate)) for c in study.convergence
        ]
        return replace(study, convergence=convergence, distance=[distance] * len(study.distance))

    return change


def _floors(floor: float | None) -> Change:
    return lambda ladder: replace(ladder, floors=dict.fromkeys(ladder.floors, floor))


PASS, FAIL = OrderVerdict.PASS, OrderVerdict.FAIL
SCENARIOS = [
    exact(Claim.PROJECTION_THEOREM, VERIFIED),
    exact(Claim.PROJECTION_THEOREM, REFUTED, THEOREM),
    exact(Claim.TORCH_LAYER_NORM, QUALIFIED),
    exact(Claim.TORCH_LAYER_NORM, VERIFIED, "none"),
    exact(Claim.LIE_IS_TRANSFORMER, VERIFIED),
    exact(Claim.LIE_IS_TRANSFORMER, REFUTED, ONE_HEAD),
    exact(Claim.MULTI_HEAD, VERIFIED, ONE_HEAD),
    exact(Claim.MULTI_HEAD, REFUTED, MULTI_HEAD),
    exact(Claim.SIX_SUBSTEPS, QUALIFIED),
    exact(Claim.SIX_SUBSTEPS, VERIFIED, "none"),
    exact(Claim.SIX_SUBSTEPS, REFUTED, SIX_EXACT),
    on("invariants", Claim.RELU_PROJECTION, VERIFIED, _defects(0.0)),
    on("invariants", Claim.RELU_PROJECTION, REFUTED, _defects(1.0, "relu")),
    *(
        scenario
        for kind in ("time-step", "splitting-table")
        for scenario in (
            on(kind, Claim.LIE_FIRST_ORDER, VERIFIED, _lie(PASS)),
            on(kind, Claim.LIE_FIRST_ORDER, REFUTED, _lie(FAIL)),
            on(kind, Claim.TIME_STEP_LIMIT, VERIFIED, _lie(PASS)),
            on(kind, Claim.TIME_STEP_LIMIT, QUALIFIED, _lie(OrderVerdict.PRE_ASYMPTOTIC)),
        )
    ),
    on("grid", Claim.GRID_LIMIT, VERIFIED, _grid(True)),
    on("grid", Claim.GRID_LIMIT, QUALIFIED, _grid(False)),
    on("precision-ladder", Claim.PRECISION_FLOOR, VERIFIED, _floors(1e-7)),
    on("precision-ladder", Claim.PRECISION_FLOOR, QUALIFIED, _floors(None)),
    *(
        on("layer-norm-limit", Claim.TIME_STEP_LIMIT_EPS, verdict, change, "eps")
        for verdict, change in (
            (QUALIFIED, _eps(True, 1e3 * SAME_FLOW_DISTANCE)),
            (VERIFIED, _eps(True, 1e-3 * SAME_FLOW_DISTANCE)),
            (REFUTED, _eps(False, 1e-3 * SAME_FLOW_DISTANCE)),
        )
    ),
    *(
        on("layer-norm-limit", Claim.TIME_STEP_LIMIT_AFFINE, verdict, _verdict(found), "affine")
        for verdict, found in (
            (REFUTED, OrderVerdict.NO_LIMIT),
            (VERIFIED, PASS),
            (QUALIFIED, OrderVerdict.PRE_ASYMPTOTIC),
        )
    ),
    *(
        on("layer-norm-limit", claim, verdict, _methods(last), case)
        for claim, case in (
            (Claim.TIME_STEP_LIMIT_TWO_NORMS, "two-norms"),
            (Claim.TIME_STEP_LIMIT_PRE_LN, "pre-affine"),
        )
        for verdict, last in (
            (VERIFIED, PASS),
            (QUALIFIED, OrderVerdict.PRE_ASYMPTOTIC),
            (REFUTED, OrderVerdict.NO_LIMIT),
        )
    ),
    *(
        on("transformer-limit", Claim.TRANSFORMER_NEAR_LIMIT, verdict, change)
        for verdict, change in (
            (VERIFIED, _transformer([1e-4, 1e-3, CLOSE_TO_LIMIT / 2])),
            (QUALIFIED, _transformer([1e-4, 0.05, 0.45])),
            (REFUTED, _transformer([2 * CLOSE_TO_LIMIT, 0.05, 0.45])),
            (REFUTED, _transformer([1e-4, 0.05, 0.45], OrderVerdict.NO_LIMIT)),
        )
    ),
    *(
        on("network-limit", Claim.TRAINED_NEAR_LIMIT, verdict, change)
        for verdict, change in (
            (REFUTED, lambda r: r),  # the shipped post-LN encoder: NO-LIMIT
            (QUALIFIED, lambda r: replace(r, no_limit=_verdict(OrderVerdict.PASS)(r.no_limit))),
            (VERIFIED, _with_limit(CLOSE_TO_OWN_LIMIT / 2, 0)),
            (QUALIFIED, _with_limit(2 * CLOSE_TO_OWN_LIMIT, 0)),
            (QUALIFIED, _with_limit(CLOSE_TO_OWN_LIMIT / 2, 0, CLOSE_TO_OWN_LIMIT)),
            (REFUTED, _with_limit(CLOSE_TO_OWN_LIMIT / 2, 1)),
            # a decision the limit's error could change: not shown close, not refuted
            (QUALIFIED, _with_limit(CLOSE_TO_OWN_LIMIT / 2, 0, uncertain=1)),
            # a readout that takes no decisions: the outputs alone are judged
            (VERIFIED, _with_limit(CLOSE_TO_OWN_LIMIT / 2, None)),
            (QUALIFIED, _with_limit(2 * CLOSE_TO_OWN_LIMIT, None)),
        )
    ),
    *(
        on("depth-family", Claim.DEPTH_SMOOTH_FLOW, verdict, _family(found, rate))
        for verdict, found, rate in (
            (VERIFIED, FamilyVerdict.SMOOTH, (1.02, 0.95, 1.1)),
            (VERIFIED, FamilyVerdict.SMOOTH, (0.9, 0.85, 0.95)),  # within 0.2 of 1
            (QUALIFIED, FamilyVerdict.SMOOTH, (0.5, 0.4, 0.6)),  # smooth, not at rate 1 / L
            (REFUTED, FamilyVerdict.AVERAGED, (1.0, 0.9, 1.1)),
            (REFUTED, FamilyVerdict.DIVERGES, (0.0, -0.1, 0.1)),
        )
    ),
    *(  # the family's distances undecided: its weights decide what they can
        on("depth-family", Claim.DEPTH_SMOOTH_FLOW, verdict, _undecided(found))
        for verdict, found in ((QUALIFIED, OrderVerdict.PASS), (REFUTED, OrderVerdict.NO_LIMIT))
    ),
    *(
        on("depth-family", Claim.DEPTH_INDEPENDENT_ROUGH, verdict, _increments(found, rate))
        for verdict, found, rate in (
            (VERIFIED, OrderVerdict.NO_LIMIT, (0.0, -0.02, 0.02)),
            (QUALIFIED, OrderVerdict.PASS, (0.5, 0.4, 0.6)),  # continuous, rougher than smooth
            (REFUTED, OrderVerdict.PASS, (1.0, 0.9, 1.1)),
        )
    ),
    on("well-posedness", Claim.WELL_POSED, VERIFIED, _verdict(CheckVerdict.HOLDS)),
    on("well-posedness", Claim.WELL_POSED, REFUTED, _verdict(CheckVerdict.FAILS)),
    *(
        on("conditioning", Claim.LAYER_NORM_CONDITIONING, verdict, _verdict(found), "layer-norm")
        for verdict, found in ((VERIFIED, CheckVerdict.HOLDS), (REFUTED, CheckVerdict.FAILS))
    ),
    *(
        on("stability", Claim.STEP_SIZE_STABILITY, verdict, _verdict(found), "map")
        for verdict, found in (
            (VERIFIED, CheckVerdict.HOLDS),
            (REFUTED, CheckVerdict.FAILS),
            (QUALIFIED, PointVerdict.NOT_APPLICABLE),
        )
    ),
    *flip("vit", "twin", Claim.VIT_COVERED, REFUTED, _defects(0.0), _defects(1.0)),
    *flip("vit", "orders", Claim.VIT_TIME_STEP_LIMIT, QUALIFIED, _methods(PASS), _methods(FAIL)),
    *flip("vit", "grid", Claim.GRID_LIMIT, QUALIFIED, _grids(True), _grids(False)),
    *flip("vit", "flow grid", Claim.VISION_GRID_LIMIT, QUALIFIED, _grids(True), _grids(False)),
    *flip("cvt", "grid", Claim.CVT_COVERED, QUALIFIED, _grid(True), _grid(False)),
    *flip(
        "cvt", "flow orders", Claim.CVT_TIME_STEP_LIMIT, QUALIFIED, _methods(PASS), _methods(FAIL)
    ),
    *flip("cvt", "flow grid", Claim.VISION_GRID_LIMIT, QUALIFIED, _grids(True), _grids(False)),
]


@pytest.mark.parametrize(
    "claim, verdict, kind, records",
    SCENARIOS,
    ids=[f"{kind}-{claim.name}-{verdict}" for claim, verdict, kind, _ in SCENARIOS],
)
def test_swapped_records_give_the_verdict(stored, claim, verdict, kind, records):
    assert _verdicts(kind, records(stored)).get(claim) == verdict


def test_an_undecided_limit_check_is_no_evidence(stored):
    """A network whose limit check cannot tell at its levels speaks to no claim."""
    undecided = _verdict(OrderVerdict.UNDECIDED)
    records = [
        replace(r, result=replace(r.result, no_limit=undecided(r.result.no_limit)))
        for r in stored["network-limit"]
    ]
    assert Claim.TRAINED_NEAR_LIMIT not in _verdicts("network-limit", records)


def test_every_claim_of_every_experiment_is_driven_to_each_verdict_its_rule_gives(stored):
    assert set(RULES) == set(Claim)
    covered: dict[tuple[Claim, str], set[ClaimVerdict]] = {}
    for claim, verdict, kind, _ in SCENARIOS:
        covered.setdefault((claim, kind), set()).add(verdict)
    records = stored | {"claims": _exactness()}
    speakers = {(claim, kind) for kind in records for claim in _verdicts(kind, records[kind])}
    assert speakers <= set(covered), speakers - set(covered)
    for (claim, kind), verdicts in covered.items():
        assert verdicts == RULES[claim], (claim, kind, verdicts)


def test_a_claim_must_be_a_registered_entry():
    with pytest.raises(TypeError, match="registered Claim"):
        Evidence("The Lie scheme is first order", VERIFIED, "order 1")
    with pytest.raises(TypeError, match="ClaimVerdict"):
        Evidence(Claim.LIE_FIRST_ORDER, "verified", "order 1")
    with pytest.raises(AttributeError):  # a misspelt claim fails loudly
        getattr(Claim, "LIE_FIRST_ORDRE")  # noqa: B009


@pytest.mark.parametrize("with_torch", [True, False])
def test_the_lie_claim_names_torch_only_when_its_cases_ran(with_torch, monkeypatch):
    """Without torch (README command 1) the "vs torch" cases are not run, and the claim's
    sentence does not say the stacks agree with torch (issue 43, item 3)."""
    import reports.exactness

    monkeypatch.setattr(reports.exactness, "torch_available", lambda: with_torch)
    study = parse_study({"study": {"name": "c"}, "experiment": [{"kind": "claims"}]}, "c")
    cases = [c for c in study.cases() if c.label.startswith("Lie dt=1") and "float64" in c.label]
    assert any("vs torch" in c.label for c in cases) == with_torch
    records = [EXPERIMENTS["claims"].read(run_case(c)) for c in cases]
    [lie] = [e for e in EXPERIMENTS["claims"].judge(records).evidence
             if e.claim == Claim.LIE_IS_TRANSFORMER]  # fmt: skip
    named = (
        "with the textbook encoder and torch to" if with_torch else "with the textbook encoder to"
    )
    assert named in lie.evidence and lie.verdict == ClaimVerdict.VERIFIED, lie.evidence
