"""`tide baseline save` and `tide check` judge the records without drawing: run end to
end in a fresh interpreter, neither imports matplotlib."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.reports.studies import tiny_study_text, write_study

ROOT = Path(__file__).resolve().parents[2]
KINDS = [
    "invariants",
    "time-step",
    "grid",
    "precision-ladder",
    "rounding-depth",
    "layer-norm-limit",
    "transformer-limit",
    "well-posedness",
    "stability",
    "vit",
    "conditioning",
]
"""Kinds of one case kind and of several (vit: the vision parts), seconds to run."""
CHECK = """
import sys
from reports.cli import main

study, baseline, out = sys.argv[1:]
saved = main(["baseline", "save", baseline, study])
drawn = "matplotlib" in sys.modules
checked = main(["check", "--baseline", baseline, study, "--out", out])
print(saved, checked, drawn, "matplotlib" in sys.modules)
"""


def test_baseline_and_check_never_import_matplotlib(tmp_path):
    study = write_study(tmp_path, tiny_study_text(KINDS), "tiny.toml")
    baseline, out = tmp_path / "baseline", tmp_path / "check"
    result = subprocess.run(
        [sys.executable, "-c", CHECK, str(study), str(baseline), str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.split()[-4:] == ["0", "0", "False", "False"], result.stderr
    assert "within its baseline tolerance" in result.stdout
    assert (baseline / "baseline.json").is_file() and any((out / "cases").iterdir())
