"""What the time-step limit is, as study experiments.

kind "layer-norm-limit": case "eps" (convergence.layer_norm_eps: Lie with LN_eps against
the shrunken-set flow, and that flow's distance from the eps = 0 flow), case "affine"
(convergence.limit on per-feature gains and biases: the collapse), case "two-norms"
(post-LN layers whose norm1 differs from norm2, scalars: the flow on S2) and case
"pre-affine" (pre-LN with per-feature gains and biases). kind "transformer-limit": the dt = 1
Transformer's distance from its limit against the weight scale.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from convergence.layer_norm_eps import EpsLimitStudy, eps_limit_study
from convergence.limit import LimitCheck, limit_check
from convergence.order import OrderVerdict
from convergence.time_step import TimeStepStudy, time_step_study
from convergence.transformer_limit import TransformerLimitDistance, transformer_limit_distance
from reports.claims import Claim, ClaimVerdict, Evidence, verified_or
from reports.experiments.base import (
    CaseKind,
    Experiment,
    Judgement,
    Record,
    Section,
    by_case_kind,
    results,
)
from reports.figures import Figure, convergence_figure, lines_figure, time_step_series
from reports.merit import exact_merit, order_merit
from reports.problems import build_problem, problem_spec, with_default_problem
from reports.schema import Field, array_of, integer, number
from reports.tables import (
    ORDER_HEADERS,
    latex_table,
    markdown_table,
    number_rows,
    order_cells,
    slug,
)
from reports.tables import number as cell

LN_FIELDS = {
    "problem": Field(problem_spec, None, "a post-LN problem table with scalar norms"),
    "eps_values": Field(array_of(number(positive=True), minimum=3, distinct=True)),
    "steps_per_unit": Field(array_of(integer(1, 1_000_000), minimum=3, distinct=True)),
    "affine_steps_per_unit": Field(array_of(integer(1, 1_000_000), minimum=4, distinct=True)),
    "norm1": Field(array_of(number(), minimum=2), [1.3, 0.2], "norm1 [gain, bias], two-norms"),
}
TWO_NORM_METHODS = ("lie", "strang-rk2")
"""The methods the two-norm case measures against the reference (at SteppingMethod.order)."""
PRE_AFFINE_METHODS = ("lie", "strang-rk2-ambient")
"""The same for pre-LN with per-feature norms (no constraint set: ambient Strang is order 2)."""
SAME_FLOW_DISTANCE = 1e-9
"""The eps > 0 limit counts as the eps = 0 flow when its max-abs distance from that flow
stays below this at every eps (about a thousand times the float64 extrapolation
reference's own error)."""
CONVERGES = (OrderVerdict.PASS, OrderVerdict.SUPERCONVERGENT)


def _eps_run(case: dict[str, Any], seed: int) -> EpsLimitStudy:
    spec = case["problem"] | {"eps": 0.0, "affine": False}
    return eps_limit_study(build_problem(spec, seed), case["eps_values"], case["steps_per_unit"])


def _affine_run(case: dict[str, Any], seed: int) -> LimitCheck:
    problem = build_problem(case["problem"] | {"affine": True, "relu_shift": 0.0}, seed)
    return limit_check(problem, case["affine_steps_per_unit"])


def _two_norms_run(case: dict[str, Any], seed: int) -> TimeStepStudy:
    spec = case["problem"] | {"norm": "post", "eps": 0.0, "affine": False, "norm1": case["norm1"]}
    return time_step_study(
        build_problem(spec, seed),
        TWO_NORM_METHODS,
        case["steps_per_unit"],
    )


def _pre_affine_run(case: dict[str, Any], seed: int) -> TimeStepStudy:
    spec = case["problem"] | {"norm": "pre", "eps": 0.0, "affine": True}
    return time_step_study(
        build_problem(spec, seed),
        PRE_AFFINE_METHODS,
        case["steps_per_unit"],
    )


def orders_evidence(claim: Claim, study: TimeStepStudy) -> Evidence:
    """Verified when every method converges at its expected order (PASS), refuted when one
    has no limit (NO-LIMIT), qualified otherwise."""
    verdicts = [m.estimate.verdict for m in study.methods]
    if OrderVerdict.NO_LIMIT in verdicts:
        verdict = ClaimVerdict.REFUTED
    else:
        verdict = verified_or(all(v == OrderVerdict.PASS for v in verdicts), ClaimVerdict.QUALIFIED)
    found = ", ".join(
        f"{m.method} {m.estimate.order:.3f} ({m.estimate.verdict}, expected "
        f"{m.estimate.expected:g})"
        for m in study.methods
    )
    return Evidence(claim, verdict, f"orders against the extrapolation reference: {found}")


TWO_NORMS = "Two scalar norms per post-LN layer"
PRE_AFFINE = "Pre-LN, per-feature gain and bias"
"""The headings of the two orders parts; their slugs lead their figures of merit."""


def _orders_judge(what: str, claim: Claim, studies: list[TimeStepStudy]) -> Judgement:
    """Each method's order as a figure of merit, and `orders_evidence` on `claim`."""
    study = studies[0]
    merit = {f"{slug(what)}.{m.method}.order": order_merit(m.estimate) for m in study.methods}
    return Judgement([orders_evidence(claim, study)], merit)


def _orders_render(what: str, title: str, studies: list[TimeStepStudy]) -> Section:
    study = studies[0]
    rows = [[m.method, *order_cells(m.estimate), cell(m.max_abs[-1])] for m in study.methods]
    headers = ["method", *ORDER_HEADERS, "finest error"]
    markdown = f"**{what}.**\n\n" + markdown_table(headers, rows)
    series = [time_step_series(m.method, m) for m in study.methods]
    figure = Figure(
        slug(f"{title} {what}"),
        f"{what}: errors against the reference.",
        convergence_figure(f"{title}: {what}", "dt", series),
    )
    return Section(title, markdown, [figure], latex_table(title, headers, rows))


def eps_evidence(eps: EpsLimitStudy) -> Evidence:
    """Refuted unless Lie converges (PASS at order 1) towards the shrunken-set flow for
    every eps; qualified when that limit is measurably not the eps = 0 flow (distance
    above SAME_FLOW_DISTANCE), verified when it is."""
    converges = all(c.estimate.verdict == OrderVerdict.PASS for c in eps.convergence)
    distinct = max(eps.distance) > SAME_FLOW_DISTANCE
    verdict = verified_or(not distinct, ClaimVerdict.QUALIFIED)
    return Evidence(
        Claim.TIME_STEP_LIMIT_EPS,
        verdict if converges else ClaimVerdict.REFUTED,
        f"order 1 towards the flow on the shrunken sphere var = sigma2^2 - eps "
        f"({'PASS' if converges else 'not PASS'} for every eps); distance from the eps = 0 "
        f"flow ~ eps^{eps.distance_fit.order:.3f}, up to {max(eps.distance):.3g} "
        f"(the same flow below {SAME_FLOW_DISTANCE:g})",
    )


def _eps_judge(studies: list[EpsLimitStudy]) -> Judgement:
    """The power of the distance from the eps = 0 flow in eps, and `eps_evidence`."""
    eps = studies[0]
    return Judgement([eps_evidence(eps)], {"eps.distance_power": order_merit(eps.distance_fit)})


def _eps_render(title: str, studies: list[EpsLimitStudy]) -> Section:
    eps = studies[0]
    rows = [
        [cell(e), cell(c.estimate.order, 4), str(c.estimate.verdict), cell(d)]
        for e, c, d in zip(eps.eps, eps.convergence, eps.distance, strict=True)
    ]
    fit = eps.distance_fit
    headers = [
        "eps",
        "Lie order towards the shrunken-set flow",
        "verdict",
        "distance from the eps = 0 flow",
    ]
    markdown = (
        "**eps > 0, scalar gain.**\n\n"
        + markdown_table(headers, rows)
        + f"\nDistance fitted as C eps^q: q = {fit.order:.4f} [{fit.interval[0]:.4f},"
        f" {fit.interval[1]:.4f}], C = {fit.constant:.3g} ({fit.verdict}).\n"
    )
    series = [
        time_step_series(f"eps={e:g}", c) for e, c in zip(eps.eps, eps.convergence, strict=True)
    ]
    figure = Figure(
        slug(f"{title} eps"),
        "Lie with LN_eps against the flow on the shrunken sphere.",
        convergence_figure(f"{title}: Lie with LN_eps", "dt", series),
    )
    return Section(title, markdown, [figure], latex_table(f"{title}: eps > 0", headers, rows))


def affine_evidence(affine: LimitCheck) -> Evidence:
    """Refuted when the refined solutions have no limit (NO-LIMIT: degenerate or not
    Cauchy, convergence.limit), verified when their Cauchy differences converge (PASS or
    SUPERCONVERGENT), qualified otherwise."""
    if affine.verdict == OrderVerdict.NO_LIMIT:
        verdict = ClaimVerdict.REFUTED
    else:
        verdict = verified_or(affine.verdict in CONVERGES, ClaimVerdict.QUALIFIED)
    return Evidence(Claim.TIME_STEP_LIMIT_AFFINE, verdict, affine.reason)


def _affine_judge(checks: list[LimitCheck]) -> Judgement:
    """The limit check's verdict as a figure of merit (unchanged), and `affine_evidence`."""
    affine = checks[0]
    return Judgement(
        [affine_evidence(affine)], {"affine.verdict": exact_merit(str(affine.verdict))}
    )


def _affine_render(title: str, checks: list[LimitCheck]) -> Section:
    affine = checks[0]
    defects = affine.fixed_point_defect or [None] * len(affine.steps_per_unit)

    def optional(x: float | None) -> str:
        return "-" if x is None else cell(x)

    columns = zip(
        affine.steps_per_unit,
        affine.spread,
        affine.clusters,
        defects,
        affine.sensitivity,
        [*affine.cauchy_differences, None],
        strict=True,
    )
    rows = [[m, cell(s), k, optional(d), cell(g), optional(c)] for m, s, k, d, g, c in columns]
    headers = [
        "steps per unit",
        "token spread",
        "distinct tokens",
        "|P2(P1(u)) - u|",
        "sensitivity to u0",
        "Cauchy difference to next",
    ]
    markdown = (
        f"**Per-feature gain and bias.** Verdict {affine.verdict}: {affine.reason}.\n\n"
        + markdown_table(headers, rows)
    )
    series = [
        ("token spread", affine.steps_per_unit, [max(s, 1e-18) for s in affine.spread]),
        ("sensitivity to u0", affine.steps_per_unit, [max(g, 1e-18) for g in affine.sensitivity]),
        ("Cauchy difference", affine.steps_per_unit[:-1], affine.cauchy_differences),
    ]
    if affine.fixed_point_defect is not None:
        defect = [max(d, 1e-18) for d in affine.fixed_point_defect]
        series.append(("fixed-point defect", affine.steps_per_unit, defect))
    figure = Figure(
        slug(f"{title} affine"),
        "The collapse evidence under refinement.",
        lines_figure(f"{title}: per-feature LN", "steps per unit", "size", series),
    )
    return Section(title, markdown, [figure])


TRANSFORMER_FIELDS = {
    "problem": Field(problem_spec, None, "a problem table (its weights are scaled)"),
    "scales": Field(array_of(number(positive=True), minimum=3, distinct=True)),
    "reference_steps": Field(integer(1, 4096), 4),
}
CLOSE_TO_LIMIT = 0.01
"""A Transformer is close to its limit when the relative (Frobenius) distance of its
output from the limit's is below this."""
TRAINED_SCALE = 1.0
"""The weight scale of trained-size weights (s = 1: the layers as given)."""


def _transformer_run(case: dict[str, Any], seed: int) -> TransformerLimitDistance:
    problem = build_problem(case["problem"], seed)
    return transformer_limit_distance(
        problem.controls.layers,
        problem.u0,
        case["scales"],
        norm=problem.norm,
        reference_steps=case["reference_steps"],
    )


def transformer_evidence(result: TransformerLimitDistance) -> Evidence:
    """Verified when the relative distance is below CLOSE_TO_LIMIT at every scale of at
    least TRAINED_SCALE (there must be one); qualified when it is below that only at the
    smallest scales, with a fitted growth C s^q (PASS); refuted otherwise."""
    pairs = list(zip(result.scales, result.relative_frobenius, strict=True))
    trained = [d for s, d in pairs if s >= TRAINED_SCALE]
    smallest_scale, at_smallest = min(pairs)
    growth = result.growth
    if trained and max(trained) <= CLOSE_TO_LIMIT:
        verdict = ClaimVerdict.VERIFIED
    elif at_smallest <= CLOSE_TO_LIMIT and growth.verdict == OrderVerdict.PASS:
        verdict = ClaimVerdict.QUALIFIED
    else:
        verdict = ClaimVerdict.REFUTED
    largest_scale, at_largest = max(pairs)
    return Evidence(
        Claim.TRANSFORMER_NEAR_LIMIT,
        verdict,
        f"relative distance {at_largest:.2g} at s = {largest_scale:g} and {at_smallest:.2g} "
        f"at s = {smallest_scale:g} (close: below {CLOSE_TO_LIMIT:g} at s >= "
        f"{TRAINED_SCALE:g}); it grows like s^{growth.order:.2f} ({growth.verdict}) at "
        "small weight scale",
    )


def _transformer_judge(records: list[Record[TransformerLimitDistance]]) -> Judgement:
    """The fitted growth of the distance in the weight scale, and `transformer_evidence`."""
    done = results(records)
    if not done:
        return Judgement()
    return Judgement([transformer_evidence(done[0])], {"growth": order_merit(done[0].growth)})


def _transformer_render(title: str, records: list[Record[TransformerLimitDistance]]) -> Section:
    done = results(records)
    if not done:
        return Section(title, "No finished case.\n")
    result = done[0]
    rows = number_rows(
        result.scales, result.distance, result.relative_frobenius, result.reference_error
    )
    headers = ["weight scale s", "max-abs distance", "relative Frobenius", "limit's own error"]
    growth = result.growth
    markdown = (
        "Distance of the dt = 1 Transformer from its time-step limit at t = T.\n\n"
        + markdown_table(headers, rows)
        + f"\nGrowth fitted as C s^q on the asymptotic window: q = {growth.order:.3f} "
        f"[{growth.interval[0]:.3f}, {growth.interval[1]:.3f}] ({growth.verdict}).\n"
    )
    figure = Figure(
        slug(title),
        "Distance of the Transformer from its limit against s.",
        lines_figure(
            title,
            "weight scale s",
            "distance",
            [
                ("max-abs", result.scales, result.distance),
                ("limit's own error", result.scales, result.reference_error),
            ],
        ),
    )
    return Section(title, markdown, [figure], latex_table(title, headers, rows))


LAYER_NORM_LIMIT = by_case_kind(
    "layer-norm-limit",
    "what eps > 0, two norms per layer and per-feature LN gain and bias do to the limit",
    LN_FIELDS,
    {
        "eps": CaseKind(_eps_run, EpsLimitStudy, _eps_render, _eps_judge),
        "affine": CaseKind(_affine_run, LimitCheck, _affine_render, _affine_judge),
        "two-norms": CaseKind(
            _two_norms_run,
            TimeStepStudy,
            partial(_orders_render, TWO_NORMS),
            partial(_orders_judge, TWO_NORMS, Claim.TIME_STEP_LIMIT_TWO_NORMS),
        ),
        "pre-affine": CaseKind(
            _pre_affine_run,
            TimeStepStudy,
            partial(_orders_render, PRE_AFFINE),
            partial(_orders_judge, PRE_AFFINE, Claim.TIME_STEP_LIMIT_PRE_LN),
        ),
    },
    with_default_problem,
)
TRANSFORMER_LIMIT = Experiment(
    "transformer-limit",
    "distance of the dt = 1 Transformer from its time-step limit against the weight scale",
    TRANSFORMER_FIELDS,
    lambda params: [("scales", with_default_problem(params))],
    {"transformer-limit": CaseKind(_transformer_run, TransformerLimitDistance)},
    _transformer_render,
    _transformer_judge,
)
