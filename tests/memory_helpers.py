"""Helpers shared by the AgentMemory conformance tests (plain functions, not fixtures)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_memory import AgentMemory, MemoryConfig, QueryHit
from agent_memory.storage import FileBackend
from agent_memory.storage.common import LogTraceStore
from agent_memory.storage.files.trace_log import TRACE_LOGS
from agent_memory.storage.traces import KINDS, TraceKind
from agent_memory.index.fusion import SCORE_TOLERANCE

# -- helpers --------------------------------------------------------------------------------------


def blob_bytes(content: Any) -> bytes:
    """The bytes the content blob must hold, computed independently of the library."""
    if isinstance(content, str):
        return content.encode("utf-8")
    if isinstance(content, bytes):
        return content
    return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")  # key order kept


def blob_files(memory: AgentMemory) -> list[Path]:
    root = memory.path / "content"
    return sorted(p for p in root.iterdir() if not p.name.startswith(".")) if root.exists() else []


def answer(hits: list[QueryHit]) -> list[tuple[str, float | None, float | None, str | None, int | None]]:
    """What a query answered, in a comparable form."""
    return [(h.item.id, h.score, h.similarity, h.chunk, h.chunk_index) for h in hits]


def _tie_groups(hits: list[QueryHit], tolerance: float) -> list[list[QueryHit]]:
    """Consecutive hits whose neighbours' scores or similarities are within ``tolerance``."""
    groups: list[list[QueryHit]] = []
    for hit in hits:
        if groups and _near(groups[-1][-1], hit, tolerance):
            groups[-1].append(hit)
        else:
            groups.append([hit])
    return groups


def _near(a: QueryHit, b: QueryHit, tolerance: float) -> bool:
    close_scores = a.score is not None and b.score is not None and abs(a.score - b.score) <= tolerance
    close_sims = a.similarity is not None and b.similarity is not None and abs(a.similarity - b.similarity) <= tolerance
    return close_scores or close_sims


def assert_same_answers(expected: list[QueryHit], actual: list[QueryHit], *, tolerance: float = SCORE_TOLERANCE) -> None:
    """The determinism contract of restore / rebuild_index (agent_memory.index.fusion): the same
    hits in the same order, except that near-ties (neighbours whose score or similarity differ by
    at most ``tolerance``) may come in any order, and a near-tie cut by the limit may end with
    another of the tied items; every item's score and similarity agree within ``tolerance``, its
    chunk exactly."""
    assert len(actual) == len(expected), (answer(expected), answer(actual))
    position = 0
    groups = _tie_groups(expected, tolerance)
    for n, group in enumerate(groups):
        got = actual[position : position + len(group)]
        position += len(group)
        want_ids, got_ids = {h.item.id for h in group}, {h.item.id for h in got}
        if n == len(groups) - 1 and got_ids != want_ids:  # a tie cut by the limit
            for hit in got:
                if hit.item.id not in want_ids:
                    assert abs((hit.score or 0.0) - (group[-1].score or 0.0)) <= tolerance, (answer(expected), answer(actual))
            got = [hit for hit in got if hit.item.id in want_ids]
        else:
            assert got_ids == want_ids, f"ranking differs beyond near-ties: {answer(expected)} != {answer(actual)}"
        by_id = {h.item.id: h for h in group}
        for hit in got:
            want = by_id[hit.item.id]
            assert hit.item == want.item
            assert (hit.chunk, hit.chunk_index) == (want.chunk, want.chunk_index)
            for a, b in ((want.score, hit.score), (want.similarity, hit.similarity)):
                assert (a is None) == (b is None)
                if a is not None:
                    assert b == pytest.approx(a, abs=tolerance)


def sibling(memory: AgentMemory, tmp_path: Path, name: str, **config_updates: Any) -> AgentMemory:
    """Another memory on the same backend, in its own directory and (for a shared server) with
    its own collection."""
    config = memory.config.model_copy(update=config_updates) if config_updates else memory.config
    other = AgentMemory(f"{memory.agent_id}-{name}", tmp_path / name, config=config)
    if config.chroma_mode == "server":
        other.clear()
    return other


DAY0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def day(n: int) -> datetime:
    return DAY0 + timedelta(days=n)


TOPICS = {
    "eiffel": (
        "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It is "
        "named after the engineer Gustave Eiffel, whose company designed and built the tower for the "
        "1889 World's Fair."
    ),
    "photosynthesis": (
        "Photosynthesis is the process by which green plants use sunlight, water and carbon dioxide to "
        "produce glucose and oxygen. Chlorophyll in the chloroplasts absorbs the light."
    ),
    "crash": (
        "The Wall Street Crash of 1929 began in late October, when share prices on the New York Stock "
        "Exchange collapsed; it marked the start of the Great Depression."
    ),
    "python": (
        "Python is a high-level programming language whose design emphasises code readability with "
        "significant indentation. Guido van Rossum first released it in 1991."
    ),
    "vesuvius": (
        "Mount Vesuvius erupted in 79 AD and buried the Roman towns of Pompeii and Herculaneum under "
        "volcanic ash and pumice."
    ),
}


def unindexed_memory(path: Path) -> AgentMemory:
    """A memory whose stores skip embedding (retrieve never needs the index; a query catches up)."""
    return AgentMemory("plain", path, config=MemoryConfig(index_on_store=False))


def file_traces(agent_dir: Path, cls: type[LogTraceStore] = LogTraceStore) -> LogTraceStore:
    """The traces of the agent whose directory is ``agent_dir`` (``<memory_dir>/agents/<id>``), as
    the file backend keeps them (``common.traces``); ``cls``: a subclass, for a test that breaks it."""
    backend = FileBackend(agent_dir.parent.parent)
    return cls({kind: backend.log(agent_dir.name, f"traces.{kind}") for kind in KINDS}, backend.locks(agent_dir.name))


def trace_file(agent_dir: Path, kind: TraceKind) -> Path:
    """The AutoByteus JSONL file of ``kind`` in ``agent_dir``."""
    return agent_dir / TRACE_LOGS[f"traces.{kind}"][0]
