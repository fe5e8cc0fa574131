"""What an experiment kind is: its keys, its cases, how each kind of case runs, how its
stored records are judged and how they render.

`cases(params)` splits the checked keys into cases (a label and plain JSON parameters).
A case's "case" key (default: the experiment's kind) names its `CaseKind`, whose `run`
returns a result dataclass of type `result`; the runner stores it as JSON (with that
"case" key) and the report reads each record back into a typed `Record`.

`judge(records)` gives the `Judgement`: the evidence on the claims and the figures of
merit a baseline keeps, plain data computed from the records. `render(title, records)`
draws the section's text, figures and tables alone; the report joins the two, and
`tide check` and baselines judge without drawing (reports.judging).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from reports.claims import Evidence
from reports.figures import Figure
from reports.schema import Field
from solvers.errors import TideError
from solvers.results.records import from_json, to_json

R = TypeVar("R")
CASE = "case"
"""The case parameter (and result key) naming a case's kind in experiments of several."""


@dataclass(frozen=True)
class Case:
    """One independent computation of a study: id "<experiment>/<label>", its experiment's
    name and kind, plain JSON parameters and a seed."""

    id: str
    experiment: str
    kind: str
    label: str
    params: dict[str, Any]
    seed: int


@dataclass(frozen=True)
class Record(Case, Generic[R]):
    """A stored case read back: status, typed result (None if it failed) and error."""

    status: str
    result: R | None
    error: str | None = None
    wall_time: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def results(records: list[Record[R]]) -> list[R]:
    """The results of the finished records, in order."""
    return [r.result for r in records if r.ok]


@dataclass(frozen=True)
class Judgement:
    """What an experiment's records say, without drawing anything: its evidence on the
    registered claims and the figures of merit a baseline keeps."""

    evidence: list[Evidence] = field(default_factory=list)
    figures_of_merit: dict[str, Any] = field(default_factory=dict)
    """Numbers a baseline keeps, by name, each with its rule and tolerance (reports.merit)."""

    @staticmethod
    def joined(parts: Iterable[Judgement]) -> Judgement:
        """Several parts' judgements as one: evidence and figures of merit in part order."""
        parts = list(parts)
        merit: dict[str, Any] = {}
        for part in parts:
            merit |= part.figures_of_merit
        return Judgement([e for part in parts for e in part.evidence], merit)

    def of_case(self, label: str) -> Judgement:
        """This judgement with `label` as the case of every figure of merit that names none."""
        merit = {name: {"case": label} | m for name, m in self.figures_of_merit.items()}
        return Judgement(self.evidence, merit)


def no_judgement(results: list[Any]) -> Judgement:
    """The judge of a part that is drawn only: no evidence, no figure of merit."""
    return Judgement()


@dataclass
class Section:
    """One experiment's part of the report: what its render draws (text, figures, LaTeX
    tables) and, once the report joins it, what its judge says."""

    title: str
    markdown: str
    figures: list[Figure] = field(default_factory=list)
    latex: str = ""
    judgement: Judgement = field(default_factory=Judgement)


def extended(cls: type[R], result: Any, **more: Any) -> R:
    """An instance of `cls` (a dataclass extending `result`'s type) with `result`'s fields
    and `more`."""
    fields = {f.name: getattr(result, f.name) for f in dataclasses.fields(result) if f.init}
    return cls(**fields, **more)


@dataclass(frozen=True)
class CaseKind(Generic[R]):
    """How one kind of case runs, the type of its result, and (in experiments of several
    kinds) how its finished results are judged and render as a part of the section."""

    run: Callable[[dict[str, Any], int], R]
    result: type[R]
    render: Callable[[str, list[R]], Section] | None = None
    judge: Callable[[list[R]], Judgement] | None = None


@dataclass(frozen=True)
class Experiment:
    kind: str
    summary: str
    fields: dict[str, Field]
    cases: Callable[[dict[str, Any]], list[tuple[str, dict[str, Any]]]]
    case_kinds: Mapping[str, CaseKind]
    render: Callable[[str, list[Record]], Section]
    """The section's text, figures and tables from the records (its judgement left empty)."""
    judge: Callable[[list[Record]], Judgement]
    """The evidence and figures of merit from the records; never draws."""
    check: Callable[[dict[str, Any], str], dict[str, Any]] | None = None
    """Checks of the keys against each other and the files they name, when the study is
    read (`check(params, where)` returns the params or raises StudyFileError)."""

    def case_kind(self, params: Mapping[str, Any]) -> CaseKind:
        return self.case_kinds[params.get(CASE, self.kind)]

    def run(self, params: dict[str, Any], seed: int) -> Any:
        """The result of one case (a dataclass of its case kind's result type)."""
        return self.case_kind(params).run(params, seed)

    def stored(self, params: Mapping[str, Any], result: Any) -> dict[str, Any]:
        """The JSON record of a case's result (led by its case kind, if it names one)."""
        data = to_json(result)
        return {CASE: params[CASE]} | data if CASE in params else data

    def read(self, stored: Mapping[str, Any]) -> Record:
        """A stored record (plain JSON) with its result read back into its type."""
        result = None
        if stored["status"] == "ok":
            wanted = self.case_kind(stored["params"]).result
            data = {k: v for k, v in stored["result"].items() if k != CASE}
            try:
                result = from_json(wanted, data)
            except (TypeError, ValueError, KeyError) as exc:
                raise TideError(
                    f"stored case {stored['id']!r} does not read as {wanted.__name__}: {exc}"
                ) from None
        case = {key: stored[key] for key in ("id", "experiment", "kind", "label", "params", "seed")}
        return Record(
            **case,
            status=stored["status"],
            result=result,
            error=stored.get("error"),
            wall_time=stored.get("wall_time", 0.0),
        )


def by_case_kind(
    kind: str,
    summary: str,
    fields: dict[str, Field],
    case_kinds: Mapping[str, CaseKind],
    prepare: Callable[[dict[str, Any]], dict[str, Any]] = dict,
    separator: str = "\n",
) -> Experiment:
    """An experiment with one case per case kind (labelled by its name; the parameters
    pass through `prepare` first), whose section joins the kinds' parts in table order."""

    unfinished = [n for n, k in case_kinds.items() if k.render is None or k.judge is None]
    if unfinished:
        raise TypeError(f"{kind}: case kinds {unfinished} need both a render and a judge")

    def cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        return [(name, prepare(params) | {CASE: name}) for name in case_kinds]

    return Experiment(
        kind,
        summary,
        fields,
        cases,
        case_kinds,
        parts_render(case_kinds, separator),
        parts_judge(case_kinds),
    )


def _parts(
    case_kinds: Mapping[str, CaseKind], records: list[Record]
) -> list[tuple[str, CaseKind, list[Any]]]:
    """Each case kind (its name, which is its case's label, and itself) with the results
    of its finished records, in table order (kinds without one left out)."""
    found = []
    for name, case_kind in case_kinds.items():
        mine = [r.result for r in records if r.ok and r.params.get(CASE) == name]
        if mine:
            found.append((name, case_kind, mine))
    return found


def parts_render(
    case_kinds: Mapping[str, CaseKind], separator: str = "\n"
) -> Callable[[str, list[Record]], Section]:
    """The render of an experiment of several case kinds: each kind's part, in table order,
    from the finished records of that kind, joined into one Section."""

    def render(title: str, records: list[Record]) -> Section:
        parts = [
            case_kind.render(title, mine) for _, case_kind, mine in _parts(case_kinds, records)
        ]
        return Section(
            title,
            separator.join(p.markdown for p in parts),
            [f for p in parts for f in p.figures],
            "".join(p.latex for p in parts),
        )

    return render


def parts_judge(case_kinds: Mapping[str, CaseKind]) -> Callable[[list[Record]], Judgement]:
    """The judge of an experiment of several case kinds: each kind's judgement, in table
    order, from the finished records of that kind, joined (Judgement.joined)."""

    def judge(records: list[Record]) -> Judgement:
        return Judgement.joined(
            case_kind.judge(mine).of_case(name)
            for name, case_kind, mine in _parts(case_kinds, records)
        )

    return judge
