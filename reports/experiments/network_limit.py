"""kind "network-limit": a user's trained network against its own time-step limit.

    [[experiment]]
    kind = "network-limit"
    model = "vit-digits"            # a save_pretrained directory or a save_model file,
                                    # relative to the study file
    inputs = "inputs.npy"           # initial token states, shape (B, N, d)
    labels = "labels.npy"           # optional: class indices, shape (B,)
    methods = ["lie", "strang-rk2"]
    steps_per_unit = [1, 2, 4, 8, 16]

The files are read and checked when the study is read (a pickle, or an .npy of objects,
is refused there, unread); the case's parameters carry their SHA-256 digests, so a
changed file reruns the case on --resume. The computation is
convergence.network_limit (docs/networks.md section 3).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from convergence.network_limit import NetworkLimit, network_limit
from convergence.order import OrderVerdict
from reports.claims import Claim, ClaimVerdict, Evidence, verified_or
from reports.experiments.base import CaseKind, Experiment, Record, Section, results
from reports.figures import Figure, lines_figure, slug
from reports.schema import Field, array_of, integer, one_of, reject, text
from reports.tables import latex_table, markdown_table
from reports.tables import number as cell
from solvers import load_model
from solvers.errors import InvalidInputError
from solvers.methods import METHODS


def _model_path(value: Any, where: str) -> str:
    path = text(value, where)
    try:
        load_model(path)
    except InvalidInputError as exc:
        raise reject(where, str(exc)) from None
    return path


def _array_file(value: Any, where: str) -> str:
    path = text(value, where)
    _read_array(path, where)
    return path


def _read_array(path: str, where: str) -> np.ndarray:
    """An .npy array, never unpickled (allow_pickle=False refuses object arrays)."""
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise reject(where, f"no such file {path}") from None
    except (ValueError, OSError) as exc:
        raise reject(
            where, f"{path} is not a numeric .npy array (never unpickled): {exc}"
        ) from None


FIELDS = {
    "model": Field(
        _model_path, help="a save_pretrained directory or a .safetensors file", relative=True
    ),
    "inputs": Field(_array_file, help="an .npy of initial token states (B, N, d)", relative=True),
    "labels": Field(_array_file, None, "an .npy of class indices (B,)", relative=True),
    "methods": Field(array_of(one_of(tuple(METHODS)), minimum=1, distinct=True), ["lie"]),
    "steps_per_unit": Field(
        array_of(integer(1, 100_000), minimum=2, distinct=True), [1, 2, 4, 8, 16]
    ),
}


def _digest(path: str) -> str:
    """SHA-256 of a file, or of a folder's files (names and contents, in name order)."""
    sha = hashlib.sha256()
    target = Path(path)
    for file in sorted(target.iterdir()) if target.is_dir() else [target]:
        if file.is_file():
            sha.update(file.name.encode())
            sha.update(file.read_bytes())
    return sha.hexdigest()


def _cases(params: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    files = {key: params[key] for key in ("model", "inputs", "labels") if params[key] is not None}
    return [("network", params | {"sha256": {key: _digest(p) for key, p in files.items()}})]


def _run(case: dict[str, Any], seed: int) -> NetworkLimit:
    model = load_model(case["model"])
    inputs = _read_array(case["inputs"], "inputs")
    labels = None if case["labels"] is None else _read_array(case["labels"], "labels")
    return network_limit(
        model, inputs, labels, methods=case["methods"], steps_per_unit=case["steps_per_unit"]
    )


CLOSE_TO_OWN_LIMIT = 1e-2
"""A network is close to its limit when its relative distance from it (dt = 1) is below this
and no decision of its readout changes in the limit."""
JUDGEABLE = 0.1
"""The limit's own error must be below this share of CLOSE_TO_OWN_LIMIT (relative) for a
distance below that threshold to verify the claim."""


def network_evidence(result: NetworkLimit) -> Evidence:
    """Refuted when a decision changes in the limit, or when there is no limit (NO-LIMIT);
    qualified when no decision changes but the distance is above CLOSE_TO_OWN_LIMIT (or
    when the limit check finds something other than NO-LIMIT); verified otherwise."""
    name = Path(result.source).name
    if result.no_limit is not None:
        check = result.no_limit
        verdict = (
            ClaimVerdict.REFUTED
            if check.verdict == OrderVerdict.NO_LIMIT
            else ClaimVerdict.QUALIFIED
        )
        return Evidence(
            Claim.TRAINED_NEAR_LIMIT, verdict,
            f"{name}: no limit to measure against (post-LN per-feature norms): the refined "
            f"network's sequence is {check.verdict} ({check.reason})",
        )  # fmt: skip
    changed, distance = result.limit_decisions_changed, result.network_distance
    judgeable = result.limit_error <= JUDGEABLE * CLOSE_TO_OWN_LIMIT * result.limit_size
    if changed:
        verdict = ClaimVerdict.REFUTED
    else:
        close = distance <= CLOSE_TO_OWN_LIMIT and judgeable
        verdict = verified_or(close, ClaimVerdict.QUALIFIED)
    decisions = "" if changed is None else f", {changed} of {result.batch} decisions changed"
    return Evidence(
        Claim.TRAINED_NEAR_LIMIT, verdict,
        f"{name}: relative distance {distance:.3g} from its limit at dt = 1{decisions} "
        f"(close: below {CLOSE_TO_OWN_LIMIT:g} and none changed, with the limit's own error "
        f"below {JUDGEABLE:g} of that: {result.limit_error:.2g} absolute)",
    )  # fmt: skip


def _meaning(result: NetworkLimit) -> str:
    """What the numbers say about reading this network as one Lie step per layer."""
    if result.no_limit is not None:
        last = result.methods[0].decisions_changed
        moved = "" if last is None else f"; {last[-1]} decisions change at the finest level"
        return (
            "Its post-LN per-feature norms give no time-step limit: refined, the network "
            f"does not settle ({result.no_limit.verdict}), so the continuous reading has no "
            f"flow that this network discretises{moved}."
        )
    changed, distance = result.limit_decisions_changed, result.network_distance
    if changed:
        return (
            f"{changed} of {result.batch} decisions differ in the limit: the network is not "
            "close to the flow the paper reads it as a step of, and its accuracy "
            f"({cell(result.network_accuracy)}) belongs to the discrete network at dt = 1, "
            f"not to the continuous model ({cell(result.limit_accuracy)} there)."
        )
    if distance <= CLOSE_TO_OWN_LIMIT:
        return "The network is close to its limit: the continuous reading describes it."
    return (
        "No decision changes in the limit, but the outputs are not close to it: the "
        "continuous reading describes the decisions, not the states."
    )


def _render(title: str, records: list[Record[NetworkLimit]]) -> Section:
    done = results(records)
    if not done:
        return Section(title, "No finished case.\n")
    result = done[0]
    headers = ["method", "steps per unit", "relative distance", "decisions changed", "accuracy"]
    rows = []
    for levels in result.methods:
        for i, m in enumerate(result.steps_per_unit):
            rows.append([
                levels.method, str(m),
                cell(levels.relative_distance[i] if levels.relative_distance else None),
                "-" if levels.decisions_changed is None else str(levels.decisions_changed[i]),
                cell(levels.accuracy[i] if levels.accuracy else None),
            ])  # fmt: skip
    lines = [f"Network `{Path(result.source).name}` on {result.batch} inputs."]
    if result.no_limit is None:
        changed = result.limit_decisions_changed
        lines.append(
            f"Its time-step limit (the reference's own error {result.limit_error:.2g}): "
            f"{'-' if changed is None else changed} decisions changed, accuracy "
            f"{cell(result.limit_accuracy)} (the network's own: "
            f"{cell(result.network_accuracy)})."
        )
    else:
        check = result.no_limit
        lines.append(f"No limit to measure against: {check.verdict} ({check.reason}).")
    lines.append(
        "Depth smoothness, relative change between consecutive layers: "
        + ", ".join(f"{c:.3g}" for c in result.depth_change)
        + f"; the smooth twin is at relative distance {result.smooth_twin_distance:.3g}"
        + (
            f" and changes {result.smooth_twin_decisions_changed} decision(s)."
            if result.smooth_twin_decisions_changed is not None
            else "."
        )
    )
    lines.append(_meaning(result))
    markdown = "\n\n".join(lines) + "\n\n" + markdown_table(headers, rows)
    steps = [float(m) for m in result.steps_per_unit]
    figures = []
    series = [(lv.method, steps, lv.relative_distance) for lv in result.methods
              if lv.relative_distance is not None]  # fmt: skip
    if series:  # a limit to measure against
        figures.append(
            Figure(
                slug(f"{title} distance"),
                "Relative distance from the time-step limit against steps per unit.",
                lines_figure(title, "steps per unit", "relative distance", series),
            )
        )
    if result.methods[0].decisions_changed is not None:
        series = [(lv.method, steps, [float(c) for c in lv.decisions_changed])
                  for lv in result.methods]  # fmt: skip
        figures.append(
            Figure(
                slug(f"{title} decisions"),
                "Decisions changed (against the network's own) against steps per unit.",
                lines_figure(title, "steps per unit", "decisions changed", series, logy=False),
            )
        )
    evidence = [network_evidence(result)]
    return Section(title, markdown, figures, latex_table(title, headers, rows), evidence)


NETWORK_LIMIT = Experiment(
    "network-limit",
    "a trained network (model file or directory) against its own time-step limit",
    FIELDS,
    _cases,
    {"network-limit": CaseKind(_run, NetworkLimit)},
    _render,
)
