"""The house rules of ARCHITECTURE.md, checked on the source: imports flow one way with no
cycle, library modules stay small, every docs/ section the code cites exists, and a study
worker imports nothing that only drawing or reading models needs."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("solvers", "convergence", "properties", "reports")
ALLOWED = {
    "solvers": {"solvers"},
    "convergence": {"solvers", "convergence"},
    "properties": {"solvers", "properties"},
    "reports": set(PACKAGES),
}
"""Which packages each package may import: solvers <- convergence, properties <- reports."""
LARGEST_MODULE = 450
CITATION = re.compile(r"docs/([\w-]+\.md)\s+sections?\s+(\d+)(?:\s+(and|to)\s+(\d+))?")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _imports(path: Path) -> set[str]:
    """Every project module `path` imports, type-only imports included."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {name for name in names if name.split(".")[0] in PACKAGES}


MODULES = _modules()
GRAPH = {
    name: {m for m in _imports(path) if m in MODULES and m != name}
    for name, path in MODULES.items()
}


def test_imports_flow_one_way():
    wrong = [
        f"{name} imports {target}"
        for name, targets in GRAPH.items()
        for target in targets
        if target.split(".")[0] not in ALLOWED[name.split(".")[0]]
    ]
    assert not wrong


def test_no_import_cycle():
    """Tarjan's strongly connected components of the module graph are all single modules."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert not cycles


@pytest.mark.parametrize("name", sorted(MODULES))
def test_library_modules_are_small(name):
    assert len(MODULES[name].read_text().splitlines()) <= LARGEST_MODULE


def _cited_sections() -> set[tuple[str, int]]:
    cited = set()
    sources = [*MODULES.values(), *ROOT.joinpath("tests").rglob("*.py"), ROOT / "README.md"]
    for path in sources:
        for match in CITATION.finditer(path.read_text()):
            page, first, joined, last = match.groups()
            first = int(first)
            last = first if last is None else int(last)
            numbers = range(first, last + 1) if joined == "to" else {first, last}
            cited.update((page, n) for n in numbers)
    return cited


def test_the_citation_pattern_finds_citations():
    cited = _cited_sections()
    assert {("schemes.md", 4), ("rounding.md", 3), ("well-posedness.md", 4)} <= cited


@pytest.mark.parametrize("page, section", sorted(_cited_sections()))
def test_every_cited_docs_section_exists(page, section):
    path = ROOT / "docs" / page
    assert path.is_file(), f"docs/{page} is cited but does not exist"
    assert re.search(rf"^## {section}\. ", path.read_text(), re.MULTILINE), (
        f"docs/{page} has no section {section}"
    )


def test_study_workers_do_not_import_what_only_reports_and_readers_need():
    """A study worker imports the runner and its experiments; matplotlib (drawing a report),
    ml_dtypes (reading BF16 tensors) and scipy.stats took a second of each worker's start-up
    and are imported where they are used instead."""
    heavy = ("matplotlib", "ml_dtypes", "scipy.stats", "torch", "transformers")
    code = (
        "import sys, reports.runner, reports.study; "
        f"print(' '.join(m for m in {heavy!r} if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == []
