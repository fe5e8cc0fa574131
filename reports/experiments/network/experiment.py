"""kind "network-limit": a user's trained network against its own time-step limit.

    [[experiment]]
    kind = "network-limit"
    model = "vit-digits"            # a save_pretrained directory or a save_model file,
                                    # relative to the study file
    inputs = "inputs.npy"           # initial token states (B, N, d); or instead
    tokens = "tokens.npy"           #   token ids (B, N), embedded by the model itself; or
    pixels = "pixels.npy"           #   images (B, C, H, W) for a ViT
    mask = "mask.npy"               # optional: 0/1 padding mask (B, N), 1 for a real token
    labels = "labels.npy"           # optional: class indices (B,); an LM head is judged
                                    #   against its own next tokens instead
    methods = ["lie", "strang-rk2"]
    steps_per_unit = [1, 2, 4, 8, 16]
    max_steps_per_unit = 256        # optional: a budget; a method with fewer than 3 levels
                                    #   within 0.1 of the limit doubles its finest level up
                                    #   to here, and a limit check may refine on its own
    precision = ["float32", "bfloat16"]  # optional: the network (dt = 1) in these number
                                    #   systems too, against its float64 solve
    certify = 30                    # optional: arb digits of an enclosure of the limit
                                    #   (smooth flows: GELU, SiLU; pre-LN, pre-RMSNorm, none)
    certify_tolerance = 1e-8        # optional: its local truncation (default 10^-(certify-5))

Everything that can be checked before running is checked when the study is read
(reports.experiments.network_inputs: the files, never unpickled; shapes and widths
against the model; NaN; token ids, labels and the mask; the methods the model's norms
allow): a one-line error naming the file and the key, and nothing runs. The case's
parameters carry the files' SHA-256 digests, so a changed file reruns the case on
--resume. The computation is convergence.network_limit (docs/networks.md sections 3, 5
and 7); the section is drawn by reports.experiments.network.render and its figures of
merit are reports.experiments.network.merit.
"""

from __future__ import annotations

from typing import Any

from convergence.network_limit import NetworkLimit, network_limit
from reports.experiments.base import CaseKind, Experiment, Judgement, Record
from reports.experiments.network.inputs import FIELDS, Network, check_network, network_cases
from reports.experiments.network.merit import network_merit
from reports.experiments.network.render import render
from reports.experiments.network.verdict import network_evidence
from solvers import backend


def _run(case: dict[str, Any], seed: int) -> NetworkLimit:
    network = Network(case)
    return network_limit(
        network.model,
        network.states,
        network.targets,
        mask=network.mask,
        methods=case["methods"],
        steps_per_unit=case["steps_per_unit"],
        max_steps_per_unit=case["max_steps_per_unit"],
        precisions=[backend(p["name"], p["digits"]) for p in case["precision"]],
        certify=case["certify"],
        certify_tolerance=case["certify_tolerance"],
    )


def _judge(records: list[Record[NetworkLimit]]) -> Judgement:
    """Every figure the section prints as a figure of merit (network_merit), and
    `network_evidence` (none when the limit check cannot decide)."""
    done = [r for r in records if r.ok]
    if not done:
        return Judgement()
    result = done[0].result
    evidence = [e for e in [network_evidence(result)] if e is not None]
    return Judgement(evidence, network_merit(result, done[0].label))


NETWORK_LIMIT = Experiment(
    "network-limit",
    "a trained network (model file or directory) against its own time-step limit",
    FIELDS,
    network_cases,
    {"network-limit": CaseKind(_run, NetworkLimit)},
    render,
    _judge,
    check_network,
)
