"""The "depth-family" study kind end to end (issue 46's synthetic acceptance): families
written by save_model, no training. Weights sampled from a smooth theta(t) at the layer
times give increment and family rates within 0.2 of 1 and the verdict "approaches the
flow of weights smooth in depth"; weights alternating between two fixed layers give a
family rate within 0.2 of 1, increments that do not shrink (rate below 0.2) and "the
outputs converge but the weights do not"; the own-flow rate is within 0.2 of 1 for both
(docs/depth.md section 6). Bad families are refused in one line naming the file and the
key, with exit 1."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from reports.claims import Claim
from reports.cli import main
from solvers import LayerWeights, save_model
from solvers.network.model import Model
from solvers.network.readout import Dense, Readout

DEPTHS = (2, 4, 8, 16, 32, 64)
HORIZON = 1.0
A = LayerWeights.random(8, 2, 16, 1, activation="gelu")
B = LayerWeights.random(8, 2, 16, 2, activation="gelu")
FOLDED = ("wo", "bo", "w2", "b2")
"""Written out here, not imported: the test folds h itself (docs/depth.md section 1)."""
HEAD = Readout(
    None, "mean", (Dense(np.random.default_rng(5).standard_normal((8, 3)), np.zeros(3)),)
)

STUDY = """
[study]
name = "families"

[[experiment]]
kind = "depth-family"
name = "synthetic families"
inputs = "inputs.npy"
labels = "labels.npy"
horizon = {horizon}

[experiment.models]
{models}
"""


def member(depth: int, kind: str) -> Model:
    h = HORIZON / depth
    layers = []
    for k in range(depth):
        if kind == "smooth":  # theta(t) = (1 - s) A + s B, s = (1 - cos(pi t / T)) / 2
            s = (1 - np.cos(np.pi * (k + 0.5) * h / HORIZON)) / 2
            w = dataclasses.replace(
                A, **{n: (1 - s) * getattr(A, n) + s * getattr(B, n) for n in A.map_names}
            )
        else:
            w = A if k % 2 == 0 else B
        layers.append(dataclasses.replace(w, **{n: getattr(w, n) * h for n in FOLDED}))
    return Model(layers, "pre", readout=HEAD, source=f"{kind}-{depth}")


def families_toml(families: dict[str, list[str]]) -> str:
    return "\n".join(f"{name} = {json.dumps(files)}" for name, files in families.items())


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("families")
    for kind in ("smooth", "alternating"):
        (folder / kind).mkdir()
        for L in DEPTHS:
            save_model(member(L, kind), folder / kind / f"L{L}.safetensors")
    u0 = np.random.default_rng(0).standard_normal((3, 4, 8))
    np.save(folder / "inputs.npy", u0)
    np.save(folder / "labels.npy", np.array([0, 1, 2]))
    save_model(
        Model([LayerWeights.random(4, 2, 8, 0)] * 4, "pre", source="narrow"),
        folder / "narrow.safetensors",
    )
    return folder


def paths(kind: str, depths=DEPTHS) -> list[str]:
    return [f"{kind}/L{L}.safetensors" for L in depths]


@pytest.fixture(scope="module")
def report(folder):
    study = folder / "study.toml"
    models = families_toml({"smooth": paths("smooth"), "alternating": paths("alternating")})
    study.write_text(STUDY.format(horizon=HORIZON, models=models))
    out = folder / "out"
    assert main(["report", str(study), "--out", str(out)]) == 0
    cases = json.loads((out / "results.json").read_text())["cases"]
    results = {c["label"]: c["result"] for c in cases if c["kind"] == "depth-family"}
    return out, results


def test_a_smooth_family_approaches_the_flow_of_weights_smooth_in_depth(report):
    _, results = report
    smooth = results["smooth"]
    assert [m["depth"] for m in smooth["members"]] == list(DEPTHS)
    for name in ("own_flow_rate", "family_rate", "increment_rate"):
        assert abs(smooth[name]["rate"] - 1) <= 0.2, name
    assert smooth["verdict"] == "approaches the flow of weights smooth in depth"


def test_alternating_weights_converge_in_their_outputs_only(report):
    _, results = report
    alternating = results["alternating"]
    assert abs(alternating["own_flow_rate"]["rate"] - 1) <= 0.2
    assert abs(alternating["family_rate"]["rate"] - 1) <= 0.2
    assert alternating["increment_rate"]["rate"] < 0.2
    assert alternating["verdict"] == "the outputs converge but the weights do not"


def test_the_section_has_its_tables_figures_and_the_smooth_claim_row(report):
    out, results = report
    text = (out / "report.md").read_text()
    assert "Family **smooth**" in text and "Family **alternating**" in text
    assert "| smooth | family distance |" in text
    figures = {p.name for p in (out / "figures").iterdir()}
    assert {"synthetic-families-distances.png", "synthetic-families-increments.png"} <= figures
    claims = text.split("## Claims of the paper")[1].split("\n## ")[0]
    row = next(line for line in claims.splitlines() if Claim.DEPTH_SMOOTH_FLOW.text in line)
    assert "| verified |" in row
    # the alternating family has no claim: its name is neither smooth nor independent
    assert Claim.DEPTH_INDEPENDENT_ROUGH.text not in [
        line for line in claims.splitlines() if line.startswith("| ")
    ]
    members = results["smooth"]["members"]
    assert members[0]["accuracy"] is not None and members[0]["next_decisions_changed"] is not None


def layerless(path) -> None:
    """A .safetensors file whose architecture has no layers."""
    from safetensors.numpy import save_file

    from solvers.io.model_files import FORMAT

    architecture = {
        "layers": [],
        "norm": "pre",
        "causal": False,
        "readout": None,
        "embedding": None,
        "window": None,
    }
    save_file(
        {"x": np.zeros(1)},
        str(path),
        metadata={"format": FORMAT, "architecture": json.dumps(architecture)},
    )


@pytest.mark.parametrize(
    ("models", "key", "says"),
    [
        ({"smooth": ["smooth/L2.safetensors"]}, "models.smooth", "at least two members"),
        (
            {"smooth": ["smooth/L2.safetensors", "narrow.safetensors"]},
            "models.smooth",
            "different widths",
        ),
        (
            {"smooth": ["smooth/L4.safetensors", "alternating/L4.safetensors"]},
            "models.smooth",
            "equal depth",
        ),
        (
            {
                "smooth": [
                    "smooth/L2.safetensors",
                    "smooth/L8.safetensors",
                    "smooth/L16.safetensors",
                ]
            },
            "models.smooth",
            "constant integer factor",
        ),
        ({"smooth": ["smooth/L2.safetensors", "layerless.safetensors"]}, "models.smooth[1]", ""),
    ],
    ids=["single", "widths", "equal-depth", "ratio", "no-layers"],
)
def test_a_bad_family_is_refused_in_one_line(folder, capsys, models, key, says):
    layerless(folder / "layerless.safetensors")
    study = folder / "bad.toml"
    study.write_text(STUDY.format(horizon=HORIZON, models=families_toml(models)))
    assert main(["report", str(study), "--out", str(folder / "never")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"experiment[0].{key}" in err and says in err
    named = [f for files in models.values() for f in files]
    assert any(f in err for f in named) or "layer" in err, err
    assert not (folder / "never").exists()


def test_a_baseline_sees_every_figure_of_a_family(folder, capsys):
    """`tide baseline save` keeps each member's figures and the rates; an unchanged re-run
    passes `tide check`, a member whose weights moved by 1% fails it."""
    base = folder / "baseline-study"
    base.mkdir()
    for name in ("inputs.npy", "labels.npy"):
        (base / name).write_bytes((folder / name).read_bytes())
    (base / "smooth").mkdir()
    for L in DEPTHS[:4]:
        (base / "smooth" / f"L{L}.safetensors").write_bytes(
            (folder / "smooth" / f"L{L}.safetensors").read_bytes()
        )
    study = base / "study.toml"
    study.write_text(
        STUDY.format(horizon=HORIZON, models=families_toml({"smooth": paths("smooth", DEPTHS[:4])}))
    )
    assert main(["baseline", "save", str(base / "baseline"), str(study)]) == 0
    figures = json.loads((base / "baseline" / "baseline.json").read_text())["figures"]
    kept = figures["synthetic families"]
    for L in DEPTHS[:4]:
        for name in ("own_flow_distance", "weight_increment", "accuracy", "loss"):
            assert f"smooth.L{L}.{name}" in kept, (L, name)
    assert kept["smooth.L2.family_distance"]["rule"] == "within"
    assert kept["smooth.increment_rate"]["rule"] == "order"
    assert kept["smooth.verdict"]["rule"] == "exact"

    def check(out: str) -> tuple[int, str]:
        args = ["check", "--baseline", str(base / "baseline"), str(study), "--out", str(base / out)]
        return main(args), capsys.readouterr().out

    code, printed = check("same")
    assert code == 0, printed
    moved = member(4, "smooth")
    moved = Model(
        [dataclasses.replace(w, w1=w.w1 * 1.01) for w in moved.layers], "pre", readout=HEAD
    )
    save_model(moved, base / "smooth" / "L4.safetensors")
    code, printed = check("moved")
    assert code == 1, printed
    listed = [line for line in printed.splitlines() if "| smooth | " in line]
    assert any("smooth.L4.own_flow_distance" in line for line in listed), printed
    assert any("smooth.L2.family_distance" in line for line in listed), printed
