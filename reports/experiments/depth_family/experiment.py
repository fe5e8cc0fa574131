"""kind "depth-family": networks of growing depth with depth-scaled residuals against their
own flows and each other (docs/depth.md).

    [[experiment]]
    kind = "depth-family"
    models = ["L2.safetensors", "L4.safetensors", "L8.safetensors"]  # one family, or
    # [experiment.models]                           # a table of families by name:
    # smooth = ["smooth/L2.safetensors", ...]       #   "smooth" and "independent" speak
    # independent = ["independent/L2.safetensors", ...]  # to the claims on depth
    tokens = "tokens.npy"       # or inputs (token states) or pixels, as network-limit
    labels = "labels.npy"       # optional; an LM head is judged on its own next tokens
    mask = "mask.npy"           # optional padding mask
    horizon = 2.0               # T: member L's residuals were scaled by h = T / L

Everything that can be checked before running is checked when the study is read
(reports.experiments.depth_family.inputs): a one-line error naming the file and the key.
One case per family, whose parameters carry the files' digests. The computation is
convergence.depth_family; the section is drawn by reports.experiments.depth_family.render,
its evidence is reports.experiments.depth_family.evidence and its figures of merit
reports.experiments.depth_family.merit.
"""

from __future__ import annotations

from typing import Any

from convergence.depth_family import DepthFamily, depth_family
from reports.experiments.base import CaseKind, Experiment, Judgement, Record
from reports.experiments.depth_family.evidence import family_evidence
from reports.experiments.depth_family.inputs import (
    FIELDS,
    check_family_study,
    family_cases,
    members,
)
from reports.experiments.depth_family.merit import family_merit
from reports.experiments.depth_family.render import render


def _run(case: dict[str, Any], seed: int) -> DepthFamily:
    read = members(case, case["family"])
    first = read[0]
    return depth_family(
        [n.model for n in read],
        [n.states for n in read],
        first.targets,
        mask=first.mask,
        horizon=case["horizon"],
    )


def _judge(records: list[Record[DepthFamily]]) -> Judgement:
    """Each family's evidence (family_evidence, by its name) and figures of merit."""
    done = [r for r in records if r.ok]
    evidence = [e for r in done if (e := family_evidence(r.label, r.result)) is not None]
    merit = {}
    for r in done:
        merit |= {f"{r.label}.{k}": v for k, v in family_merit(r.result, r.label).items()}
    return Judgement(evidence, merit)


DEPTH_FAMILY = Experiment(
    "depth-family",
    "networks of growing depth with depth-scaled residuals against their flows and each other",
    FIELDS,
    family_cases,
    {"depth-family": CaseKind(_run, DepthFamily)},
    render,
    _judge,
    check_family_study,
)
