"""`tide report` writes the claims report; every claim comes out as MODEL.md predicts."""

from __future__ import annotations

import json
import subprocess
import sys

from reports.cli import main


def test_report_writes_markdown_and_lossless_json(tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", "--out", str(out)]) == 0
    markdown = (out / "report.md").read_text()
    results = json.loads((out / "results.json").read_text())
    checks = results["checks"]
    assert len(checks) >= 100
    assert "| claim | configuration | verdict |" in markdown
    assert "NOT AS PREDICTED" not in markdown
    for check in checks:
        assert check["verdict"] == check["predicted"], check
        # shortest round-trip decimal strings: the float is recovered exactly
        assert repr(float(check["defect"])) == check["defect"]
    claims = {check["claim"] for check in checks}
    assert "P(V) is the nearest point of S1" in claims
    assert any("torch" in check["configuration"].get("reference", "") for check in checks)
    rounding = results["rounding_by_depth"]
    assert [study["configuration"]["norm"] for study in rounding] == ["post", "pre"]
    assert all(all(study["within_bound"].values()) for study in rounding)
    assert "## Rounding error against depth" in markdown
    progress = capsys.readouterr().err
    assert progress.startswith("[1/") and "0 not as predicted" in progress


def test_version_and_usage_errors():
    version = subprocess.run(
        [sys.executable, "-m", "reports.cli", "--version"], capture_output=True, text=True
    )
    assert version.returncode == 0 and version.stdout.startswith("tide 0.")
    usage = subprocess.run(
        [sys.executable, "-m", "reports.cli", "report", "--bogus"], capture_output=True, text=True
    )
    assert usage.returncode == 2 and "unrecognized arguments: --bogus" in usage.stderr
