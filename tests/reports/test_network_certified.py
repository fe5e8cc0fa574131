"""A network study with `certify` (issue "certified enclosures", item 3): the record's
certified decisions against a 40-digit reference of the limit that the enclosure did not
produce, the bracket of the float64 limit's error against its true error, the report's
sentence and figures of merit; the study without it, an enclosure that stops short, and
`certify` on models it cannot enclose."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from convergence.network_limit import NetworkLimit
from convergence.network_limit import certified as certified_module
from convergence.network_limit.study import LIMIT_TOLERANCE
from reports.claims import ClaimVerdict
from reports.cli import main
from reports.experiments.network.certified import ErrorBound, error_bound
from reports.experiments.network.merit import network_merit
from reports.experiments.network.verdict import network_evidence
from solvers import LayerWeights, Model, backend, save_model, solve, solve_reference
from solvers.errors import IntegrationError
from solvers.network.readout import Dense, Readout
from solvers.results.records import from_json

STUDY = """
[study]
name = "certified"

[[experiment]]
kind = "network-limit"
name = "tiny"
model = "{model}"
inputs = "inputs.npy"
mask = "mask.npy"
methods = ["lie"]
steps_per_unit = [1, 2, 4, 8]
{extra}
"""
CERTIFY = "certify = 20\ncertify_tolerance = 1e-6"
"""An enclosure at 20 digits with 1e-6 of local truncation per unit time: decisions on
margins near 0.5 need no more."""


def _model(activation: str = "gelu") -> Model:
    """One pre-LN layer (d 4, 2 heads, d_ff 8) and a mean-pooled classifier of 3 classes."""
    rng = np.random.default_rng(7)
    readout = Readout(
        norm=(1 + 0.3 * rng.standard_normal(4), 0.3 * rng.standard_normal(4), 1e-5),
        pool="mean",
        dense=(Dense(rng.standard_normal((4, 3)), rng.standard_normal(3)),),
    )
    layer = LayerWeights.random(4, 2, 8, 3, activation=activation, eps=1e-5)
    return Model((layer,), "pre", readout=readout)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("certified")
    save_model(_model(), folder / "tiny.safetensors")
    save_model(_model("relu"), folder / "relu.safetensors")
    np.save(folder / "inputs.npy", np.random.default_rng(3).standard_normal((2, 3, 4)))
    np.save(folder / "mask.npy", np.array([[1, 1, 1], [1, 1, 0]]))
    return folder


def _run(folder, extra: str, name: str) -> tuple[NetworkLimit, str]:
    study = folder / f"{name}.toml"
    study.write_text(STUDY.format(model="tiny.safetensors", extra=extra))
    out = folder / name
    assert main(["report", str(study), "--out", str(out)]) == 0
    cases = json.loads((out / "results.json").read_text())["cases"]
    record = next(c for c in cases if c["kind"] == "network-limit")["result"]
    return from_json(NetworkLimit, record), (out / "report.md").read_text()


def test_the_certified_decisions_and_error_bracket_hold_against_40_digits(folder):
    result, report = _run(folder, CERTIFY, "with")
    found = result.certified
    assert found is not None and found.failure is None and found.decisions == 2
    assert found.certified_same + found.certified_changed + found.uncertain == 2
    model = _model()
    inputs, mask = np.load(folder / "inputs.npy"), np.load(folder / "mask.npy")
    problem = model.problem(inputs, mask)
    wide = backend("arb", 40)
    exact = wide.to_float64(solve_reference(problem, backend=wide).states[-1])
    own = model.readout.judge(solve(problem, "lie", 1), mask).decisions
    limit = model.readout.judge(exact, mask).decisions
    assert found.certified_same <= np.sum(limit == own)
    assert found.certified_changed <= np.sum(limit != own)
    if found.uncertain == 0:
        assert found.certified_changed == np.sum(limit != own)
    estimate = solve_reference(problem, LIMIT_TOLERANCE, assess=True).states[-1]
    real = mask.astype(bool)
    true = np.max(np.abs(estimate - exact)[real])
    low, high = found.reference_error
    assert low <= true <= high and found.width < 1e-3
    assert "An enclosure of the limit in arb at 20 digits" in report
    assert f"Of the limit's 2 inputs, {2 - found.uncertain} are certified" in report
    assert "proved by an enclosure of the limit at 20 digits" in report  # the claim's row
    merit = network_merit(result, "tiny")
    assert {"certified.same", "certified.changed", "certified.width"} <= set(merit)

    # the claim's verdict follows the proof: one certified change refutes, one decision
    # the enclosure cannot certify keeps it from verified
    def evidence(**counts):
        moved = dataclasses.replace(found, **counts)
        return network_evidence(dataclasses.replace(result, certified=moved)).verdict

    assert evidence(certified_same=1, certified_changed=1, uncertain=0) is ClaimVerdict.REFUTED
    assert evidence(certified_same=1, certified_changed=0, uncertain=1) is not (
        ClaimVerdict.VERIFIED
    )


def test_without_certify_the_report_says_nothing_was_proved(folder):
    result, report = _run(folder, "", "without")
    assert result.certified is None
    assert "No enclosure of the limit was asked for (`certify`)" in report
    assert not any(name.startswith("certified") for name in network_merit(result, "tiny"))


def test_an_enclosure_that_stops_short_keeps_the_reason_and_no_figure(folder, monkeypatch):
    def stops(*args, **kwargs):
        raise IntegrationError("no step from t = 0.5 on layer 0 could be validated")

    monkeypatch.setattr(certified_module, "enclose", stops)
    result, report = _run(folder, CERTIFY, "short")
    assert result.certified.failure.startswith("no step from t = 0.5")
    assert result.certified.decisions is None and result.certified.width is None
    assert "stopped short" in report and "none of its decisions is proved" in report
    assert set(network_merit(result, "tiny")) >= {"certified.reached"}


@pytest.mark.parametrize(
    ("model", "extra", "says"),
    [
        ("relu.safetensors", "certify = 30", "ReLU"),
        ("tiny.safetensors", "certify_tolerance = 1e-8", "needs certify"),
        ("tiny.safetensors", "certify = 30\ncertify_tolerance = 2.0", "must be < 1"),
        ("tiny.safetensors", "certify = 8", "certify"),
    ],
)
def test_certify_that_cannot_run_is_refused_in_one_line(folder, capsys, model, extra, says):
    study = folder / "bad.toml"
    study.write_text(STUDY.format(model=model, extra=extra))
    assert main(["report", str(study), "--out", str(folder / "never")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and says in err and "certify" in err
    assert not (folder / "never").exists()


@pytest.mark.parametrize(
    ("assessed", "verdict"),
    [
        (2e-8, ErrorBound.BOUNDS),
        (1e-8, ErrorBound.BOUNDS),
        (5e-9, ErrorBound.UNDECIDED),
        (1e-10, ErrorBound.FALLS_SHORT),
    ],
)
def test_the_assessed_error_is_judged_by_the_bracket_ends(assessed, verdict):
    found = certified_module.CertifiedLimit(
        30, 1e-8, 10, 1.0, None, 1e-9, 10, 0, 2, 2, 0, 0, (1e-9, 1e-8)
    )
    assert error_bound(found, assessed) is verdict
