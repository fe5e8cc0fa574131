"""The rules of docs/architecture.md, checked on the source: imports flow one way between the
packages and between the rooms (sub-packages) inside them, with no cycle; folders and
modules stay small; every docs/ section the code cites exists; and a study worker imports
nothing that only drawing or reading models needs."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from solvers.backends import REGISTRY, Backend
from solvers.equation.norms import KINDS, Placement

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("solvers", "convergence", "properties", "reports")
ALLOWED = {
    "solvers": {"solvers"},
    "convergence": {"solvers", "convergence"},
    "properties": {"solvers", "properties"},
    "reports": set(PACKAGES),
}
"""Which packages each package may import: solvers <- convergence, properties <- reports."""
_BASE = {"solvers.errors", "solvers.validation", "solvers.backends"}
ROOMS = {
    "solvers.errors": set(),
    "solvers.validation": {"solvers.errors"},
    "solvers.backends": {"solvers.errors"},
    "solvers.results": {"solvers.backends"},
    "solvers.integrators": {"solvers.errors", "solvers.backends"},
    "solvers.equation": _BASE,
    "solvers.space": _BASE | {"solvers.equation"},
    "solvers.network": _BASE | {"solvers.equation", "solvers.space"},
    "solvers.methods": _BASE | {"solvers.equation", "solvers.integrators"},
    "solvers.reference": _BASE | {"solvers.equation", "solvers.integrators", "solvers.methods"},
    "solvers.io": _BASE | {"solvers.equation", "solvers.network"},
    "solvers.enclosure": _BASE | {"solvers.equation", "solvers.network"},
    "solvers.solving": _BASE | {"solvers.equation", "solvers.methods", "solvers.reference"},
    "properties.claim_check": set(),
    "properties.check_inputs": set(),
    "properties.conditioning": {"properties.claim_check", "properties.check_inputs"},
    "properties.exactness": {"properties.claim_check", "properties.check_inputs"},
    "properties.stability": {"properties.claim_check", "properties.check_inputs"},
    "properties.well_posedness": {"properties.claim_check", "properties.check_inputs"},
    "properties.invariants": {
        "properties.claim_check",
        "properties.check_inputs",
        "properties.conditioning",
        "properties.exactness",
    },
}
"""The rooms of solvers/ and properties/ and which rooms of the same package each may import
(a package's own __init__ imports any of its rooms; docs/architecture.md section 2).
Integrators know nothing of a layer; readers (io) read into the equation, never the reverse;
the reference builds on the methods, and only `solving` (solve, the method table) sees both."""
LARGEST_MODULE = 400
MOST_MODULES_PER_FOLDER = 15
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


def room(module: str) -> str | None:
    """The room (a sub-package or a top-level module) of solvers/ or properties/ that holds
    `module`; None for the packages' own __init__ and for convergence and reports."""
    parts = module.split(".")
    if parts[0] not in ("solvers", "properties") or len(parts) == 1:
        return None
    return ".".join(parts[:2])


def room_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import from one room into another that ROOMS does not allow, and every room
    that ROOMS does not know."""
    wrong = []
    for name, targets in graph.items():
        here = room(name)
        if here is None:
            continue
        if here not in ROOMS:
            wrong.append(f"{name} is in a room that docs/architecture.md does not list")
            continue
        for target in targets:
            there = room(target)
            if there is None and target.split(".")[0] == name.split(".")[0]:
                wrong.append(f"{name} imports its package's __init__ ({target})")
            elif there not in (None, here) and there.split(".")[0] == here.split(".")[0]:
                if there not in ROOMS[here]:
                    wrong.append(f"{name} imports {target}: {here} may not import {there}")
    return wrong


def test_rooms_import_only_the_rooms_below_them():
    assert not room_violations(GRAPH)


@pytest.mark.parametrize(
    "importer, imported",
    [
        ("solvers.integrators.events", "solvers.equation.flow"),  # an integrator knows a layer
        ("solvers.equation.weights", "solvers.io.torch_modules"),  # the equation reads files
        ("solvers.methods.driver", "solvers.reference.controller"),  # a method needs the reference
        ("properties.conditioning.rounding_bounds", "properties.invariants.projections"),
        ("solvers.backends.base", "solvers.solving"),
    ],
)
def test_the_room_rules_catch_a_wrong_import(importer, imported):
    """The rule checker itself: one forbidden edge added to the real graph is reported."""
    graph = {name: set(targets) for name, targets in GRAPH.items()}
    graph[importer].add(imported)
    assert room_violations(graph) == [
        f"{importer} imports {imported}: {room(importer)} may not import {room(imported)}"
    ]


CONCRETE_BACKENDS = {
    name
    for name in MODULES
    if name.startswith("solvers.backends.") and name != "solvers.backends.base"
}
"""Every module of solvers/backends/ but the protocol: the number systems and their kernels."""


def _backend_classes() -> set[str]:
    """The names of every Backend subclass in the concrete backends' modules."""
    for name in sorted(CONCRETE_BACKENDS):
        importlib.import_module(name)
    found, stack = set(), [Backend]
    while stack:
        for subclass in stack.pop().__subclasses__():
            found.add(subclass.__name__)
            stack.append(subclass)
    return found


BACKEND_QUESTIONS = re.compile(
    r"""(\.name|\bname)\s*(==|!=|\bin\b)\s*\(?\s*["']("""
    + "|".join(re.escape(name) for name in REGISTRY)
    + r""")["']"""
    + r"|isinstance\([^)]*("
    + "|".join(sorted(_backend_classes()))
    + r")"
    + r"|\b(bk|backend|precision|working)\.dtype\b"
)
"""A comparison of a backend's name with a registered one, an isinstance on a Backend
class, or a backend's dtype (the names and classes derived from the registry and the
modules, so that a new backend is covered by adding it)."""


def backend_questions(sources: dict[str, str], graph: dict[str, set[str]]) -> list[str]:
    """Lines outside solvers/backends/ that ask which backend they run in (a comparison of
    its name, an isinstance on a backend class, its dtype) and imports of a concrete
    backend's module: a precision's behaviour belongs in the backend's own methods."""
    found = [
        f"{name}: {line.strip()}"
        for name, text in sources.items()
        if not name.startswith("solvers.backends")
        for line in text.splitlines()
        if BACKEND_QUESTIONS.search(line)
    ]
    found += [
        f"{name} imports {target}"
        for name, targets in graph.items()
        if not name.startswith("solvers.backends")
        for target in targets & CONCRETE_BACKENDS
    ]
    return found


def test_nothing_outside_the_backends_asks_which_backend_it_runs_in():
    sources = {name: path.read_text() for name, path in MODULES.items()}
    assert not backend_questions(sources, GRAPH)


@pytest.mark.parametrize(
    "line",
    [
        'if bk.name == "mpmath":',
        "wide = bk.dtype.itemsize > 8",
        "if isinstance(bk, ArbBackend):",
        'if precision.name in ("arb", "mpmath"):',
    ],
)
def test_the_backend_rule_catches_a_question(line):
    assert backend_questions({"properties.example": line}, {}) == [f"properties.example: {line}"]


NORM_MODULES = "solvers.equation.norms"
NORM_NAMES = frozenset([*(p.value for p in Placement), *KINDS])
"""The names of the norm placements and kinds: what code outside solvers/equation/norms/
must not compare a norm with."""


def _names_a_norm(node: ast.AST) -> bool:
    return any(word in ast.unparse(node) for word in ("norm", "placement"))


def _norm_names_in(node: ast.AST) -> list[str]:
    """The norm names a comparison operand holds: a string, or a tuple, list or set of them."""
    parts = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
    return [
        p.value
        for p in parts
        if isinstance(p, ast.Constant) and isinstance(p.value, str) and p.value in NORM_NAMES
    ]


def norm_comparisons(sources: dict[str, str]) -> list[str]:
    """Comparisons of a norm placement or kind with its name outside the norms package (an
    operand that names a norm against a string that is a placement's or a kind's name, or a
    collection of them), and tables keyed by those names: code asks the objects of
    solvers.equation.norms instead (docs/architecture.md section 4)."""
    found = []
    for name, text in sources.items():
        if name.startswith(NORM_MODULES):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                named = [o for o in operands if _names_a_norm(o) and not _norm_names_in(o)]
                if named and any(_norm_names_in(o) for o in operands):
                    found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
            elif isinstance(node, ast.Dict) and len(node.keys) > 1:
                keys = [k for k in node.keys if k is not None]
                if len(_norm_names_in(ast.Tuple(elts=keys))) == len(node.keys):
                    found.append(f"{name}:{node.lineno}: a table keyed by norm names")
    return found


def _norm_sources() -> dict[str, str]:
    paths = {name: path for name, path in MODULES.items()}
    for folder in ("studies", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            paths[".".join(path.relative_to(ROOT).with_suffix("").parts)] = path
    return {name: path.read_text() for name, path in paths.items()}


def test_nothing_outside_the_norms_compares_a_norm_with_its_name():
    assert not norm_comparisons(_norm_sources())


@pytest.mark.parametrize(
    "line",
    [
        'if problem.norm == "post": pass',
        'if layer.norm_kind != "rms": pass',
        'if norm in ("pre", "none"): pass',
        'ok = "layer" == readout.norm_kind',
        'SCALES = {"post": 1, "pre": 2, "none": 3}',
    ],
)
def test_the_norm_rule_catches_a_comparison(line):
    assert len(norm_comparisons({"properties.example": line})) == 1


def test_the_norm_rule_lets_other_strings_and_the_norms_package_be():
    allowed = {
        "properties.example": 'if layer.activation == "none": pass\nif norm.constrained: pass',
        "solvers.equation.norms.placement": 'if norm == "post": pass',
    }
    assert norm_comparisons(allowed) == []


def test_folders_hold_at_most_fifteen_modules():
    folders: dict[Path, int] = {}
    for path in MODULES.values():
        folders[path.parent] = folders.get(path.parent, 0) + 1
    crowded = {
        str(f.relative_to(ROOT)): n for f, n in folders.items() if n > MOST_MODULES_PER_FOLDER
    }
    assert not crowded


def test_every_room_has_a_docstring_that_says_what_it_holds():
    """Each sub-package's __init__ opens with a paragraph (docs/architecture.md section 2)."""
    bare = [
        name
        for name, path in MODULES.items()
        if path.name == "__init__.py" and not ast.get_docstring(ast.parse(path.read_text()))
    ]
    assert not bare


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


def test_every_docs_page_the_code_names_exists():
    """Any "docs/FILE.md" in the code, the tests, the benchmarks or the README, with or
    without a section."""
    sources = [
        *MODULES.values(),
        *ROOT.joinpath("tests").rglob("*.py"),
        *ROOT.joinpath("benchmarks").rglob("*.py"),
        ROOT / "README.md",
    ]
    named = {m for path in sources for m in re.findall(r"docs/([a-z][\w-]*\.md)", path.read_text())}
    assert "architecture.md" in named
    assert not [page for page in sorted(named) if not (ROOT / "docs" / page).is_file()]


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
