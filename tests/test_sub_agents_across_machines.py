"""Sub-agents on other machines (issue 16): processes that have only the database URL. A shared
child reads and writes its parent's memory (its conversation under its own id); an isolated
sibling reads the parent's items as of its fork, and neither sees the other's items. Real Postgres
with pgvector (conftest's ``postgres_server``), the real embedding model, real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from agent_memory import AgentMemory, ItemNotFoundError
from agent_memory.errors import OutsideSnapshotError
from agent_memory.fork import MemoryFork
from agent_memory.testing import PostgresServer

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
ENV.pop("AGENT_MEMORY_URL", None)

SHARED_CHILD = textwrap.dedent("""
    import json, sys
    from agent_memory import AgentMemory, ItemNotFoundError
    from agent_memory.kernel.manager import MemoryManager
    url, parent_item, sibling_item = sys.argv[1:4]
    memory = AgentMemory("lead", backend=url)                      # the parent's memory: shared
    manager = MemoryManager(memory, agent_id="lead.sub01")        # the child's own conversation
    manager.ingest_user_message("What does the parent know about the bridge?")
    out = {"read": memory.get(parent_item).content,
           "found": [h.item.id for h in memory.query(text="when does the bridge open", limit=3)]}
    try:
        memory.get(sibling_item)
        out["sibling"] = "read"
    except ItemNotFoundError:
        out["sibling"] = "refused"
    out["stored"] = memory.store("The child found: the bridge closes at midnight.")
    out["turns"] = manager.traces.active_turn_ids()
    print(json.dumps(out))
    """)

ISOLATED_SIBLING = textwrap.dedent("""
    import json, sys
    from agent_memory import AgentMemory, ItemNotFoundError
    url, parent_item, child_item = sys.argv[1:4]
    memory = AgentMemory("lead.sub02", backend=url)                 # its fork is in the database
    out = {"parent": memory.get(parent_item).content,
           "own": [r.id for r in memory.own_records()],
           "found": [h.item.id for h in memory.query(text="bridge", limit=5)]}
    try:
        memory.get(child_item)
        out["child"] = "read"
    except ItemNotFoundError:
        out["child"] = "refused"
    print(json.dumps(out))
    """)


def _run(script: str, *args: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=ENV, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_shared_child_and_an_isolated_sibling_on_other_machines(postgres_server: PostgresServer) -> None:
    url = postgres_server.new_database()
    parent = AgentMemory("lead", backend=url)
    known = parent.store("The bridge opens at nine every morning.", title="bridge")
    assert parent.backend.claim("lead.sub02")
    MemoryFork.of(parent).save_for(parent.backend, "lead.sub02")  # what spawn(memory="isolated") writes
    sibling = AgentMemory("lead.sub02", backend=url)
    secret = sibling.store("The sibling's own note: the bridge's toll is two euros.")
    assert secret not in parent

    child = _run(SHARED_CHILD, url, known, secret)
    assert child["read"] == "The bridge opens at nine every morning." and known in child["found"]  # type: ignore[operator]
    assert child["sibling"] == "refused" and secret not in child["found"]  # type: ignore[operator]
    assert child["turns"] == ["turn_0001"]
    stored = str(child["stored"])
    assert parent.get(stored).content.startswith("The child found")  # the parent sees the shared child's item
    assert AgentMemory("lead.sub01", backend=url).records() == []  # the child kept its items in the parent's scope

    isolated = _run(ISOLATED_SIBLING, url, known, stored)
    assert isolated["parent"] == "The bridge opens at nine every morning." and isolated["own"] == [secret]
    assert isolated["child"] == "refused" and stored not in isolated["found"]  # type: ignore[operator]
    assert set(isolated["found"]) == {known, secret}  # type: ignore[arg-type]
    with pytest.raises((OutsideSnapshotError, ItemNotFoundError)):
        sibling.get(stored)  # an item stored after its fork
