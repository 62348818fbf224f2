"""``agent-memory migrate``: a memory directory into Postgres and back, byte for byte (issue 16), run
with typer's CliRunner on real components: real files, a real Postgres with pgvector
(conftest's ``postgres_server``), the real embedding model."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import Result
from typer.testing import CliRunner

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.cli import app
from agent_memory.fork import MemoryFork
from agent_memory.kernel.manager import MemoryManager
from agent_memory.storage import open_backend
from agent_memory.storage.files.items import FileItemLog
from agent_memory.testing import PostgresServer
from agent_memory.storage import common

FAST = MemoryConfig(index_on_store=False)


def run(*args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == code, (args, result.exit_code, result.stdout, result.stderr)
    return result


def _files(agent_dir: Path) -> dict[str, object]:
    """What must come back byte for byte: the item records (each record's bytes, in order: the file
    of the source also holds the tombstone of a forget and the record it deletes, until it is
    compacted) and every content blob."""
    found: dict[str, object] = {"items.jsonl": FileItemLog(agent_dir).read().records}
    found |= {f"content/{p.name}": p.read_bytes() for p in sorted((agent_dir / "content").iterdir())}
    return found


def _traces(agent_dir: Path) -> dict[str, list[dict[str, object]]]:
    out = {}
    for name in ("raw_traces.jsonl", "raw_traces_archive.jsonl", "episodic.jsonl", "semantic.jsonl"):
        path = agent_dir / name
        out[name] = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []
    return out


def test_a_memory_directory_goes_into_postgres_and_back_byte_for_byte(tmp_path: Path,
                                                                       postgres_server: PostgresServer) -> None:
    source = tmp_path / "source"
    lead = AgentMemory("lead", source, config=FAST)
    kept = [lead.store("naïve café – Zürich 東京 🚀\r\n"), lead.store(bytes(range(256)), type="file"),
            lead.store({"b": 1, "a": [1, 2.5, None]}, type="database_result", tags=["rows"])]
    lead.forget(lead.store("forgotten before the copy"))  # a tombstone in items.jsonl
    manager = MemoryManager(lead, system_prompt="You research.")
    manager.ingest_user_message("Find the bridge's opening hour.")
    manager.ingest_assistant_response("It opens at nine.")
    manager.pin_item(kept[0])
    manager.pin_fact("The user prefers short answers.")
    manager.compact()
    manager.save()
    assert open_backend(str(source)).claim("lead.sub01")
    MemoryFork.of(lead).save_for(lead.backend, "lead.sub01")
    child = AgentMemory("lead.sub01", source, config=FAST)
    child.store("The child's own note.")

    url = postgres_server.new_database()
    out = run("migrate", "--from", str(source), "--to", url)
    assert "Copied 2 agent(s)" in out.stdout
    in_db = AgentMemory("lead", backend=url)
    assert [r.id for r in in_db.records()] == kept and in_db.get(kept[1]).content == bytes(range(256))
    assert in_db.query(text="Zurich Tokyo cafe", limit=1)[0].item.id == kept[0]  # indexed at the target
    assert MemoryManager(in_db).pinned_items == (kept[0],)
    db_child = AgentMemory("lead.sub01", backend=url, config=FAST)
    assert db_child.fork is not None and db_child.get(kept[2]).content == {"b": 1, "a": [1, 2.5, None]}
    run("migrate", "--from", url, "--to", str(source), code=1)  # the target holds these agents already

    back = tmp_path / "back"
    run("migrate", "--from", url, "--to", str(back), "--no-index", "--json")
    for agent in ("lead", "lead.sub01"):
        assert _files(back / "agents" / agent) == _files(source / "agents" / agent)
        assert _traces(back / "agents" / agent) == _traces(source / "agents" / agent)
    assert json.loads((back / "agents" / "lead" / "working_context_snapshot.json").read_bytes()) == \
        json.loads((source / "agents" / "lead" / "working_context_snapshot.json").read_bytes())
    fork = json.loads((back / "agents" / "lead.sub01" / "fork.json").read_bytes())
    assert fork["parent_backend"] == str(back.resolve()) and sorted(fork["item_ids"]) == sorted(kept)
    restored = AgentMemory("lead.sub01", back, config=FAST)
    assert restored.get(kept[0]).content == "naïve café – Zürich 東京 🚀\r\n"  # through the moved parent


def test_migrate_refuses_an_agent_with_events_not_applied(tmp_path: Path, postgres_server: PostgresServer) -> None:
    source = tmp_path / "source"
    memory = AgentMemory("busy", source, config=FAST)
    memory.store("a note")
    common.journal(memory.backend, "busy").push("user_message", {"content": "not applied yet"})
    result = run("migrate", "--from", str(source), "--to", postgres_server.new_database(), code=1)
    assert "not applied yet" in result.stderr


def test_migrate_refuses_one_store_as_both_ends(tmp_path: Path) -> None:
    AgentMemory("a", tmp_path, config=FAST).store("a note")
    result = run("migrate", "--from", str(tmp_path), "--to", str(tmp_path), code=1)
    assert "same store" in result.stderr
