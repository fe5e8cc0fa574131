"""The "network-limit" study kind end to end: a save_pretrained ViT classifier, its input
states and its own predictions as labels, through `tide report`; a language model and
padded classifiers from token ids; a model without a readout; a pickle refused unread."""

from __future__ import annotations

import dataclasses
import json
import pickle

import numpy as np
import pytest
import torch
import transformers

from convergence.order import OrderVerdict
from reports.claims import Claim
from reports.cli import main
from reports.experiments import EXPERIMENTS
from tests.hf_models import PickleTrap, tiny_bert, tiny_gpt2, tiny_vit, vit_classifier

STUDY = """
[study]
name = "{study}"

[[experiment]]
kind = "network-limit"
name = "{name}"
model = "{model}"
{inputs}
methods = ["lie", "strang-rk2"]
steps_per_unit = [1, 2, 4, 8]
"""
"""A study of one network-limit experiment (the inputs as TOML lines)."""
VIT_INPUTS = 'inputs = "inputs.npy"\nlabels = "labels.npy"'


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
    study.write_text(STUDY.format(study="trained", name="vit", model="vit", inputs=VIT_INPUTS))
    out = folder / "out"
    assert main(["report", str(study), "--out", str(out)]) == 0
    cases = json.loads((out / "results.json").read_text())["cases"]
    result = next(c for c in cases if c["kind"] == "network-limit")["result"]
    assert result["steps_per_unit"] == [1, 2, 4, 8]
    lie = next(m for m in result["methods"] if m["method"] == "lie")
    assert lie["decisions_changed"][0]["count"] == 0 and lie["accuracy"][0] == 1.0
    assert all(d > 0 for d in lie["relative_distance"][1:])
    assert result["limit_error"] < 1e-10 and len(result["depth_change"]) == 1
    figures = {p.name for p in (out / "figures").iterdir()}
    assert {"vit-distance.png", "vit-decisions.png"} <= figures
    report = (out / "report.md").read_text()
    assert "| lie | 1 |" in report
    # one claim has evidence and is a row; the other claims are listed once, in a sentence
    claims = report.split("## Claims of the paper")[1].split("\n## ")[0]
    rows = [line for line in claims.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 2 and Claim.TRAINED_NEAR_LIMIT.text in rows[1]  # header, one claim
    others = [claim for claim in Claim if claim is not Claim.TRAINED_NEAR_LIMIT]
    assert f"gives evidence on {len(others)} of the {len(Claim)} claims:" in claims
    assert all(report.count(claim.text) == 1 for claim in others)


def test_a_pickled_model_is_refused_in_one_line(folder, capsys):
    marker = folder / "unpickled"
    (folder / "model.pt").write_bytes(pickle.dumps(PickleTrap(marker)))
    study = folder / "pickle.toml"
    study.write_text(STUDY.format(study="trained", name="vit", model="model.pt", inputs=VIT_INPUTS))
    assert main(["report", str(study), "--out", str(folder / "never")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "model.pt" in err and "never unpickles" in err
    assert not marker.exists() and not (folder / "never").exists()


def _gpt2_lm_folder(folder):
    """A GPT2LMHeadModel (tied head) saved with save_pretrained, and token ids."""
    torch.manual_seed(4)
    config = tiny_gpt2(d=16, heads=4, vocab_size=30, n_inner=32)
    module = transformers.GPT2LMHeadModel(config).double().eval()
    module.save_pretrained(folder / "lm")
    tokens = np.random.default_rng(4).integers(0, 30, (4, 10))
    np.save(folder / "tokens.npy", tokens)
    return module, tokens


def test_a_language_model_from_token_ids(tmp_path):
    """GPT2LMHeadModel through `tide report` from token ids: at steps_per_unit = 1 no
    decision changes and the loss is the library's (a float64 cross-entropy of its logits;
    its own .loss, float32, to its precision); refined levels record a number of changed
    next-token decisions, over every position, and a loss; each method has a fitted order."""
    module, tokens = _gpt2_lm_folder(tmp_path)
    ids = torch.tensor(tokens)
    with torch.no_grad():
        out = module(ids, labels=ids)
    expected = torch.nn.functional.cross_entropy(
        out.logits[:, :-1].reshape(-1, 30), ids[:, 1:].reshape(-1)
    ).item()
    (tmp_path / "study.toml").write_text(
        STUDY.format(study="lm", name="lm", model="lm", inputs='tokens = "tokens.npy"')
    )
    assert main(["report", str(tmp_path / "study.toml"), "--out", str(tmp_path / "out")]) == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    result = results["cases"][0]["result"]
    assert result["decisions"] == tokens.size and result["targets"] == "next tokens"
    for method in result["methods"]:
        assert len(method["decisions_changed"]) == len(method["loss"]) == 4
        assert all(isinstance(c["count"], int) for c in method["decisions_changed"])
        assert method["order"]["verdict"] in {v.value for v in OrderVerdict}
    lie = result["methods"][0]
    assert lie["decisions_changed"][0]["count"] == 0
    assert abs(lie["loss"][0] - expected) <= 1e-10 * expected
    assert abs(lie["loss"][0] - out.loss.item()) <= 1e-6 * expected
    report = (tmp_path / "out" / "report.md").read_text()
    assert "judged against their own next tokens" in report and "| loss (nats) |" in report
    assert "Orders of the relative distance" in report
    # levels far from the limit get no order, and the section says why, in words
    record = EXPERIMENTS["network-limit"].read(results["cases"][0])
    far = dataclasses.replace(
        record.result.methods[0],
        relative_distance=[0.9, 0.5, 0.3, 0.2],
        order=None,
        rises=[],
        asymptotic_from=None,
    )
    moved = dataclasses.replace(record, result=dataclasses.replace(record.result, methods=[far]))
    section = EXPERIMENTS["network-limit"].render("lm", [moved]).markdown
    assert (
        "No order for lie: 0 of its 4 levels (1 to 8 steps per unit) lie within 0.1 of the "
        "limit, and a fit needs 3 there." in section
    )


def test_a_model_without_a_readout_says_nothing_about_decisions(tmp_path):
    """A bare ViT (final norm only, no classifier): results.json records no decisions and
    the report's section says nothing about them."""
    torch.manual_seed(5)
    config = tiny_vit(d=16, heads=4)
    transformers.ViTModel(config).save_pretrained(tmp_path / "bare")
    np.save(tmp_path / "pixels.npy", np.random.default_rng(5).standard_normal((3, 1, 8, 8)))
    (tmp_path / "study.toml").write_text(
        '[study]\nname = "bare"\n\n[[experiment]]\nkind = "network-limit"\nname = "bare"\n'
        'model = "bare"\npixels = "pixels.npy"\nsteps_per_unit = [1, 2, 4, 8]\n'
    )
    assert main(["report", str(tmp_path / "study.toml"), "--out", str(tmp_path / "out")]) == 0
    result = json.loads((tmp_path / "out" / "results.json").read_text())["cases"][0]["result"]
    assert result["decisions"] is None and result["limit_decisions"] is None
    assert result["methods"][0]["decisions_changed"] is None
    section = (tmp_path / "out" / "report.md").read_text().split("## bare")[1]
    assert "decision" not in section.lower(), section
    assert "The network's outputs are" in section


@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_a_padded_batch_through_the_study_gives_the_librarys_decisions(tmp_path, kind):
    """Right-padded token ids with their mask, the library's masked decisions as labels:
    the network (dt = 1) gets all of them right."""
    torch.manual_seed(6)
    if kind == "bert":
        config = tiny_bert(d=16, heads=4, vocab_size=30, num_labels=3)
        module = transformers.BertForSequenceClassification(config)
    else:
        config = tiny_gpt2(d=16, heads=4, vocab_size=30, num_labels=3, pad_token_id=0)
        module = transformers.GPT2ForSequenceClassification(config)
    module = module.double().eval()
    module.save_pretrained(tmp_path / "model")
    lengths = np.array([10, 7, 4, 9, 2, 6])
    mask = (np.arange(10) < lengths[:, None]).astype(np.int64)
    tokens = np.where(mask == 1, np.random.default_rng(6).integers(1, 30, (6, 10)), 0)
    with torch.no_grad():
        logits = module(torch.tensor(tokens), attention_mask=torch.tensor(mask)).logits
    np.save(tmp_path / "tokens.npy", tokens)
    np.save(tmp_path / "mask.npy", mask)
    np.save(tmp_path / "labels.npy", logits.argmax(-1).numpy())
    (tmp_path / "study.toml").write_text(
        '[study]\nname = "padded"\n\n[[experiment]]\nkind = "network-limit"\nname = "padded"\n'
        'model = "model"\ntokens = "tokens.npy"\nmask = "mask.npy"\nlabels = "labels.npy"\n'
        "steps_per_unit = [1, 2, 4, 8]\nmax_steps_per_unit = 64\n"
    )
    assert main(["report", str(tmp_path / "study.toml"), "--out", str(tmp_path / "out")]) == 0
    result = json.loads((tmp_path / "out" / "results.json").read_text())["cases"][0]["result"]
    assert result["network_accuracy"] == 1.0 and result["real_tokens"] == lengths.sum()


def test_the_report_says_what_rounding_layers_and_classes_measured(folder):
    """With a precision list the section names each precision's changed decisions beside
    the limit's, and the layers that lead the distance, each figure the one in
    results.json; a limit whose decisions fall on one class is called a collapse."""
    study = folder / "rounded.toml"
    inputs = VIT_INPUTS + '\nprecision = ["float32", "bfloat16"]'
    study.write_text(STUDY.format(study="rounded", name="vit", model="vit", inputs=inputs))
    out = folder / "rounded"
    assert main(["report", str(study), "--out", str(out)]) == 0
    case = json.loads((out / "results.json").read_text())["cases"][0]
    result = case["result"]
    section = (out / "report.md").read_text().split("## vit")[1]
    names = [r["precision"] for r in result["rounding"]]
    assert names == ["backend('float32')", "backend('bfloat16')"]  # as the ladder keys them
    changed = result["limit_decisions"]["changed"]["count"]
    for rounded in result["rounding"]:
        moved = rounded["decisions_changed"]
        assert (
            f"Rounding to {rounded['precision']} changes {moved['count']} of {moved['of']} "
            f"decisions ({rounded['within_reach']} lie within reach of its distance from "
            f"float64); the limit changes {changed}." in section
        )
    float32, bfloat16 = result["rounding"]
    assert 0 < float32["relative_distance"] < 1e-5 < bfloat16["relative_distance"]
    shares = [layer["share"] for layer in result["layers"]]
    assert len(shares) == 2 and all(0 < s <= 1 + 1e-9 for s in shares)
    top = max(range(2), key=lambda n: shares[n])
    assert f"Which layer drives the distance: layer {top} (" in section
    record = EXPERIMENTS["network-limit"].read(case)
    own = record.result.network_classes
    assert own.leader_share < 0.9  # the network's own decisions spread over the classes
    onto = dataclasses.replace(own, top=[(7, result["decisions"])], others=0)
    collapsed = dataclasses.replace(
        record, result=dataclasses.replace(record.result, limit_classes=onto)
    )
    text = EXPERIMENTS["network-limit"].render("vit", [collapsed]).markdown
    assert (
        f"The limit's decisions collapse onto one class: {result['decisions']} of "
        f"{result['decisions']} are class 7 (share 1; 0.9 or more is a collapse)" in text
    )
