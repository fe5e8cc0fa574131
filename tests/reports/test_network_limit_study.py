"""The "network-limit" study kind end to end: a save_pretrained ViT classifier, its input
states and its own predictions as labels, through `tide report`; a pickle refused unread."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from reports.cli import main
from tests.hf_models import PickleTrap, vit_classifier

STUDY = """
[study]
name = "trained"

[[experiment]]
kind = "network-limit"
name = "vit"
model = "{model}"
inputs = "inputs.npy"
labels = "labels.npy"
methods = ["lie", "strang-rk2"]
steps_per_unit = [1, 2, 4, 8]
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A study folder: the ViT's save_pretrained directory, inputs and labels."""
    folder = tmp_path_factory.mktemp("network")
    module, out = vit_classifier(layers=2, patch=4, labels=5, batch=10, seed=0)
    module.save_pretrained(folder / "vit")
    np.save(folder / "inputs.npy", out.hidden_states[0].numpy())
    np.save(folder / "labels.npy", out.logits.numpy().argmax(-1))
    return folder


def test_a_trained_network_through_tide_report(folder):
    study = folder / "study.toml"
    study.write_text(STUDY.format(model="vit"))
    out = folder / "out"
    assert main(["report", str(study), "--out", str(out)]) == 0
    cases = json.loads((out / "results.json").read_text())["cases"]
    result = next(c for c in cases if c["kind"] == "network-limit")["result"]
    assert result["steps_per_unit"] == [1, 2, 4, 8]
    lie = next(m for m in result["methods"] if m["method"] == "lie")
    assert lie["decisions_changed"][0] == 0 and lie["accuracy"][0] == 1.0
    assert all(d > 0 for d in lie["relative_distance"][1:])
    assert result["limit_error"] < 1e-10 and len(result["depth_change"]) == 1
    figures = {p.name for p in (out / "figures").iterdir()}
    assert {"vit-distance.png", "vit-decisions.png"} <= figures
    assert "| lie | 1 |" in (out / "report.md").read_text()


def test_a_pickled_model_is_refused_in_one_line(folder, capsys):
    marker = folder / "unpickled"
    (folder / "model.pt").write_bytes(pickle.dumps(PickleTrap(marker)))
    study = folder / "pickle.toml"
    study.write_text(STUDY.format(model="model.pt"))
    assert main(["report", str(study), "--out", str(folder / "never")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model.pt" in err and "never unpickles" in err
    assert not marker.exists() and not (folder / "never").exists()
