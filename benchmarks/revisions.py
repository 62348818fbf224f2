"""Measuring the library of another git revision in the same run, beside this one.

A benchmark script that takes ``--previous REV`` runs its own measurement twice: once here, and
once in a subprocess running the same script (this checkout's file, so both sides measure the same
way) with the library of ``REV`` first on ``PYTHONPATH``: the revision's files, exported with
``git archive`` into a temporary directory that is removed afterwards (the repository is only
read: no worktree is added to it). The subprocess is given ``--out FILE --measure-only`` and must
write its figures as JSON to ``FILE``; :func:`at_revision` returns them.

Used by ``bench_key_lookup.py`` and ``bench_store.py`` (a sibling module: ``benchmarks/`` is on
``sys.path`` when a script there runs), and :func:`exported` by ``tests/fixtures/main-8e79ebe/make.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parent.parent
"""The checkout these benchmarks belong to (its git repository exports the previous revision)."""


def head_revision() -> str:
    """The short hash of this checkout's ``HEAD`` (``""`` when git cannot say)."""
    done = subprocess.run(["git", "-C", str(PROJECT_ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False)
    return done.stdout.strip()


def at_revision(script: str | os.PathLike[str], revision: str, argv: Sequence[str], *,
                env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The figures of ``script`` run with the library of git ``revision``.

    Args:
        script: the benchmark script to run (pass ``__file__``): it must accept ``--out FILE`` and
            ``--measure-only`` and write its figures to ``FILE`` as a JSON object.
        revision: any git revision (``main``, a hash, ``HEAD~3``).
        argv: the script's other arguments.
        env: variables added to this process's environment for the subprocess (``PYTHONPATH`` is
            always the exported revision).

    Raises:
        subprocess.CalledProcessError: if the revision cannot be exported or the script fails (its
            output went to this process's stdout and stderr).
    """
    with exported(revision) as tree:
        out = tree.parent / "previous.json"
        run_env = {**os.environ, **(env or {}), "PYTHONPATH": str(tree)}
        subprocess.run([sys.executable, str(script), *argv, "--out", str(out), "--measure-only"], check=True,
                       env=run_env)
        return dict(json.loads(out.read_text(encoding="utf-8")))


@contextmanager
def exported(revision: str) -> Iterator[Path]:
    """The files of git ``revision`` of this repository (``git archive``), in a temporary
    directory removed on exit: put it first on ``PYTHONPATH`` to run that revision's library.

    Raises:
        subprocess.CalledProcessError: if the revision cannot be exported.
    """
    with tempfile.TemporaryDirectory(prefix="bench-previous-") as tmp:
        tree = Path(tmp) / "tree"
        tree.mkdir()
        archive = subprocess.run(["git", "-C", str(PROJECT_ROOT), "archive", "--format=tar", revision],
                                 check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True, capture_output=True)
        yield tree


def forget_extractions() -> None:
    """Empty the in-process cache of HTML main-text extractions, so that no phase profits from
    the pages an earlier phase extracted."""
    from agent_memory import html

    forget = getattr(html, "forget_extractions", None)  # this code's
    cache_clear = forget if forget is not None else getattr(html.extract_page, "cache_clear", None)  # a revision's
    if cache_clear is not None:
        cache_clear()
