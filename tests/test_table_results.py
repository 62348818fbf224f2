"""A table is embedded by a sample of its rows, and every row stays in the keyword index (issue 38).

A database result, a CSV export or JSON lines is rows one like the next: embedded chunk by chunk
up to ``max_embedded_chars`` (the Chinook Track table: 302 chunks) it took 8-16 s on 2 cores to
be found by meaning and filled the vector index with rows. Now at most
``MAX_EMBEDDED_TABLE_CHUNKS`` of its chunks get a vector, spread over it, while an exact value
of any row is still found by the keyword index; prose (pages, search results with their
snippets, paragraphs) is embedded as before. On real data: the Chinook database, the TapeAgents
search results, HotpotQA paragraphs and a readability page.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agent_memory import AgentMemory, MemoryCriteria
from agent_memory.index.chunking import MAX_EMBEDDED_TABLE_CHUNKS, chunks_to_embed, is_table, item_chunks, spread
from agent_memory.index.embedding import index_embedder
from agent_memory.models.items import ItemRecord
from agent_memory.tokens import default_token_counter


def chinook(data_dir: Path, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and rows of a query on the real Chinook database."""
    db = sqlite3.connect(f"file:{data_dir / 'sqlite' / 'Chinook_Sqlite.sqlite'}?mode=ro", uri=True)
    try:
        cursor = db.execute(sql)
        return [column[0] for column in cursor.description], cursor.fetchall()
    finally:
        db.close()


def track_rows(data_dir: Path) -> list[dict[str, Any]]:
    columns, rows = chinook(data_dir, "SELECT * FROM Track")
    return [dict(zip(columns, row, strict=True)) for row in rows]


def delimited(data_dir: Path, delimiter: str) -> str:
    columns, rows = chinook(data_dir, "SELECT * FROM Track")
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return out.getvalue()


def search_results(data_dir: Path) -> list[dict[str, Any]]:
    """Every search result of the TapeAgents GAIA tapes (title, url, a snippet of prose)."""
    results: list[dict[str, Any]] = []
    for path in sorted((data_dir / "traces" / "tapeagents_gaia_workarena").rglob("*.json")):
        for step in json.loads(path.read_text(encoding="utf-8")).get("steps", []):
            if step.get("kind") == "search_results_observation":
                results += step.get("serp") or []
    return results


def paragraphs(data_dir: Path) -> str:
    """HotpotQA paragraphs, one per line (prose full of commas)."""
    questions = json.loads((data_dir / "hotpotqa" / "hotpot_dev_distractor_60.json").read_text(encoding="utf-8"))
    return "\n".join(" ".join(sentences) for question in questions[:5] for _, sentences in question["context"])


def record_of(memory: AgentMemory, item_id: str) -> ItemRecord:
    return next(record for record in memory.records() if record.id == item_id)


def test_tables_are_told_from_prose(request: pytest.FixtureRequest, data_dir: Path) -> None:
    memory = AgentMemory("tables", f"memory://{request.node.name}")
    rows = track_rows(data_dir)
    tables = {
        "json rows": dict(content=rows, type="database_result"),
        "rows as arrays": dict(content=[list(row.values()) for row in rows], type="database_result"),
        "rows under a key": dict(content={"rows": rows, "count": len(rows)}, type="database_result"),
        "columns and rows": dict(content={"columns": list(rows[0]), "rows": [list(row.values()) for row in rows]}),
        "json text": dict(content=json.dumps(rows), media_type="application/json"),
        "json lines": dict(content="\n".join(json.dumps(row) for row in rows), media_type="application/x-ndjson"),
        "csv": dict(content=delimited(data_dir, ","), media_type="text/csv"),
        "tsv, undeclared": dict(content=delimited(data_dir, "\t")),
        "pipes, undeclared": dict(content=delimited(data_dir, "|")),
    }
    page = (data_dir / "webpages/readability/002/source.html").read_text(encoding="utf-8")
    prose = {
        "search results with snippets": dict(content=search_results(data_dir)),
        "paragraphs, one per line": dict(content=paragraphs(data_dir)),
        "a web page": dict(content=page, type="web_content", media_type="text/html"),
        "a log": dict(content="GET /healthz 200 OK 0.4ms\n" * 300),
        "a few rows": dict(content=rows[:9], type="database_result"),
        "an object of two lists": dict(content={"tracks": rows[:50], "albums": rows[50:100]}),
    }
    assert len(prose["search results with snippets"]["content"]) > 50
    for name, arguments in [*tables.items(), *prose.items()]:
        item_id = memory.store(source="test", **arguments)
        assert is_table(record_of(memory, item_id), memory.get(item_id).content) == (name in tables), name
    memory.close()


def test_a_table_gets_a_spread_sample_of_vectors_and_every_row_in_the_keyword_index(
        data_dir: Path, tmp_path: Path) -> None:
    rows = track_rows(data_dir)
    memory = AgentMemory("tables", tmp_path / "memory")
    facts = memory.store_many({"content": text, "source": "notes"} for text in [
        "The heron nests in tall reeds beside the river.", "Glaciers in the Alps have shrunk by half since 1900."])
    table = memory.store(rows, type="database_result", source="sqlite://Chinook/Track")
    memory.flush_index()
    record, content = record_of(memory, table), memory.get(table).content
    chunks = item_chunks(record, content, default_token_counter(), max_chars=memory.config.max_index_chars,
                         chunk_tokens=memory.config.chunk_tokens, overlap_tokens=memory.config.chunk_overlap_tokens)
    assert len(chunks) > 10 * MAX_EMBEDDED_TABLE_CHUNKS
    query = index_embedder(memory.config).embed_query("music tracks")
    vectors = [hit for hit in memory.index.search(query, MemoryCriteria(), n_chunks=1_000) if hit.item_id == table]
    assert 1 < len(vectors) <= MAX_EMBEDDED_TABLE_CHUNKS
    assert {hit.chunk_index for hit in vectors} <= spread(len(chunks), MAX_EMBEDDED_TABLE_CHUNKS)
    assert max(hit.chunk_index for hit in vectors) > len(chunks) // 2  # spread over the table, not its head
    for row in rows[:: len(rows) // 7]:  # an exact value of any row, embedded or not, finds it
        hits = memory.query(row["Name"], limit=3)
        assert any(hit.item.id == table and row["Name"] in (hit.chunk or "") for hit in hits), row["Name"]
    sentence = " ".join(str(value) for value in rows[5].values() if value is not None)
    assert memory.query(sentence, limit=1, ranking="similarity")[0].item.id == table  # found by meaning
    assert set(facts) <= memory.index.item_ids()
    memory.close()


def test_prose_and_small_items_are_embedded_as_before(data_dir: Path) -> None:
    """The sample applies to tables only (a page and paragraphs full of commas are none), and
    only past ``MAX_EMBEDDED_TABLE_CHUNKS`` chunks."""
    memory = AgentMemory("prose", "memory://prose-as-before")
    page = (data_dir / "webpages/readability/002/source.html").read_text(encoding="utf-8")
    page_id = memory.store(page, type="web_content", media_type="text/html", source="https://example.org")
    text_id = memory.store(paragraphs(data_dir), source="hotpotqa")
    counter = default_token_counter()
    for item_id in (page_id, text_id):
        record, content = record_of(memory, item_id), memory.get(item_id).content
        chunks = item_chunks(record, content, counter, max_chars=2_000_000, chunk_tokens=160, overlap_tokens=32)
        assert len(chunks) > MAX_EMBEDDED_TABLE_CHUNKS and not is_table(record, content)
    small = track_rows(data_dir)[:20]
    small_id = memory.store(small, type="database_result", source="sqlite://Chinook/Track")
    chunks = item_chunks(record_of(memory, small_id), small, counter, max_chars=2_000_000, chunk_tokens=160,
                         overlap_tokens=32)
    assert len(chunks) <= MAX_EMBEDDED_TABLE_CHUNKS
    assert chunks_to_embed(chunks, max_start_char=None, tables={small_id}) == chunks
    memory.close()
