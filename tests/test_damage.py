"""Damage is contained, not contagious: a bad line, a lost blob, a damaged or poisoned index, a
failing index or observer each affect what they touch and nothing else, and are reported.

Real files, the real embedded chromadb and the real embedding model; failures of a dependency
are injected only where the real one cannot be made to fail on demand (a lock held too long, an
index write that fails once).
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from pathlib import Path

import pytest
from filelock import FileLock

from agent_memory import AgentMemory, MemoryConfig, MemoryCriteria, MemoryNotice, StoreError
from agent_memory.errors import VectorIndexError
from agent_memory.observers import ContentMissing, NoticeRecorder, IndexFailed, IndexRecreated, RecordQuarantined

TEXTS = {
    "apollo": "Apollo 11 landed on the Moon in July 1969; Armstrong and Aldrin walked on the surface.",
    "soup": "A recipe for lentil soup with cumin, carrots and a squeeze of lemon.",
    "violin": "Antonio Stradivari made violins in Cremona around 1700; players still prize them.",
}


@pytest.fixture
def recorder() -> NoticeRecorder:
    return NoticeRecorder()


@pytest.fixture
def stored(tmp_path: Path, recorder: NoticeRecorder) -> tuple[AgentMemory, dict[str, str]]:
    memory = AgentMemory("agent", tmp_path, observers=[recorder])
    ids = {key: memory.store(text, tags=[key]) for key, text in TEXTS.items()}
    memory.flush_index()  # a memory whose indexing thread has done its work
    return memory, ids


def _reopen(memory: AgentMemory, recorder: NoticeRecorder | None = None, **config: object) -> AgentMemory:
    return AgentMemory(
        memory.agent_id, memory.memory_dir, config=MemoryConfig(**config), observers=[recorder] if recorder else []
    )


def _edit_line(memory: AgentMemory, line_no: int, edit) -> None:  # noqa: ANN001
    path = memory.path / "items.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[line_no - 1] = edit(lines[line_no - 1])
    path.write_bytes(b"\n".join(lines))


# -- items.jsonl ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "garbage",
    [b"garbage in the middle", b'{"id": "mem_123", "type": "custom"', b"\xff\xfe\x00", b'{"id": "x", "metadata": 5}'],
    ids=["text", "cut-json", "binary", "wrong-shape"],
)
def test_a_garbage_line_in_the_middle_is_quarantined_and_every_other_item_works(
    stored: tuple[AgentMemory, dict[str, str]], garbage: bytes
) -> None:
    memory, ids = stored
    _edit_line(memory, 2, lambda line: garbage)  # the "soup" record is destroyed
    recorder = NoticeRecorder()
    reader = _reopen(memory, recorder)

    assert reader.get(ids["apollo"]).content == TEXTS["apollo"]
    assert reader.get(ids["violin"]).content == TEXTS["violin"]
    assert [r.id for r in reader.records()] == [ids["apollo"], ids["violin"]]
    assert reader.query(text="stringed instruments from Cremona", limit=1)[0].item.id == ids["violin"]
    assert {h.item.id for h in reader.query(limit=10)} == {ids["apollo"], ids["violin"]}
    new = reader.store("stored after the repair")
    assert reader.get(new).content == "stored after the repair"

    (event,) = recorder.of_type(RecordQuarantined)
    assert (event.line_no, event.path) == (2, str(memory.path / "items.jsonl"))
    assert garbage.decode("utf-8", "replace")[:20] not in event.reason  # the reason never quotes the line
    corrupt = [json.loads(line) for line in Path(event.quarantine_path).read_text(encoding="utf-8").splitlines()]
    assert len(corrupt) == 1 and corrupt[0]["line_no"] == 2
    assert base64.b64decode(corrupt[0]["data_base64"]) == garbage
    assert garbage not in (memory.path / "items.jsonl").read_bytes()
    assert len(_reopen(memory).records()) == 3  # later readers find a healthy file


def test_quarantine_falls_back_to_skipping_when_the_file_cannot_be_rewritten(
    stored: tuple[AgentMemory, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, ids = stored
    _edit_line(memory, 1, lambda line: b"not a record")
    before = (memory.path / "items.jsonl").read_bytes()

    def read_only_disk(*args: object, **kwargs: object) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr("os.replace", read_only_disk)
    recorder = NoticeRecorder()
    reader = _reopen(memory, recorder, index_on_store=False)

    assert [r.id for r in reader.records()] == [ids["soup"], ids["violin"]]
    (event,) = recorder.of_type(RecordQuarantined)
    assert event.quarantine_path is None  # only skipped
    monkeypatch.undo()
    assert (memory.path / "items.jsonl").read_bytes() == before


# -- content blobs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["missing", "altered"])
def test_a_lost_content_blob_fails_that_item_only(
    stored: tuple[AgentMemory, dict[str, str]], damage: str
) -> None:
    memory, ids = stored
    blob = memory.path / "content" / memory.get(ids["soup"]).metadata.content_sha256
    if damage == "missing":
        blob.unlink()
    else:
        blob.write_bytes(b"bit rot")
    recorder = NoticeRecorder()
    reader = _reopen(memory, recorder)

    for call in (lambda: reader.get(ids["soup"]), lambda: reader.retrieve(ids["soup"])):
        with pytest.raises(StoreError, match="content blob"):
            call()
    assert reader.retrieve(ids["apollo"]).content == TEXTS["apollo"]
    assert {h.item.id for h in reader.query(limit=10)} == set(ids.values())  # listings use records only
    assert reader.query(text="moon landing", limit=1)[0].item.id == ids["apollo"]

    assert reader.rebuild_index() == 2
    (event,) = recorder.of_type(ContentMissing)
    assert event.item_id == ids["soup"]
    assert reader.query(text="who walked on the moon", limit=1)[0].item.id == ids["apollo"]
    assert reader.flush_index() == 0  # skipped, not retried on every query
    with pytest.raises(StoreError, match=ids["soup"]):
        reader.snapshot()


# -- the index ---------------------------------------------------------------------------------------


def test_a_record_too_big_for_the_index_is_skipped_not_poisonous(tmp_path: Path) -> None:
    """The §3 "memory poisoned" case: a record with 6,000 tags reached items.jsonl (as an older
    version wrote it) and its indexing failed; from then on every query, listing, store and
    rebuild_index of every new process raised."""
    writer = AgentMemory("agent", tmp_path, config=MemoryConfig(index_on_store=False))
    ids = {key: writer.store(text, tags=[key]) for key, text in TEXTS.items()}

    def six_thousand_tags(line: bytes) -> bytes:
        record = json.loads(line)
        record["metadata"]["tags"] = [f"t{i}" for i in range(6_000)]
        return json.dumps(record).encode()

    _edit_line(writer, 2, six_thousand_tags)
    notes: list[str] = []
    for attempt in range(2):  # a new process, then again after a rebuild
        recorder = NoticeRecorder()
        reader = _reopen(writer, recorder)
        if attempt:
            assert reader.rebuild_index() == 3  # apollo, violin and the note of the first attempt
        assert reader.query(text="stringed instruments from Cremona", limit=1)[0].item.id == ids["violin"]
        assert {h.item.id for h in reader.query(limit=10)} == {ids["apollo"], ids["violin"], *notes}
        assert len(reader.get(ids["soup"]).metadata.tags) == 6_000  # still stored and readable
        notes.append(reader.store(f"a note stored next to the big record ({attempt})", tags=[f"fine{attempt}"]))
        assert [h.item.id for h in reader.query(tags=[f"fine{attempt}"])] == [notes[-1]]
        refused = [e for e in recorder.of_type(IndexFailed) if not e.pending]
        assert [e.item_ids for e in refused] == [(ids["soup"],)]
        assert "6,000 tags" in refused[0].error
        reader.close()


def test_an_index_broken_by_a_bad_write_is_repaired_by_rebuild_index(
    stored: tuple[AgentMemory, dict[str, str]], recorder: NoticeRecorder
) -> None:
    memory, ids = stored
    with memory.index._using() as collection, pytest.raises(Exception, match="compaction"):  # past every guard
        collection.upsert(
            ids=["mem_00000000dead:0"], documents=["poison"], embeddings=[[1.0] + [0.0] * 383],
            metadatas=[{"item_id": "mem_00000000dead", "chunk_index": 0, **{f"tag:t{i}": True for i in range(6_000)}}],
        )

    late = memory.store("stored while the index is broken")  # returns its id all the same
    memory._upkeep.wait()  # the indexing thread's attempt, reported

    assert memory.get(late).content == "stored while the index is broken"
    assert [e.item_ids for e in recorder.of_type(IndexFailed) if e.pending] == [(late,)]
    # Another process's query still answers from what the index holds (reads work; a query never
    # embeds what others stored), and its indexing thread, trying the item again, says what to do.
    other = NoticeRecorder()
    reader = _reopen(memory, other)
    assert reader.query(text="who walked on the moon", limit=1)[0].item.id == ids["apollo"]
    reader._upkeep.wait()
    assert any("rebuild_index" in e.error for e in other.of_type(IndexFailed))
    reader.close()
    assert memory.rebuild_index() == 4
    assert memory.query(text="who walked on the moon", limit=1)[0].item.id == ids["apollo"]
    assert {h.item.id for h in memory.query(limit=10)} == {*ids.values(), late}


def test_store_returns_the_id_when_indexing_fails_and_the_next_query_indexes_it(
    stored: tuple[AgentMemory, dict[str, str]], recorder: NoticeRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, ids = stored
    real_add = memory.index.add
    calls = {"n": 0}

    def fails_once(chunks, vectors):  # noqa: ANN001, ANN202
        calls["n"] += 1
        if calls["n"] == 1:
            raise VectorIndexError("chromadb upsert failed: disk I/O error")
        return real_add(chunks, vectors)

    monkeypatch.setattr(memory.index, "add", fails_once)
    item_id = memory.store("Hubble photographed the Pillars of Creation in the Eagle Nebula.", tags=["space"])
    memory._upkeep.wait()  # the indexing thread's attempt, reported

    assert memory.get(item_id).content.startswith("Hubble")
    (event,) = recorder.of_type(IndexFailed)
    assert event.item_ids == (item_id,) and event.pending and "disk I/O" in event.error
    assert memory.query(text="nebula photographed by a telescope", limit=1)[0].item.id == item_id
    assert memory.flush_index() == 0
    assert len(memory) == len(ids) + 1  # no duplicate: the agent did not have to retry


def test_store_returns_the_id_when_the_index_lock_is_held_too_long(
    stored: tuple[AgentMemory, dict[str, str]], recorder: NoticeRecorder
) -> None:
    memory, ids = stored
    memory._upkeep.lock_timeout_s = 0.2
    other_process = FileLock(str(memory.path / "index.lock"))  # another open file: blocks us
    with other_process:
        item_id = memory.store("stored while another process rebuilds the index")
        memory._upkeep.wait()  # the indexing thread gave up waiting for the lock
    assert memory.get(item_id).content.startswith("stored while")
    (event,) = recorder.of_type(IndexFailed)
    assert event.pending and "LockTimeoutError" in event.error
    assert memory.flush_index() == 1


def test_a_damaged_keyword_index_is_recreated_from_the_store_by_the_next_query(
    stored: tuple[AgentMemory, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory, ids = stored
    memory.close()
    lexical = memory.path / "index" / "lexical.sqlite3"
    lexical.write_bytes(b"this is not a database" * 1_000)
    recorder = NoticeRecorder()
    reader = _reopen(memory, recorder)
    embedded: list[object] = []
    monkeypatch.setattr(type(reader.index), "add", lambda self, chunks, vectors: embedded.extend(chunks))

    assert reader.query(text="lentil soup recipe", limit=1)[0].item.id == ids["soup"]
    (event,) = recorder.of_type(IndexRecreated)
    assert event.path == str(lexical) and "not a database" in event.reason
    assert reader.lexical is not None and reader.lexical.item_ids() == set(ids.values())
    assert [h.item_id for h in reader.lexical.search("cumin", MemoryCriteria(), n_chunks=3)] == [ids["soup"]]
    assert embedded == []  # refilled from the store's chunks: the vector index was intact
    monkeypatch.undo()
    assert reader.rebuild_index() == 3
    assert reader.query(text="lentil soup recipe", limit=1)[0].item.id == ids["soup"]


def test_a_truncated_keyword_index_is_recreated_by_rebuild_index(
    stored: tuple[AgentMemory, dict[str, str]]
) -> None:
    memory, ids = stored
    for n in range(40):  # a file of several pages, so that truncation leaves a malformed database
        memory.store(f"Filler note {n}: " + "words about nothing in particular " * 40)
    memory.close()
    lexical = memory.path / "index" / "lexical.sqlite3"
    data = lexical.read_bytes()
    lexical.write_bytes(data[: len(data) // 3])
    recorder = NoticeRecorder()
    reader = _reopen(memory, recorder)

    # SQLite may notice the cut when it opens the file or only when a query reads the lost
    # pages: either way the query answers (recreated from the store), and so does a rebuild
    assert reader.query(text="lentil soup recipe", limit=1)[0].item.id == ids["soup"]
    assert reader.rebuild_index() == 43
    assert reader.query(text="lentil soup recipe", limit=1)[0].item.id == ids["soup"]
    assert len(recorder.of_type(IndexRecreated)) <= 2


# -- observers ------------------------------------------------------------------------------------


class Exploding:
    def on_notice(self, event: MemoryNotice) -> None:
        raise RuntimeError("observer bug")


def test_an_observer_that_raises_is_logged_and_never_breaks_the_memory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = NoticeRecorder()
    memory = AgentMemory("agent", tmp_path, config=MemoryConfig(index_on_store=False), observers=[Exploding()])
    memory.add_observer(recorder)
    first = memory.store("first")
    with open(memory.path / "items.jsonl", "ab") as handle:
        handle.write(b"garbage\n")

    with caplog.at_level(logging.WARNING, logger="agent_memory"):
        second = memory.store("second")

    assert [r.id for r in memory.records()] == [first, second]
    assert len(recorder.of_type(RecordQuarantined)) == 1  # the observer after the broken one still ran
    messages = [record.getMessage() for record in caplog.records]
    assert any("record_quarantined" in m for m in messages)
    assert any("observer" in m and "failed" in m for m in messages)


def test_events_serialise_as_json() -> None:
    event = IndexFailed(agent_id="a", item_ids=("mem_000000000001",), error="boom", pending=True)
    data = json.loads(event.model_dump_json())
    assert data["kind"] == "index_failed" and data["item_ids"] == ["mem_000000000001"]
    with pytest.raises(ValueError):
        event.error = "changed"  # type: ignore[misc]


def test_concurrent_readers_quarantine_a_bad_line_once(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path, config=MemoryConfig(index_on_store=False))
    ids = [memory.store(f"item {n}") for n in range(50)]
    _edit_line(memory, 25, lambda line: b"torn by a bad disk")
    recorder = NoticeRecorder()
    readers = [_reopen(memory, recorder, index_on_store=False) for _ in range(4)]
    results: list[list[str]] = []

    def read(reader: AgentMemory) -> None:
        results.append([r.id for r in reader.records()])

    threads = [threading.Thread(target=read, args=(reader,)) for reader in readers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    expected = ids[:24] + ids[25:]
    assert results == [expected] * 4
    assert len(recorder.of_type(RecordQuarantined)) == 1
    assert len((memory.path / "items.jsonl.corrupt").read_text(encoding="utf-8").splitlines()) == 1


class BrokenSummaryPlugin:
    """A third-party plugin with a bug in ``summary``."""

    name = "broken"
    priority = 1

    def matches(self, item) -> bool:  # noqa: ANN001
        return True

    def key_content(self, item, *, max_tokens, counter) -> str:  # noqa: ANN001
        raise RuntimeError("plugin bug")

    def summary(self, item, *, max_tokens, counter) -> str:  # noqa: ANN001
        raise RuntimeError("plugin bug")


def test_a_plugin_that_raises_falls_back_to_the_extractive_summary(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from agent_memory import PluginRegistry

    memory = AgentMemory(
        "agent", tmp_path, config=MemoryConfig(index_on_store=False), plugins=PluginRegistry([BrokenSummaryPlugin()])
    )
    text = "Chromadb stores vectors for retrieval. " + " ".join(f"Retrieval sentence {i} about vectors." for i in range(50))
    item_id = memory.store(text)

    with caplog.at_level(logging.ERROR, logger="agent_memory"):
        result = memory.retrieve(item_id, "summary")

    assert result.content.startswith("Chromadb stores vectors for retrieval.")
    assert any("plugin" in record.getMessage() for record in caplog.records)
