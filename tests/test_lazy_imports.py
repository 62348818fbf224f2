"""Every lazy import of a heavy dependency runs under ``HEAVY_IMPORTS``.

Two threads importing numpy for the first time at once (an indexing thread cutting chunks with
numpy while the caller's thread imports chromadb, which imports numpy) can leave one of them a
partially initialised module, and numpy then fails for good in that process (``cannot import
name 'NDArray' from partially initialized module 'numpy._typing'``). ``agent_memory.lazy_imports``
serialises those imports; this test finds any import inside a function that is not under it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import agent_memory

HEAVY = {"numpy", "torch", "chromadb", "sentence_transformers", "pgvector", "onnxruntime", "transformers"}
ROOT = Path(agent_memory.__file__).parent


def _unguarded_imports(tree: ast.AST) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_function: bool, guarded: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            guard = guarded or (isinstance(child, ast.With) and any(
                isinstance(item.context_expr, ast.Name) and item.context_expr.id == "HEAVY_IMPORTS"
                for item in child.items))
            if in_function and isinstance(child, ast.Import | ast.ImportFrom) and not guard:
                names = [alias.name for alias in child.names] if isinstance(child, ast.Import) else [child.module or ""]
                heavy = [name for name in names if name.split(".")[0] in HEAVY]
                if heavy:
                    found.append((child.lineno, heavy[0]))
            visit(child, inside, guard)

    visit(tree, False, False)
    return found


def test_every_lazy_import_of_a_heavy_dependency_holds_the_import_lock() -> None:
    unguarded = [f"{path.relative_to(ROOT.parent)}:{line} imports {name}"
                 for path in sorted(ROOT.rglob("*.py"))
                 for line, name in _unguarded_imports(ast.parse(path.read_text(encoding="utf-8")))]
    assert not unguarded, "lazy imports outside `with HEAVY_IMPORTS:`\n" + "\n".join(unguarded)


def test_the_check_finds_an_unguarded_import() -> None:
    source = ("def cut():\n    import numpy as np\n\n"
              "def fine():\n    with HEAVY_IMPORTS:\n        import numpy\n\n"
              "import numpy\n")
    assert _unguarded_imports(ast.parse(source)) == [(2, "numpy")]
