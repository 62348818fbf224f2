"""The house: one public face, no import cycle, no import that climbs a floor (docs/layout.md).

Imports are read from the source (``ast``), every kind counted: module level, inside functions, and
under ``if TYPE_CHECKING:``. A cycle hidden behind a function-local import is still a cycle."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import agent_memory

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "agent_memory"

FLOORS: list[set[str]] = [
    {"errors", "extras", "ids", "limits", "config", "diagnostics", "pricing", "html", "fileio", "lazy_imports",
     "background", "observers", "tokens", "embeddings", "samples"},
    {"models"},
    {"prompt_tokens", "transforms", "plugins", "llm"},
    {"storage"},
    {"records", "index"},
    {"memory", "boundary", "fork", "ingest", "exports", "stats"},
    {"presentation"},
    {"kernel"},
    {"agent"},
    {"integrations", "replay", "mcp_server", "mcp_stdio", "migrate", "testing", "console", "cli", "inspector",
     "__init__"},
]
"""The floors of ``agent_memory``, lowest first: a module imports from its own floor or below.
docs/layout.md shows the same plan."""

MAX_PUBLIC_NAMES = 40


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of other modules of the package (every kind)."""

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
            for target in targets:
                found = resolve(target) if target.startswith("agent_memory") else None
                if found is not None and found != name:
                    edges[name].add(found)
    return edges


def _floor(module: str) -> int:
    part = module.split(".")[1] if "." in module else "__init__"
    for n, floor in enumerate(FLOORS):
        if part in floor:
            return n
    raise AssertionError(f"{module} is on no floor: add {part!r} to FLOORS and to docs/layout.md")


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_counting_type_checking_and_function_local_imports() -> None:
    edges = _imports(_modules())
    assert sum(len(targets) for targets in edges.values()) > 300  # the scan sees the package's imports
    assert _cycles(edges) == []


def _folder_edges(edges: dict[str, set[str]], depth: int) -> dict[str, set[str]]:
    """The imports between folders: a module's folder is its first ``depth`` parts below
    ``agent_memory`` (``agent_memory.storage`` at depth 1, ``agent_memory.storage.files`` at 2)."""
    def folder(module: str) -> str:
        return ".".join(module.split(".")[: depth + 1])

    out: dict[str, set[str]] = defaultdict(set)
    for source, targets in edges.items():
        for target in targets:
            if folder(source) != folder(target):
                out[folder(source)].add(folder(target))
    return out


def test_no_import_cycle_between_folders() -> None:
    folders = _folder_edges(_imports(_modules()), depth=1)
    assert {"agent_memory.storage", "agent_memory.index", "agent_memory.records"} <= set(folders)
    assert _cycles(folders) == []


def test_a_backend_is_in_its_own_folder_and_no_other_imports_it() -> None:
    """Each backend's code is in its folder under ``storage/``; neither backend imports the other,
    and nothing outside ``storage`` reaches into a backend's folder but the apps that name one
    (the CLI, the inspector, tests' helpers)."""
    edges = _imports(_modules())
    backends = ("agent_memory.storage.files", "agent_memory.storage.postgres")
    for backend in backends:
        others = [b for b in backends if b != backend]
        crossing = sorted(f"{a} -> {b}" for a, targets in edges.items() if a.startswith(backend)
                          for b in targets if any(b.startswith(o) for o in others))
        assert crossing == []
    outside = sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets
                     if b.startswith(backends) and not a.startswith("agent_memory.storage")
                     and _floor(a) < _floor("agent_memory.cli"))
    assert outside == []


def test_the_folder_scan_finds_a_folder_cycle() -> None:
    edges = {"agent_memory.store.items": {"agent_memory.storage.contracts"},
             "agent_memory.storage.files": {"agent_memory.index.lexical"},
             "agent_memory.index.upkeep": {"agent_memory.store.items"}}
    assert _cycles(_folder_edges(edges, depth=1)) == [
        ["agent_memory.index", "agent_memory.storage", "agent_memory.store"]]


def test_the_scan_finds_a_cycle_hidden_in_a_function() -> None:
    edges = {"agent_memory.a": {"agent_memory.b"}, "agent_memory.b": {"agent_memory.a"}, "agent_memory.c": set()}
    assert _cycles(edges) == [["agent_memory.a", "agent_memory.b"]]


def test_no_import_climbs_a_floor() -> None:
    edges = _imports(_modules())
    climbs = sorted(f"{a} -> {b}" for a, targets in edges.items() for b in targets if _floor(b) > _floor(a))
    assert climbs == []


def test_every_module_is_on_a_floor_named_in_the_readme_layout() -> None:
    layout = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    for module in _modules():
        _floor(module)
    for floor in FLOORS:
        for part in floor - {"__init__", "inspector"}:
            assert re.search(rf"\b{part}\b", layout), part


def test_the_public_face_is_small_sorted_and_complete() -> None:
    exported = agent_memory.__all__
    assert len(exported) <= MAX_PUBLIC_NAMES
    assert exported == sorted(exported)
    for name in exported:
        assert hasattr(agent_memory, name), name
    public = {name for name in vars(agent_memory) if not name.startswith("_") and name[0].isupper()}
    assert public <= set(exported)


def _agent_memory_imports(text: str) -> list[tuple[str, str]]:
    """``(module, name)`` of every ``from agent_memory… import …`` in Python source or a README's code."""
    found = []
    for module, grouped, names in re.findall(r"from (agent_memory[\w.]*) import (?:\(([^)]*)\)|([^\n(#]+))", text):
        for name in re.sub(r"#[^\n]*", "", grouped or names).replace("\\", " ").split(","):
            if name.split():
                found.append((module, name.split()[0]))
    return found


def test_readme_and_examples_import_only_the_public_face() -> None:
    """The README and the examples import from ``agent_memory`` only its public names; besides it,
    only the framework adapters (``agent_memory.integrations.<framework>``, each behind its extra)
    and the test helpers (``agent_memory.testing``)."""
    texts = [path.read_text(encoding="utf-8") for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]]
    texts += [path.read_text(encoding="utf-8") for path in sorted((ROOT / "examples").glob("*.py"))]
    seen = [pair for text in texts for pair in _agent_memory_imports(text)]
    assert len(seen) > 20
    for module, name in seen:
        if module == "agent_memory":
            assert name in agent_memory.__all__, name
        else:
            assert module.startswith(("agent_memory.integrations.", "agent_memory.testing")), (module, name)


OUTSIDE_DOCUMENTS = re.compile(r"\b[Ss]eed (?:00\d|§)|\b(?:BASELINES|STYLE|DESIGN|ENVIRONMENT)\.md\b")
"""Names of documents that live beside the repository, never in it: the seed design documents and
the shared pages of baselines, style, design and environment. A reader cannot open them, so a
docstring cites the public source instead (AutoByteus, MemberJunction, team9; the tool and the data
set that measured a figure) or states the reason itself."""


def _documented_files() -> list[Path]:
    """README.md, every Python file of the packages, the benchmarks, the examples and the tests,
    and the Markdown of ``docs/`` and ``benchmarks/``."""
    folders = ("agent_memory", "actions", "compaction_plugins", "benchmarks", "examples", "tests")
    files = [path for folder in folders for path in sorted((ROOT / folder).rglob("*.py"))]
    return [ROOT / "README.md", *files, *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "benchmarks").glob("*.md"))]


def test_no_docstring_names_a_file_outside_the_repository() -> None:
    files = _documented_files()
    assert len(files) > 200  # the scan sees the project
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in files
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if OUTSIDE_DOCUMENTS.search(line)]
    assert found == [], "\n".join(found)


def test_the_outside_names_are_each_found() -> None:
    for name in ("BASELINES", "STYLE", "DESIGN", "ENVIRONMENT"):
        assert OUTSIDE_DOCUMENTS.search(f"as {name}.md measured it"), name
    for seed in ("000 §19", "002", "003"):
        assert OUTSIDE_DOCUMENTS.search(f"(seed {seed})"), seed
    assert OUTSIDE_DOCUMENTS.search("Seed " + "§10.1A")
    assert not OUTSIDE_DOCUMENTS.search("random seed 7, README.md, issue #6 §3")
