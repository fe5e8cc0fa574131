"""A network-limit study is checked when it is read: every input that cannot run is refused
with exit 1 and one line naming the file and the key, before anything runs; a case that
fails while running still lets the report be written, and then `tide report` exits 1."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest

from convergence.network_limit import NetworkLimit
from reports.cli import main
from solvers.io.model_files import load_model, save_model
from tests.hf_models import SHIPPED

VIT = SHIPPED / "vit-digits"
ENCODER = SHIPPED / "max-digit.safetensors"


def _study(folder, **keys) -> str:
    """A study file of one network-limit experiment with `keys` (arrays saved as .npy)."""
    lines = ['[study]\nname = "checks"\n\n[[experiment]]\nkind = "network-limit"\nname = "net"']
    for key, value in keys.items():
        if isinstance(value, np.ndarray):
            np.save(folder / f"{key}.npy", value)
            value = f"{key}.npy"
        lines.append(f"{key} = {json.dumps(value)}")
    path = folder / "study.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _refused(folder, capsys, **keys) -> str:
    out = folder / "never"
    assert main(["report", _study(folder, **keys), "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "study.toml" in err, err
    assert not out.exists()  # nothing ran
    return err


STATES = np.load(SHIPPED / "vit-digits-inputs.npy")[:4].astype(np.float64)
LABELS = np.load(SHIPPED / "vit-digits-labels.npy")[:4]
ENCODER_STATES = np.load(SHIPPED / "max-digit-inputs.npy")[:3].astype(np.float64)


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"inputs": STATES[..., :16]}, r"inputs: .*inputs must have shape \(\*, \*, 32\)"),
        ({"inputs": STATES[0]}, r"inputs must have shape \(\*, \*, 32\), got \(17, 32\)"),
        (
            {"inputs": np.where(STATES == STATES[1, 2, 3], np.nan, STATES)},
            r"inputs must be finite, got nan at index \(1, 2, 3\)",
        ),
        (
            {"inputs": STATES, "labels": LABELS[:3]},
            r"labels: .*labels must be integer class indices of shape \(4\)",
        ),
        ({"inputs": STATES, "labels": LABELS.astype(float)}, "labels must be integer class"),
        (
            {"inputs": STATES, "labels": np.array([0, 1, 2, 10])},
            r"labels must lie in \[0, 10\) \(the readout's 10 scores\), got 10",
        ),
        ({"inputs": STATES, "mask": np.ones((4, 16), int)}, r"mask: .*shape \(4, 17\)"),
        ({"inputs": STATES, "mask": np.full((4, 17), 2)}, "mask must hold only 0 and 1"),
        ({}, "give exactly one of inputs, tokens, pixels .* got none"),
        ({"inputs": STATES, "pixels": np.zeros((4, 1, 8, 8))}, "got inputs, pixels"),
        ({"pixels": np.zeros((4, 1, 7, 7))}, "the patch size 2 must divide the image size 7"),
        ({"pixels": np.zeros((4, 1, 6, 6))}, "make 9 patches of 2 x 2; the model's position"),
        ({"tokens": np.zeros((4, 17), int)}, "the model embeds pixels, not tokens"),
        (
            {"inputs": STATES, "steps_per_unit": [1, 2, 4, 8], "max_steps_per_unit": 4},
            "max_steps_per_unit: must be at least the finest level",
        ),
        ({"inputs": STATES, "precision": ["float99"]}, r"precision.*float99"),
        ({"inputs": STATES, "precision": ["float32", "float32"]}, r"precision.*float32"),
    ],
)
def test_what_cannot_run_is_refused_when_the_study_is_read(tmp_path, capsys, keys, message):
    err = _refused(tmp_path, capsys, model=str(VIT), **keys)
    assert re.search(message, err), err


def test_an_input_longer_than_a_sliding_window_is_refused_at_its_key(tmp_path, capsys):
    """The suite does not implement the window's mask: a longer input is refused, naming
    the study key that carries it."""
    model = load_model(SHIPPED / "char-sums-llama")
    save_model(dataclasses.replace(model, window=8), tmp_path / "windowed.safetensors")
    tokens = np.load(SHIPPED / "char-sums-tokens.npy")[:2]
    err = _refused(tmp_path, capsys, model="windowed.safetensors", tokens=tokens)
    assert re.search(r"tokens: .*sliding_window = 8 is shorter than the input's 24", err), err


def test_a_method_the_norms_do_not_allow_is_refused(tmp_path, capsys):
    """Post-LN per-feature norms have no flow for any method but Lie."""
    err = _refused(
        tmp_path, capsys, model=str(ENCODER), inputs=ENCODER_STATES, methods=["lie", "strang-rk2"]
    )
    assert "methods: layer 0 norm1 has a per-feature gain or bias" in err


def test_a_case_that_fails_while_running_still_writes_the_report(tmp_path, capsys, monkeypatch):
    """The study passes its checks; its case raises while running: the report is written
    with the failure listed, and the exit status is 1."""
    from reports.experiments.network import experiment

    def broken(*args, **kwargs) -> NetworkLimit:
        raise FloatingPointError("the integrator broke down (a test's stand-in)")

    monkeypatch.setattr(experiment, "network_limit", broken)
    out = tmp_path / "out"
    study = _study(tmp_path, model=str(VIT), inputs=STATES, labels=LABELS)
    assert main(["report", study, "--out", str(out)]) == 1
    report = (out / "report.md").read_text()
    assert "**Failed cases:**" in report and "the integrator broke down" in report
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("tide: 1 case failed while running; the report")
    assert json.loads((out / "results.json").read_text())["provenance"]["failed cases"] == 1
