"""Text an index cannot keep never stops the index (issue 27, item 1).

A tool's binary-ish output holds NUL characters, which Postgres ``text`` columns refuse: once two
such items made every later query of a Postgres memory fail. Here, on both backends (files, and a
real Postgres with pgvector): NUL text is stored, indexed and found, through the library, the
model's ``store_memory``, an agent run and a new process; and an item an index refuses outright
(a real database rule, added by the test) is stored, acknowledged, retrievable, reported once, and
never keeps the other items from being indexed and found.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from actions import MemoryToolkit
from agent_memory import AgentMemory, MemoryConfig
from agent_memory.agent.loop import MemoryAgent
from agent_memory.agent.tools import tool
from agent_memory.index.upkeep import PROBE_ITEM_ID
from agent_memory.llm.chat import OpenAIChatModel
from agent_memory.observers import IndexFailed, NoticeRecorder
from agent_memory.testing import FakeLLMServer, PostgresServer, ScriptedReply, ScriptedToolCall

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(params=["files", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, object]]:
    """How to open a memory on each backend: ``AgentMemory(agent, **where)``."""
    if request.param == "files":
        yield {"memory_dir": tmp_path / "memory"}
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        yield {"backend": server.new_database()}


def _failures(recorder: NoticeRecorder) -> list[IndexFailed]:
    return [notice for notice in recorder.notices if isinstance(notice, IndexFailed)]


def test_nul_text_is_stored_indexed_and_found_on_both_backends(where: dict[str, object]) -> None:
    recorder = NoticeRecorder()
    memory = AgentMemory("nul", **where)  # type: ignore[arg-type]
    memory.add_observer(recorder)
    keeper = memory.store("The lighthouse keeper lit the lamp at dusk.")
    first = memory.store("first\x00note about the harbour crane", source="dump\x00tool", title="raw\x00bytes",
                         tags=["bin\x00ary"])
    second = memory.store(b"second\x00note".decode("utf-8") + " about the ferry timetable")
    assert memory.query("lighthouse keeper")[0].item.id == keeper  # the query that used to fail
    assert memory.query("harbour crane")[0].item.id == first
    assert memory.query("ferry timetable")[0].item.id == second
    assert [hit.item.id for hit in memory.query(source="dump\x00tool")] == [first]
    assert [hit.item.id for hit in memory.query("crane", tags=["bin\x00ary"])] == [first]
    assert memory.get(first).content == "first\x00note about the harbour crane"  # kept exactly
    assert memory.get(first).metadata.source == "dump\x00tool"
    assert _failures(recorder) == []
    memory.close()


def test_nul_text_from_the_model_and_across_a_new_process(where: dict[str, object], tmp_path: Path) -> None:
    memory = AgentMemory("model", **where)  # type: ignore[arg-type]
    toolkit = MemoryToolkit(memory)
    stored = toolkit.dispatch("store_memory", json.dumps({"content": "\u0000\u0000 The pier light is green.\u0000"}))
    again = toolkit.dispatch("store_memory", json.dumps({"content": "two\u0000NULs\u0000 in the tide table"}))
    assert stored.ok and again.ok
    found = toolkit.dispatch("query_memory", json.dumps({"query": "pier light"}))
    assert found.ok and "green" in found.content
    memory.close()
    script = (
        "import json, sys\n"
        "from agent_memory import AgentMemory\n"
        "where = json.loads(sys.argv[1])\n"
        "memory = AgentMemory('model', **where)\n"
        "print(json.dumps([hit.chunk for hit in memory.query('tide table')]))\n"
    )
    where_json = json.dumps({key: str(value) for key, value in where.items()})
    out = subprocess.run([sys.executable, "-c", script, where_json], capture_output=True, text=True, check=True,
                         cwd=tmp_path, timeout=300)
    chunks = json.loads(out.stdout.strip().splitlines()[-1])
    assert chunks and "tide table" in chunks[0]


def test_an_agent_run_whose_tools_return_nul_text(where: dict[str, object]) -> None:
    @tool
    def read_dump(name: str) -> str:
        """Read a binary dump as text.

        Args:
            name: the dump's name.
        """
        return f"{name}: \x00\x00ELF header\x00 then the build id 7f3a9c and a long tail " + "\x00 padding" * 400

    with FakeLLMServer() as server:
        chat = OpenAIChatModel("fake-model", base_url=server.base_url, api_key="x", max_retries=0)
        agent = MemoryAgent(chat, tools=[read_dump], agent_id="runner", **where)  # type: ignore[arg-type]
        call = ScriptedReply(tool_calls=(ScriptedToolCall("read_dump", json.dumps({"name": "core"})),))
        again = ScriptedReply(tool_calls=(ScriptedToolCall("read_dump", json.dumps({"name": "core2"})),))
        server.enqueue(call, again, "The build id is 7f3a9c.")
        run = agent.run("What is the build id of the core dump?")
        assert run.answer == "The build id is 7f3a9c."
        hits = agent.memory.query("ELF header build id")
        assert len(hits) == 2 and all("\x00" in agent.memory.get(hit.item.id).content for hit in hits)
        agent.close()


def _refuse_in_index(memory: AgentMemory, where: dict[str, object], item_id: str) -> None:
    """Make the keyword index refuse every chunk of ``item_id``: a rule of the real database
    (a trigger in the file backend's SQLite, a check constraint in Postgres)."""
    if "backend" in where:
        with psycopg.connect(str(where["backend"]), autocommit=True) as conn:
            conn.execute(f"ALTER TABLE am_keywords ADD CONSTRAINT refuse_{item_id} CHECK (item_id <> '{item_id}')")
    else:
        path = Path(str(where["memory_dir"])) / "agents" / memory.agent_id / "index" / "lexical.sqlite3"
        with sqlite3.connect(path) as conn:
            conn.execute(f"CREATE TRIGGER refuse_{item_id} BEFORE INSERT ON chunk_meta WHEN NEW.item_id = '{item_id}' "
                         "BEGIN SELECT RAISE(ABORT, 'refused by the test''s rule'); END")


def test_items_the_index_refuses_never_stop_it_for_the_others(where: dict[str, object]) -> None:
    recorder = NoticeRecorder()
    memory = AgentMemory("refuse", **where, config=MemoryConfig(index_on_store=False))  # type: ignore[arg-type]
    memory.add_observer(recorder)
    memory.store("The lighthouse keeper lit the lamp at dusk.")
    memory.flush_index()  # the keyword index exists now
    bad = ["mem_0000000000b1", "mem_0000000000b2"]
    for item_id in bad:
        _refuse_in_index(memory, where, item_id)
    for item_id in bad:
        memory.store(f"Refused note {item_id} about the lamp oil.", item_id=item_id)
    # The two refused items are the whole batch the next query indexes: the index is not down.
    assert memory.query("lighthouse keeper")[0].item.metadata.source == "agent"
    good = memory.store("The ferry leaves the harbour at noon.")
    assert memory.query("ferry harbour")[0].item.id == good  # later items are indexed and found
    failed = _failures(recorder)
    assert sorted(item for notice in failed for item in notice.item_ids) == bad  # which items, once each
    assert all(not n.pending and not n.label_only and ("refused by" in n.error or "refuse_" in n.error)
               for n in failed)
    for item_id in bad:
        assert item_id in memory and "lamp oil" in memory.retrieve(item_id).content  # stored and retrievable
    assert PROBE_ITEM_ID not in memory.index.item_ids()  # the probe chunk was taken out again
    memory.query("lamp oil")
    assert len(_failures(recorder)) == 2  # not reported again
    memory.close()


def test_an_item_whose_text_is_refused_is_indexed_by_its_label(postgres_server: PostgresServer) -> None:
    url = postgres_server.new_database()
    recorder = NoticeRecorder()
    memory = AgentMemory("label", backend=url)
    memory.add_observer(recorder)
    memory.store("The lighthouse keeper lit the lamp at dusk.")
    with psycopg.connect(url, autocommit=True) as conn:  # a rule on text only: the label passes
        conn.execute("ALTER TABLE am_vectors ADD CONSTRAINT no_forbidden CHECK (position('FORBIDDEN' in text) = 0)")
    refused = memory.store("FORBIDDEN words about the harbour crane", source="crane_log", tags=["port"])
    # The indexing thread's first failure is reported as pending (a failure may pass); the next
    # query hands the item back to the thread, which tries again, then contains it.
    memory._upkeep.wait()
    assert [notice.pending for notice in _failures(recorder)] == [True]
    assert memory.query("lighthouse")[0].item.id != refused
    assert [hit.item.id for hit in memory.query(tags=["port"])] == [refused]  # filters and listings find it
    assert [hit.item.id for hit in memory.query(source="crane_log")] == [refused]
    memory._upkeep.wait()
    stored, contained = _failures(recorder)
    assert stored.item_ids == contained.item_ids == (refused,) and stored.pending
    assert contained.label_only and not contained.pending and "no_forbidden" in contained.error
    memory.query("harbour crane")
    assert len(_failures(recorder)) == 2  # reported as refused once
    reopened = AgentMemory("label", backend=url)  # another process: in the index already, not retried
    reopened.add_observer(again := NoticeRecorder())
    assert reopened.query(tags=["port"])[0].item.id == refused
    assert _failures(again) == []
    memory.close()
    reopened.close()
