"""The README's map of the library stays true: every public function of solvers,
convergence and properties is listed with the module that holds it and is exported at
package level, and every one-line example runs after the map's set-up."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import torch

import convergence
import properties

ROOT = Path(__file__).resolve().parent.parent
SECTION = (ROOT / "README.md").read_text().split("## Map of the library")[1].split("\n## ")[0]
SETUP = re.search(r"```python\n(.*?)```", SECTION, re.S).group(1)
ROWS = re.findall(r"^\| `(\w+)` \| `([\w.]+)` \| `(.*)` \|$", SECTION, re.M)


def test_the_map_lists_every_public_function_where_it_lives():
    listed = {name: module for name, module, _ in ROWS}
    for package in (convergence, properties):
        functions = {n for n in package.__all__ if callable(getattr(package, n))}
        functions -= {n for n in functions if isinstance(getattr(package, n), type)}
        assert functions <= set(listed), functions - set(listed)
    for name, module in listed.items():
        package = importlib.import_module(module.split(".")[0])
        assert name in package.__all__, f"{module.split('.')[0]} does not export {name}"
        assert getattr(package, name).__module__ == module, name
    assert len(ROWS) == len(listed)  # each once


@pytest.fixture(scope="module")
def namespace(tmp_path_factory):
    """The map's set-up, run in a fresh folder that sees the repository's reports/."""
    folder = tmp_path_factory.mktemp("readme")
    (folder / "reports").symlink_to(ROOT / "reports")
    names = {"torch": torch}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        exec(SETUP, names)
        yield names, folder


@pytest.mark.parametrize(
    ("name", "example"), [(n, e) for n, _, e in ROWS], ids=[n for n, *_ in ROWS]
)
def test_every_example_runs(namespace, name, example, monkeypatch):
    names, folder = namespace
    monkeypatch.chdir(folder)
    assert eval(example, names) is not None, example
