"""The paper's exactness claims (reports.exactness) as a study experiment, one case per check.

kind "claims" has no keys. A case is keyed by its label, the same on every machine: each
rebuilds the built-in list of exactness cases and runs the one of that label, and a
worker that cannot (no torch for a torch case, or a label no case has) refuses it by
name, so a resumed run or another worker never runs a different check under a stored
key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from properties.claim_check import CheckVerdict, ClaimCheck
from reports.claims import Claim, ClaimVerdict, Evidence, verified_or
from reports.exactness import exactness_cases
from reports.experiments.base import CaseKind, Experiment, Judgement, Record, Section, results
from reports.merit import bounded_merit
from reports.tables import latex_table, markdown_table, number
from solvers.errors import InvalidInputError
from solvers.io.torch_modules import torch_available

GROUPS = (
    ("Lie dt=1", "transformer"),
    ("six sub-steps", "six"),
    ("Theorem", "theorem"),
    ("layer-norm idempotence", "idempotence"),
)


@dataclass(frozen=True)
class ExactnessResult:
    """One exactness case: its label, the verdict docs/model.md predicts, and its checks."""

    label: str
    predicted: CheckVerdict
    checks: list[ClaimCheck]

    @property
    def group(self) -> str:
        return next((key for prefix, key in GROUPS if self.label.startswith(prefix)), "other")


def _cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(case.label, {"label": case.label}) for case in exactness_cases()]


def run(case: dict[str, Any], seed: int) -> ExactnessResult:
    label = case["label"]
    chosen = next((c for c in exactness_cases(every=True) if c.label == label), None)
    if chosen is None:
        raise InvalidInputError(f"there is no exactness case {label!r}")
    if chosen.needs_torch and not torch_available():
        raise InvalidInputError(
            f"exactness case {label!r} compares with torch, which this machine does not "
            "have: pip install 'tide-suite[models]'"
        )
    return ExactnessResult(chosen.label, CheckVerdict(chosen.expectation), chosen.run())


Checks = list[tuple[ClaimCheck, ExactnessResult]]


def _holds(entries: Checks) -> int:
    return sum(check.verdict == CheckVerdict.HOLDS for check, _ in entries)


def evidence(groups: dict[str, Checks]) -> list[Evidence]:
    """The claims' verdicts from the checks by group; each check holds when its defect is
    within its tolerance (a multiple of its precision's unit roundoff)."""
    found = []
    if theorem := groups.get("theorem"):
        found.append(
            Evidence(
                Claim.PROJECTION_THEOREM,
                verified_or(_holds(theorem) == len(theorem), ClaimVerdict.REFUTED),
                f"{_holds(theorem)} of {len(theorem)} checks of the five parts hold in every "
                "number system",
            )
        )
    if entries := groups.get("idempotence"):
        failing = [r.label for c, r in entries if c.verdict == CheckVerdict.FAILS]
        found.append(
            Evidence(
                Claim.TORCH_LAYER_NORM,
                verified_or(not failing, ClaimVerdict.QUALIFIED),
                f"not idempotent in {len(failing)} of {len(entries)} configurations: "
                + "; ".join(failing),
            )
        )
    if stacks := groups.get("transformer"):
        agree = _holds(stacks) == len(stacks)
        found.append(
            Evidence(
                Claim.LIE_IS_TRANSFORMER,
                verified_or(agree, ClaimVerdict.REFUTED),
                f"{_holds(stacks)} of {len(stacks)} stacks agree with "
                f"{_compared_with(stacks)} to rounding",
            )
        )
        multi = [(c, r) for c, r in stacks if "heads=1 " not in r.label]
        found.append(
            Evidence(
                Claim.MULTI_HEAD,
                verified_or(bool(multi) and _holds(multi) == len(multi), ClaimVerdict.REFUTED),
                f"{_holds(multi)} of the agreeing stacks have several heads",
            )
        )
    if six := groups.get("six"):
        eps_zero = [(c, r) for c, r in six if "eps=0.0 " in r.label]
        exact = _holds(eps_zero) == len(eps_zero)
        verdict = verified_or(_holds(six) == len(six), ClaimVerdict.QUALIFIED)
        found.append(
            Evidence(
                Claim.SIX_SUBSTEPS,
                verdict if exact else ClaimVerdict.REFUTED,
                f"exact with eps = 0 ({_holds(eps_zero)} of {len(eps_zero)} checks hold); "
                f"with eps > 0 {_holds(six) - _holds(eps_zero)} of {len(six) - len(eps_zero)} "
                "hold: the halving u5 = (u4 + u2) / 2 changes the result",
            )
        )
    return found


def _compared_with(stacks: Checks) -> str:
    """What the stacks were compared with, naming only what ran: "the textbook encoder"
    and, where its cases ran (torch installed), "torch"."""
    ran = {"textbook": "the textbook encoder", "torch": "torch"}
    return " and ".join(
        name for key, name in ran.items() if any(f"vs {key}" in r.label for _, r in stacks)
    )


def _checks(records: list[Record[ExactnessResult]]) -> Checks:
    """Every check of the finished records, with its case."""
    return [(check, result) for result in results(records) for check in result.checks]


def _unexpected(records: list[Record[ExactnessResult]]) -> int:
    """How many checks do not give the verdict docs/model.md predicts."""
    return sum(check.verdict != result.predicted for check, result in _checks(records))


def judge(records: list[Record[ExactnessResult]]) -> Judgement:
    """The checks not as predicted as a figure of merit (none allowed), and the claims'
    verdicts from the checks by group (`evidence`)."""
    groups: dict[str, Checks] = {}
    for check, result in _checks(records):
        groups.setdefault(result.group, []).append((check, result))
    merit = {"claims.unexpected": bounded_merit(_unexpected(records), 0, 0)}
    return Judgement(evidence(groups), merit)


def render(title: str, records: list[Record[ExactnessResult]]) -> Section:
    rows = [
        [
            check.claim,
            result.label,
            str(check.verdict),
            "as predicted"
            if check.verdict == result.predicted
            else f"NOT AS PREDICTED ({result.predicted})",
            number(check.defect),
            number(check.tolerance),
        ]
        for check, result in _checks(records)
    ]
    headers = ["claim", "configuration", "verdict", "predicted", "defect", "tolerance"]
    markdown = (
        f"{len(rows)} checks, {_unexpected(records)} not as docs/model.md predicts. Tolerances "
        "derive from each number system's unit roundoff.\n\n" + markdown_table(headers, rows)
    )
    return Section(title, markdown, [], latex_table("Exactness claims", headers, rows))


CLAIMS = Experiment(
    "claims",
    "the paper's exactness claims in every number system (Lie dt=1 vs textbook and torch, "
    "six sub-steps, Theorem 3.1, idempotence of torch-style LN)",
    {},
    _cases,
    {"claims": CaseKind(run, ExactnessResult)},
    render,
    judge,
)
