"""A baseline of a network study sees its figures: an unchanged re-run passes, a 1% weight
perturbation and flipped labels fail `tide check` and are listed by experiment, case,
figure, old and new value and tolerance (issue 43, item 1)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from reports.cli import main
from tests.hf_models import vit_classifier

STUDY = """
[study]
name = "network baseline"

[[experiment]]
kind = "network-limit"
name = "vit"
model = "vit"
inputs = "inputs.npy"
labels = "labels.npy"
methods = ["lie", "strang-rk2"]
steps_per_unit = [1, 2, 4, 8]
precision = ["float32"]
"""


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A study of a small ViT classifier labelled with its own predictions, and its
    baseline."""
    folder = tmp_path_factory.mktemp("network-baseline")
    module, out = vit_classifier(layers=2, patch=4, labels=5, batch=10, seed=1)
    module.save_pretrained(folder / "vit")
    np.save(folder / "inputs.npy", out.hidden_states[0].numpy())
    np.save(folder / "labels.npy", out.logits.numpy().argmax(-1))
    (folder / "study.toml").write_text(STUDY)
    assert main(["baseline", "save", str(folder / "baseline"), str(folder / "study.toml")]) == 0
    return folder, module


def _check(folder, out: str, capsys) -> tuple[int, str]:
    code = main(
        ["check", "--baseline", str(folder / "baseline"), str(folder / "study.toml"), "--out",
         str(folder / out)]
    )  # fmt: skip
    return code, capsys.readouterr().out


def test_the_baseline_keeps_every_printed_figure(saved):
    folder, _ = saved
    figures = json.loads((folder / "baseline" / "baseline.json").read_text())["figures"]["vit"]
    for method in ("lie", "strang-rk2"):
        for m in (1, 2, 4, 8):
            assert f"{method}.{m} per unit.relative_distance" in figures
            assert figures[f"{method}.{m} per unit.decisions_changed"]["rule"] == "exact"
            assert f"{method}.{m} per unit.loss" in figures
    assert figures["network_distance"]["rule"] == "within"
    assert 0 < figures["network_distance"]["tolerance"] < 1e-6
    uncertain = figures["limit.decisions_uncertain"]["value"]
    assert figures["limit.decisions_changed"].get("tolerance", 0) == uncertain
    assert figures["limit.accuracy"]["rule"] == "within"
    assert figures["limit.accuracy"]["tolerance"] == uncertain / 10
    for layer in (0, 1):  # which layer drives the distance
        assert {f"layer {layer}.{f}" for f in ("defect", "carried", "share")} <= set(figures)
    assert figures["network_distance.median"]["rule"] == "within"
    assert figures["rounding backend('float32').relative_distance"]["rule"] == "growth"
    assert figures["rounding backend('float32').decisions_changed"]["rule"] == "exact"
    assert figures["lie.refined"]["value"] == 0


def test_an_unchanged_rerun_passes(saved, capsys):
    folder, _ = saved
    code, printed = _check(folder, "same", capsys)
    assert code == 0, printed
    assert "within its baseline tolerance" in printed


def test_a_one_percent_weight_perturbation_fails(saved, capsys):
    folder, module = saved
    perturbed = folder / "perturbed"
    perturbed.mkdir()
    for name in ("inputs.npy", "labels.npy", "study.toml"):
        (perturbed / name).write_bytes((folder / name).read_bytes())
    (perturbed / "baseline").symlink_to(folder / "baseline")
    generator = torch.Generator().manual_seed(2)
    state = {
        k: v * (1 + 0.01 * torch.randn(v.shape, generator=generator, dtype=v.dtype))
        for k, v in module.state_dict().items()
    }
    module.load_state_dict(state)
    module.save_pretrained(perturbed / "vit")
    code, printed = _check(perturbed, "check", capsys)
    assert code == 1, printed
    listed = [line for line in printed.splitlines() if line.startswith("  vit | network | ")]
    assert any("relative_distance" in line and "tolerance: within" in line for line in listed)
    assert any(line.startswith("  vit | network | network_distance: ") for line in listed)


def test_flipped_labels_fail(saved, capsys):
    folder, _ = saved
    flipped = folder / "flipped"
    flipped.mkdir()
    (flipped / "vit").symlink_to(folder / "vit")
    (flipped / "baseline").symlink_to(folder / "baseline")
    (flipped / "inputs.npy").write_bytes((folder / "inputs.npy").read_bytes())
    (flipped / "study.toml").write_text(STUDY)
    np.save(flipped / "labels.npy", (np.load(folder / "labels.npy") + 1) % 5)
    code, printed = _check(flipped, "check", capsys)
    assert code == 1, printed
    assert "vit | network | lie.1 per unit.accuracy: 1.0 -> 0.0 (tolerance: exact)" in printed
    assert "lie.1 per unit.loss" in printed
