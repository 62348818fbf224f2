"""A Postgres outage (issue 27, item 5): while the server is down every call says so
(:class:`BackendUnavailableError`, naming the server and since when) at once, without waiting for a
connection; calls work again as soon as the server is back; nothing acknowledged is lost. A real
Postgres with pgvector of the test's own (the session's ``postgres_server`` is shared, and this
test stops its server), the real embedding model, and a MemoryAgent on the real openai SDK against
the scripted loopback model."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from agent_memory import AgentMemory
from agent_memory.agent.loop import MemoryAgent
from agent_memory.errors import BackendUnavailableError
from agent_memory.kernel.budget import ModelLimits
from agent_memory.llm.chat import OpenAIChatModel
from agent_memory.storage.postgres import PostgresBackend
from agent_memory.storage.postgres.database import RETRY_INTERVAL_S
from agent_memory.testing import FakeLLMServer, PostgresServer, ScriptedReply, ScriptedToolCall

NOTES = ("The ferry to the island leaves at noon.", "The lighthouse keeper lights the lamp at dusk.",
         "The harbour office closes on Sundays.")


@pytest.fixture
def server() -> Iterator[PostgresServer]:
    """A Postgres of this test's own: it is stopped and started again."""
    with PostgresServer() as srv:
        if srv.path is None:
            pytest.skip("AGENT_MEMORY_TEST_POSTGRES_URL names a server this test cannot stop")
        yield srv


def _queued(memory: AgentMemory) -> int:
    """How many requests for a connection of the memory's pool had to wait for one."""
    backend = memory.backend
    assert isinstance(backend, PostgresBackend)
    return backend.database.pool.get_stats().get("requests_queued", 0)


def test_an_outage_is_named_fails_fast_and_ends_when_the_server_returns(server: PostgresServer) -> None:
    url = server.new_database()
    unopened = server.new_database()  # opened first while the server is down
    memory = AgentMemory("harbour", backend=url)
    acknowledged = {memory.store(note): note for note in NOTES}
    with FakeLLMServer() as llm:
        model = OpenAIChatModel("fake-model", base_url=llm.base_url, api_key="x", max_retries=0)
        limits = ModelLimits(max_context_tokens=32_000, max_output_tokens=1_000)
        agent = MemoryAgent(model, memory=memory, limits=limits)
        llm.enqueue(ScriptedReply(tool_calls=(ScriptedToolCall("store_memory", json.dumps(
            {"content": "The harbour master is Ana."})),)), "Noted.")
        agent.run("Remember: the harbour master is Ana.")
        acknowledged.update({r.id: memory.get(r.id).content for r in memory.own_records() if r.id not in acknowledged})
        assert "The harbour master is Ana." in acknowledged.values()

        before = time.time()
        server.stop()
        queued = _queued(memory)
        with pytest.raises(BackendUnavailableError) as first:
            memory.store("Written while the server is down.")
        assert first.value.host == str(server.path) and before <= first.value.since <= time.time()
        assert "cannot be reached" in str(first.value) and str(server.path) in str(first.value)
        with pytest.raises(BackendUnavailableError) as read:
            memory.get(next(iter(acknowledged)))
        with pytest.raises(BackendUnavailableError) as searched:
            memory.query(text="ferry")
        with pytest.raises(BackendUnavailableError) as in_agent:  # what the agent's caller sees
            agent.run("When does the ferry leave?")
        assert read.value.since == searched.value.since == in_agent.value.since == first.value.since
        assert "cannot be reached" in str(in_agent.value)
        with pytest.raises(BackendUnavailableError, match="cannot be reached"):  # not a ConfigurationError
            AgentMemory("harbour", backend=unopened)
        assert _queued(memory) == queued  # no call waited for a connection of the pool

        server.start()
        time.sleep(RETRY_INTERVAL_S)  # the next call tries the server again
        after = memory.store("Written after the server came back.")
        acknowledged[after] = "Written after the server came back."
        assert memory.query(text="ferry island noon", limit=1)[0].item.id == next(iter(acknowledged))
        llm.enqueue("The ferry leaves at noon.")
        assert agent.run("When does the ferry leave?").answer == "The ferry leaves at noon."

    again = AgentMemory("harbour", backend=url)  # what every process reads: all acknowledged, no more
    assert {r.id: again.get(r.id).content for r in again.own_records()} == acknowledged
    memory.close()
    again.close()
