"""A memory written by the previous main opens with today's code and reads back what the old code
read (issue 39, plan step a0): items, traces, documents and the event journal, from a memory
directory and from a Postgres database at schema version 3.

The fixture (``tests/fixtures/main-8e79ebe/``) was written by the code of main at 8e79ebe and read
back by it into ``manifest.json``; ``make.py`` there made it and says how to make it again. Each
test opens a copy (a temporary directory; a new database loaded with the old rows), so the
fixture itself is never changed, and compares what today's code reads with the manifest."""

from __future__ import annotations

import importlib.util
import json
import tarfile
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
from agent_memory.storage.postgres.database import MIGRATIONS
from agent_memory.testing import PostgresServer

FIXTURE = Path(__file__).parent / "fixtures" / "main-8e79ebe"


def _make_module() -> ModuleType:
    """``make.py`` of the fixture, for its :func:`view` (what the manifest holds, read by the
    library on the path: here, today's)."""
    spec = importlib.util.spec_from_file_location("fixture_main_8e79ebe", FIXTURE / "make.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKE = _make_module()
MANIFEST: dict[str, Any] = json.loads((FIXTURE / "manifest.json").read_text(encoding="utf-8"))


def _members(archive: str) -> dict[str, bytes]:
    with tarfile.open(FIXTURE / archive, mode="r:gz") as tar:
        return {member.name: tar.extractfile(member).read()  # type: ignore[union-attr]
                for member in tar.getmembers() if member.isfile()}


def _assert_same(read: dict[str, Any], expected: dict[str, Any]) -> None:
    """``read`` equals ``expected``, compared part by part so a failure names the agent and part."""
    assert sorted(read) == sorted(expected)
    for agent_id, parts in expected.items():
        for part, value in parts.items():
            assert read[agent_id][part] == value, (agent_id, part)


def test_the_fixture_holds_every_part_the_plan_names() -> None:
    """The fixture is what later steps migrate: every kind of record is in it, on both backends."""
    for backend in ("files", "postgres"):
        agents = MANIFEST[backend]
        assert sorted(agents) == [MAKE.AGENT, MAKE.CHILD]
        main, child = agents[MAKE.AGENT], agents[MAKE.CHILD]
        assert len(main["items"]) >= 3 and {item["type"] for item in main["items"]} >= {"web_content", "file",
                                                                                       "database_result"}
        assert all(main["traces"][kind] for kind in ("raw", "archive", "episodic", "semantic"))
        assert any(fact["pinned"] for fact in main["traces"]["semantic"])
        statuses = [event["status"] for event in main["journal"]["events"]]
        assert {"applied", "failed", "queued"} <= set(statuses)
        (pending,) = [event for event in main["journal"]["events"] if event["status"] == "queued"]
        assert pending["payload"]["result"]["$chars"] == 1_000_000  # the 1 MB result, journaled whole
        assert main["documents"]["working_context"] and main["documents"]["session.s1"]
        assert child["documents"]["fork"] and child["documents"]["spawn"]
    assert MANIFEST["postgres_schema_version"] == 3


def test_a_memory_directory_of_the_previous_main_reads_back(tmp_path: Path) -> None:
    directory = tmp_path / "memory"
    for name, data in _members("files.tar.gz").items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    _assert_same(MAKE.view(str(directory)), MANIFEST["files"])


def test_a_postgres_database_of_the_previous_main_reads_back(postgres_server: PostgresServer) -> None:
    url = postgres_server.new_database()
    version = MANIFEST["postgres_schema_version"]
    dumps = _members("postgres.tar.gz")
    with psycopg.connect(url, autocommit=True) as conn:  # the schema the old code made, then its rows
        conn.execute("CREATE TABLE am_schema (version integer NOT NULL)")
        for number, migration in enumerate(MIGRATIONS[:version], start=1):
            conn.execute(migration)
            conn.execute("INSERT INTO am_schema (version) VALUES (%s)", (number,))
        for table in MANIFEST["postgres_tables"]:
            with conn.cursor().copy(f"COPY {table} FROM STDIN") as copy:
                copy.write(dumps[f"{table}.copy"])
        serials = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_name LIKE 'am\\_%' AND column_default LIKE 'nextval(%'").fetchall()
        for table, column in serials:  # as the old database stood: its sequences after its rows
            conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), "
                         f"coalesce((SELECT max({column}) FROM {table}), 0) + 1, false)")
    _assert_same(MAKE.view(url), MANIFEST["postgres"])


def test_the_fixture_stays_small() -> None:
    assert sum(path.stat().st_size for path in FIXTURE.iterdir() if path.is_file()) < 150_000


def test_postgres_traces_with_repeated_ids_move_onto_the_logs_keyed_as_the_library_keys_them(
        postgres_server: PostgresServer) -> None:
    """Migration 4 (am_traces onto the item logs) keys each row as trace_key does: AutoByteus'
    repeated ids in another turn stay apart, the same line written again replaces the first in its
    place; the logs '<agent>/traces.<kind>' are the agent's, not agents of their own."""
    from agent_memory.models.traces import RAW_TRACE_ADAPTER, RawTraceItem
    from agent_memory.storage import common, open_backend

    def line(turn: int, seq: int, content: str, item_id: str = "rt_1738100000123") -> str:
        item = RawTraceItem(id=item_id, turn_id=f"turn_{turn:04d}", seq=seq, trace_type="user", content=content,
                            source_event="test")
        return RAW_TRACE_ADAPTER.dump_json(item).decode()

    url = postgres_server.new_database()
    with psycopg.connect(url, autocommit=True) as conn:  # a database the old code wrote
        conn.execute("CREATE TABLE am_schema (version integer NOT NULL)")
        for number, migration in enumerate(MIGRATIONS[:3], start=1):
            conn.execute(migration)
            conn.execute("INSERT INTO am_schema (version) VALUES (%s)", (number,))
        rows = [line(1, 1, "first"), line(2, 1, "again, turn 2"), line(3, 1, "other", "rt_other"),
                line(1, 1, "first, written again"), line(2, 1, "turn 2, written again")]
        for record in rows:
            conn.execute("INSERT INTO am_traces (agent_id, kind, record) VALUES ('a', 'raw', %s)", (record,))
        conn.execute("INSERT INTO am_agents (agent_id) VALUES ('a')")
    backend = open_backend(url)
    found = backend.log("a", "traces.raw").read()
    assert [(key, json.loads(record)["content"]) for key, record in found.records] == [
        ("rt_1738100000123", "first, written again"),
        ("rt_1738100000123#turn_0002/1", "turn 2, written again"),
        ("rt_other", "other"),
    ]
    assert [item.content for item in common.traces(backend, "a").list_raw()] == [
        "first, written again", "turn 2, written again", "other"]
    assert backend.agent_ids() == ["a"] and not backend.claim("a")
    backend.release_claim("a")
    assert backend.agent_ids() == [] and backend.log("a", "traces.raw").read().records == []
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT to_regclass('am_traces')").fetchone() == (None,)
