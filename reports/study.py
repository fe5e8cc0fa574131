"""Study files: TOML that names experiments, checked against the schema, expanded into cases.

    [study]
    name = "my study"          # required
    seed = 1                   # optional, default 0: every case's seed derives from it
    description = "..."        # optional

    [[experiment]]
    kind = "time-step"         # one of reports.experiments.EXPERIMENTS (`tide list`)
    name = "post-LN orders"    # optional, unique; default "<kind> <n>"
    ...                        # the kind's keys

A Case is one independent computation: its id "<experiment name>/<label>", the kind,
its plain JSON parameters and a seed derived deterministically (SHA-256) from the study
seed and the experiment's name, so any process or machine computes the same case the
same way, and the cases of one experiment (the methods of a time-step study, the
precisions of a ladder) share their problem.
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from reports.experiments import EXPERIMENTS
from reports.experiments.base import Case
from reports.schema import Field, StudyFileError, integer, one_of, reject, table, text

STUDY_FIELDS = {
    "name": Field(text),
    "seed": Field(integer(0, 2**63 - 1), 0),
    "description": Field(text, ""),
}
DEFAULT_STUDY = "default.toml"


@dataclass(frozen=True)
class ExperimentSpec:
    name: str
    kind: str
    params: dict[str, Any]


@dataclass(frozen=True)
class Study:
    name: str
    seed: int
    description: str
    experiments: list[ExperimentSpec]
    source: str

    def cases(self) -> list[Case]:
        """Every case of every experiment, in study order."""
        cases = []
        for spec in self.experiments:
            digest = hashlib.sha256(f"{self.seed}/{spec.name}".encode()).digest()
            seed = int.from_bytes(digest[:4], "big")
            for label, params in EXPERIMENTS[spec.kind].cases(spec.params):
                case_id = f"{spec.name}/{label}"
                cases.append(Case(case_id, spec.name, spec.kind, label, params, seed))
        return cases


def parse_study(document: dict[str, Any], source: str, folder: Path | None = None) -> Study:
    """A Study from a parsed TOML document; every rejection names `source` and the key.
    Relative paths in it are read from `folder` (default: the folder of `source`)."""
    folder = Path(source).parent if folder is None else folder
    try:
        top = table(
            document,
            "",
            {
                "study": Field(lambda v, w: table(v, w, STUDY_FIELDS)),
                "experiment": Field(lambda v, w: _experiment_list(v, w, folder)),
            },
        )
    except StudyFileError as exc:
        raise StudyFileError(f"{source}: {exc}") from None
    head = top["study"]
    return Study(head["name"], head["seed"], head["description"], top["experiment"], source)


def _experiment_list(value: Any, where: str, folder: Path) -> list[ExperimentSpec]:
    if not isinstance(value, list) or not value:
        raise reject(where, "must be one or more [[experiment]] tables")
    specs, names = [], set()
    for index, entry in enumerate(value):
        path = f"{where}[{index}]"
        if not isinstance(entry, dict):
            raise reject(path, f"must be a table, got {entry!r}")
        if "kind" not in entry:
            raise reject(f"{path}.kind", f"is required; allowed: {', '.join(EXPERIMENTS)}")
        kind = one_of(tuple(EXPERIMENTS))(entry["kind"], f"{path}.kind")
        name = text(entry.get("name", f"{kind} {index + 1}"), f"{path}.name")
        if "/" in name:
            raise reject(f"{path}.name", f"must not contain '/', got {name!r}")
        if name in names:
            raise reject(f"{path}.name", f"{name!r} is used by another experiment")
        names.add(name)
        fields = EXPERIMENTS[kind].fields
        rest = {k: v for k, v in entry.items() if k not in ("kind", "name")}
        for key, value in rest.items():
            if key in fields and fields[key].relative:
                rest[key] = _relative(value, folder)
        params = table(rest, path, fields)
        if EXPERIMENTS[kind].check is not None:
            params = EXPERIMENTS[kind].check(params, path)
        specs.append(ExperimentSpec(name, kind, params))
    return specs


def _relative(value: Any, folder: Path) -> Any:
    """A relative field's paths made absolute: a string, or the strings of an array or a
    table (of arrays) of them; anything else is left for the field's parser to reject."""
    if isinstance(value, str):
        return str(folder / value)
    if isinstance(value, list):
        return [_relative(v, folder) for v in value]
    if isinstance(value, dict):
        return {k: _relative(v, folder) for k, v in value.items()}
    return value


def load_study(path: str | Path) -> Study:
    """Read and check a study file (never a traceback: StudyFileError names the problem)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise StudyFileError(f"{path}: cannot read the study file ({exc.strerror})") from None
    try:
        document = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise StudyFileError(f"{path}: not valid TOML: {exc}") from None
    return parse_study(document, str(path))


def default_study() -> Study:
    """The built-in study shipped in the package (reports/default.toml)."""
    source = resources.files("reports").joinpath(DEFAULT_STUDY)
    document = tomllib.loads(source.read_text(encoding="utf-8"))
    return parse_study(document, f"built-in {DEFAULT_STUDY}", Path(str(resources.files("reports"))))
