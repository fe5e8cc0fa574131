"""Study files: malformed ones give one-line errors naming the file and the key; random
TOML documents are rejected only with the project's own error."""

from __future__ import annotations

import json
import string
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reports.cli import main
from reports.experiments import EXPERIMENTS
from reports.problems import build_problem, problem_spec
from reports.schema import StudyFileError, precision
from reports.study import default_study, load_study, parse_study
from solvers import backend
from solvers.backends import REGISTRY
from tests.reports.studies import SMALL, write_study

HEAD = '[study]\nname = "bad"\n'
TIME_STEP = '[[experiment]]\nkind = "time-step"\nsteps_per_unit = [4, 8, 16]\n'

MALFORMED = {
    "unknown top-level key": (HEAD + "colour = 1\n" + TIME_STEP, "colour: unknown key"),
    "unknown experiment key": (
        HEAD + TIME_STEP + "methods = ['lie']\nstep = 2\n",
        "experiment[0].step: unknown key",
    ),
    "wrong type": (
        HEAD + TIME_STEP.replace("[4, 8, 16]", '"many"') + "methods = ['lie']\n",
        "experiment[0].steps_per_unit: must be an array",
    ),
    "negative size": (
        HEAD + TIME_STEP + "methods = ['lie']\nproblem = { d = -4 }\n",
        "experiment[0].problem.d: must be an integer in [1, 512], got -4",
    ),
    "unknown method": (
        HEAD + TIME_STEP + "methods = ['heun']\n",
        "experiment[0].methods[0]: unknown value 'heun'",
    ),
    "unknown backend": (
        HEAD + TIME_STEP + "methods = ['lie']\nprecision = 'float128'\n",
        "experiment[0].precision: unknown value 'float128'",
    ),
    "missing digits": (
        HEAD + TIME_STEP + "methods = ['lie']\nprecision = { name = 'mpmath' }\n",
        "experiment[0].precision.digits: is required for 'mpmath'",
    ),
    "empty sequence": (
        HEAD + TIME_STEP.replace("[4, 8, 16]", "[]") + "methods = ['lie']\n",
        "experiment[0].steps_per_unit: needs at least 3 entries, got 0",
    ),
    "repeated steps": (
        HEAD + TIME_STEP.replace("[4, 8, 16]", "[4, 4, 8]") + "methods = ['lie']\n",
        "experiment[0].steps_per_unit: entries must be distinct",
    ),
    "unknown kind": (HEAD + '[[experiment]]\nkind = "magic"\n', "experiment[0].kind: unknown"),
    "missing kind": (HEAD + '[[experiment]]\nname = "x"\n', "experiment[0].kind: is required"),
    "missing name": (
        "[study]\nseed = 1\n" + TIME_STEP + "methods = ['lie']\n",
        "study.name: is required",
    ),
    "no experiments": (HEAD, "experiment: is required"),
    "heads not dividing d": (
        HEAD + TIME_STEP + "methods = ['lie']\nproblem = { d = 6, heads = 4 }\n",
        "experiment[0].problem.heads: must divide d = 6",
    ),
    "duplicate names": (
        HEAD
        + TIME_STEP
        + "methods = ['lie']\nname = 'a'\n"
        + TIME_STEP
        + "methods = ['lie']\nname = 'a'\n",
        "experiment[1].name: 'a' is used",
    ),
    "not TOML": ("[study\nname = 1", "not valid TOML"),
    "missing digits as a string": (
        HEAD + TIME_STEP + "methods = ['lie']\nprecision = 'arb'\n",
        "experiment[0].precision: 'arb' needs digits",
    ),
    "digits for a fixed format": (
        HEAD + TIME_STEP + "methods = ['lie']\nprecision = { name = 'float32', digits = 20 }\n",
        "experiment[0].precision.digits: is only for mpmath and arb, not 'float32'",
    ),
}


@pytest.mark.parametrize("text, message", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_study_files_give_one_line_errors(tmp_path, capsys, text, message):
    path = write_study(tmp_path, text, "bad.toml")
    assert main(["report", str(path), "--out", str(tmp_path / "out")]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1, error  # one line
    assert error.startswith(f"tide: error: {path}: ") and message in error, error


@pytest.mark.parametrize("name", [n for n, f in REGISTRY.items() if f.digits])
def test_digit_ranges_are_the_backends_own(name):
    low, high = REGISTRY[name].digits
    where = "experiment[0].precision"
    for digits in (low, high):
        assert precision({"name": name, "digits": digits}, where)["digits"] == digits
        assert backend(name, digits).digits == digits  # the solvers accept the same range
    for digits in (low - 1, high + 1):
        with pytest.raises(
            StudyFileError, match=rf"digits: must be an integer in \[{low}, {high}\]"
        ):
            precision({"name": name, "digits": digits}, where)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(StudyFileError, match=r"nowhere\.toml: cannot read the study file"):
        load_study(tmp_path / "nowhere.toml")


def test_the_built_in_and_example_studies_load():
    study = default_study()
    assert {spec.kind for spec in study.experiments} >= {
        "claims",
        "time-step",
        "grid",
        "precision-ladder",
        "splitting-table",
        "well-posedness",
        "layer-norm-limit",
    }
    for path in sorted(Path(__file__).parents[2].joinpath("studies").glob("*.toml")):
        assert load_study(path).cases(), path


def test_cases_and_seeds_are_deterministic(tmp_path):
    first = load_study(write_study(tmp_path)).cases()
    second = load_study(write_study(tmp_path, name="again.toml")).cases()
    assert [(c.id, c.seed, c.params) for c in first] == [(c.id, c.seed, c.params) for c in second]
    assert {c.seed for c in first if c.experiment == "orders"} == {first[0].seed}
    assert len({c.id for c in first}) == len(first)


KEYS = st.sampled_from(
    [
        "study",
        "experiment",
        "name",
        "seed",
        "kind",
        "methods",
        "problem",
        "d",
        "precision",
        "digits",
        "steps_per_unit",
        "rules",
        "sizes",
        *EXPERIMENTS,
    ]
) | st.text(string.ascii_letters + "_-", min_size=1, max_size=8)
SCALARS = (
    st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.booleans()
    | st.text(max_size=8)
    | st.sampled_from(list(EXPERIMENTS))
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=12,
)


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=5))
def test_random_toml_documents_are_rejected_with_the_projects_error(tmp_path_factory, document):
    text = "\n".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in document.items())
    path = tmp_path_factory.mktemp("random") / "random.toml"
    path.write_text(text)
    try:
        load_study(path)
    except StudyFileError as exc:
        assert str(exc).startswith(f"{path}: ") and "\n" not in str(exc)


def test_small_study_parses():

    study = parse_study(tomllib.loads(SMALL), "small")
    assert [spec.name for spec in study.experiments] == ["orders", "grid", "well-posedness 3"]


def test_the_problem_table_picks_the_activation():
    for activation in ("relu", "gelu", "gelu-tanh"):
        spec = problem_spec({"activation": activation}, "problem")
        layers = build_problem(spec, 0).controls.layers
        assert {w.activation for w in layers} == {activation}
    relu, gelu = (build_problem(problem_spec({"activation": a}, "p"), 0) for a in ("relu", "gelu"))
    assert (relu.u0 == gelu.u0).all()  # the same seeded draw, only the activation differs
    with pytest.raises(StudyFileError, match=r"problem\.activation"):
        problem_spec({"activation": "swish"}, "problem")
