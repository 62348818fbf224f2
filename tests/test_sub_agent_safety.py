"""Sub-agents cannot escape the memory directory, take an agent's id, or share their parent's
derived ids (issue 20, findings 1-4), on real files through the real loop: the loopback scripted
LLM stands for the remote model only.

1. A hostile child id (``../../outside``, an absolute path, ...) is refused before any path is
   built: nothing is created anywhere, in any memory mode.
2. A child id must be new: the parent's own id or an existing agent's id is refused in every mode,
   and both memories stay openable and byte-for-byte unchanged.
3. A parent and a sub-agent sharing its memory each keep their own compacted ``turn_0001`` (the
   memory holds all four turns) and each reads its own back through ``retrieve_memory``; an old
   memory whose turn sits under the key without an agent still reads it, for its own agent only.
4. A model's ``spawn_agent`` call from a parent with a 123-128 character id (or a display name)
   gets a valid child id; a spawn that fails is a tool error the model reads, never an exception
   out of ``agent.run``.
"""

from __future__ import annotations

import json
import tempfile
import uuid
from pathlib import Path

import pytest
from test_agent import call, chat, server  # noqa: F401 - server is a fixture

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.agent.config import AgentConfig
from agent_memory.agent.loop import MemoryAgent
from agent_memory.errors import InvalidArgumentError, InvalidIdError
from agent_memory.fork import FORK_FILE
from agent_memory.ids import MAX_AGENT_ID_CHARS, legacy_turn_memory_id, sub_agent_id, validate_agent_id
from agent_memory.testing import FakeLLMServer, ScriptedReply

MODES = ("shared", "isolated", "none")
FAST = MemoryConfig(index_on_store=False)


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` (relative), with a file's bytes (``None`` for a directory)."""
    return {str(path.relative_to(root)): (path.read_bytes() if path.is_file() else None)
            for path in sorted(root.rglob("*"))}


def tool_messages(body: dict) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


# -- 1. hostile ids ------------------------------------------------------------------------------

def hostile_ids(tmp_path: Path, elsewhere: Path) -> list[object]:
    return [
        "../../outside", "../outside", "..", ".", "...", "a/../../../outside", "agents/../../outside",
        str(tmp_path / "absolute-target"), str(elsewhere), "a\\..\\..\\outside", "~",
        "", " ", "-rf", ".hidden", "x" * (MAX_AGENT_ID_CHARS + 1), "nul\x00byte", "ünïcode", "a b", 42,
    ]


@pytest.mark.parametrize("mode", MODES)
def test_a_hostile_child_id_is_refused_before_anything_is_written(server: FakeLLMServer, tmp_path: Path,
                                                                   mode: str) -> None:
    memory_dir = tmp_path / "deep" / "memory"
    elsewhere = Path(tempfile.gettempdir()) / f"agent-memory-escape-{uuid.uuid4().hex}"  # outside the tmp tree
    with MemoryAgent(chat(server), memory_dir=memory_dir, agent_id="lead", memory_config=FAST) as parent:
        parent.memory.store("The lead's note.", title="note")
        before = tree(tmp_path)
        for agent_id in hostile_ids(tmp_path, elsewhere):
            with pytest.raises(InvalidIdError):
                parent.spawn("anything", memory=mode, agent_id=agent_id)  # type: ignore[arg-type]
            assert tree(tmp_path) == before, f"spawn with agent_id={agent_id!r} wrote something"
        assert server.calls == 0  # no child ever ran
    assert not elsewhere.exists()


def test_a_model_cannot_name_the_child_and_nothing_is_created(server: FakeLLMServer, tmp_path: Path) -> None:
    server.enqueue(call("spawn_agent", task="t", memory="isolated", agent_id="../../outside"), "gave up")
    with MemoryAgent(chat(server), memory_dir=tmp_path / "memory", agent_id="lead", memory_config=FAST,
                     config=AgentConfig(allow_sub_agents=True)) as parent:
        run = parent.run("delegate")
        server.assert_complete()
        assert run.answer == "gave up"
        assert "wrong arguments for spawn_agent" in tool_messages(server.requests[-1])[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory"]
    assert sorted(p.name for p in (tmp_path / "memory" / "agents").iterdir()) == ["lead"]


# -- 2. a child id must be new -------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("target", ["parent", "other"])
def test_a_spawn_with_an_existing_agents_id_is_refused_and_changes_nothing(
        server: FakeLLMServer, tmp_path: Path, mode: str, target: str) -> None:
    with AgentMemory("other", tmp_path, config=FAST) as other:
        other_note = other.store("Another agent's note.", title="other")
    server.enqueue("lead answered")
    with MemoryAgent(chat(server), memory_dir=tmp_path, agent_id="lead", memory_config=FAST) as parent:
        parent.run("a first turn, so the lead has traces")
        lead_note = parent.memory.store("The lead's note.", title="lead")
        before = tree(tmp_path)
        agent_id = "lead" if target == "parent" else "other"
        with pytest.raises(InvalidArgumentError, match="taken"):
            parent.spawn("take over", memory=mode, agent_id=agent_id)
        assert tree(tmp_path) == before
        assert parent.children == [] and server.calls == 1
    for agent_id, note in (("lead", lead_note), ("other", other_note)):
        with AgentMemory(agent_id, tmp_path, config=FAST) as reopened:
            assert reopened.fork is None and not (reopened.agent_dir / FORK_FILE).exists()
            assert [record.id for record in reopened.records()] == [note]
            assert reopened.get(note).content.endswith("note.")


def test_a_childs_id_cannot_be_taken_twice(server: FakeLLMServer, tmp_path: Path) -> None:
    server.enqueue("first child done")
    with MemoryAgent(chat(server), memory_dir=tmp_path, agent_id="lead", memory_config=FAST) as lead, \
            MemoryAgent(chat(server), memory_dir=tmp_path, agent_id="peer", memory_config=FAST) as peer:
        first = lead.spawn("do it", memory="shared", agent_id="helper")
        assert first.agent_id == "helper" and first.answer == "first child done"
        snapshot = tree(tmp_path)
        for parent in (lead, peer):  # the same parent again, or another agent of the memory
            for mode in MODES:
                with pytest.raises(InvalidArgumentError, match="taken"):
                    parent.spawn("do it again", memory=mode, agent_id="helper")
        assert tree(tmp_path) == snapshot


def test_generated_ids_skip_taken_directories(server: FakeLLMServer, tmp_path: Path) -> None:
    (tmp_path / "agents" / "lead.sub01").mkdir(parents=True)  # e.g. left by a spawn in another process
    (tmp_path / "agents" / "lead.sub02").write_text("not even a directory", encoding="utf-8")
    server.enqueue("child done")
    with MemoryAgent(chat(server), memory_dir=tmp_path, agent_id="lead", memory_config=FAST) as parent:
        result = parent.spawn("work", memory="isolated")
    assert result.agent_id == "lead.sub03"
    assert not any((tmp_path / "agents" / "lead.sub01").iterdir())
    assert (tmp_path / "agents" / "lead.sub03" / FORK_FILE).is_file()


# -- 3. each agent's derived ids are its own -----------------------------------------------------

def converse(agent: MemoryAgent, server: FakeLLMServer, marker: str) -> str:
    """Three finished turns, then a fourth in which the model compacts and reads ``turn_0001``
    back; returns the retrieve_memory answer."""
    for n in (1, 2, 3):
        server.enqueue(f"{marker} answer {n}")
        agent.run(f"{marker} question {n}: about {marker.lower()}-topic-{n}")
    server.enqueue(call("compact_memory"), call("retrieve_memory", id="turn_0001"), f"{marker} done")
    run = agent.run(f"{marker} question 4")
    assert run.answer == f"{marker} done" and run.compactions == 1
    return tool_messages(server.requests[-1])[-1]


def test_a_parent_and_a_shared_child_each_keep_and_read_their_own_turns(server: FakeLLMServer,
                                                                         tmp_path: Path) -> None:
    config = AgentConfig(tail_turns=1)
    with MemoryAgent(chat(server), memory_dir=tmp_path, agent_id="lead", memory_config=FAST, config=config) as parent:
        # a sub-agent sharing the parent's memory, made as spawn(memory="shared") makes it
        child = MemoryAgent(chat(server), memory=parent.memory, config=config,
                            conversation_id="lead.sub01")
        parents_turn = converse(parent, server, "PARENT")
        childs_turn = converse(child, server, "CHILD")
        server.assert_complete()
        assert "PARENT question 1" in parents_turn and "CHILD" not in parents_turn
        assert "CHILD question 1" in childs_turn and "PARENT" not in childs_turn
        turns = [r for r in parent.memory.records() if r.type == "conversation_turn"]
        assert sorted((r.metadata.extra["agent_id"], *r.metadata.extra["turn_ids"]) for r in turns) == [
            ("lead", "turn_0001"), ("lead", "turn_0002"), ("lead.sub01", "turn_0001"), ("lead.sub01", "turn_0002")]
        episodes = [r for r in parent.memory.records() if r.type == "episode"]
        assert sorted(r.metadata.extra["agent_id"] for r in episodes) == ["lead", "lead.sub01"]
        child.close()


def old_turn(memory: AgentMemory) -> str:
    """A compacted turn as versions before agent-scoped ids stored it (key without the agent)."""
    return memory.store(
        "Turn 1:\n  User: legacy question about zebras\n  Assistant: zebras are striped",
        type="conversation_turn", source="conversation", title="turn_0001: legacy question about zebras",
        extra={"turn_ids": ["turn_0001"]}, item_id=legacy_turn_memory_id("turn_0001"),
    )


def test_an_old_memory_still_reads_its_turn_for_its_own_agent_only(server: FakeLLMServer, tmp_path: Path) -> None:
    with AgentMemory("lead", tmp_path, config=FAST) as old:
        legacy = old_turn(old)
    server.enqueue(call("retrieve_memory", id="turn_0001"), "lead done")
    with MemoryAgent(chat(server), memory_dir=tmp_path, agent_id="lead", memory_config=FAST) as parent:
        assert parent.run("what did I ask first?").answer == "lead done"
        answer = tool_messages(server.requests[-1])[-1]
        assert legacy in answer and "legacy question about zebras" in answer
        # neither a sub-agent sharing the memory nor an isolated one gets the parent's old turn
        for mode in ("shared", "isolated"):
            server.enqueue(call("retrieve_memory", id="turn_0001"), f"{mode} done")
            result = parent.spawn("what did you ask first?", memory=mode)
            assert result.answer == f"{mode} done"
            answer = tool_messages(server.requests[-1])[-1]
            assert "zebras" not in answer and "has not been compacted" in answer
        server.assert_complete()


# -- 4. a model's spawn never raises out of the loop ---------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("parent_id", [
    ("lead-" + "x" * 200)[:123], ("lead-" + "x" * 200)[:MAX_AGENT_ID_CHARS], "Research Bot (v2)"])
def test_a_models_spawn_from_a_long_or_display_named_parent_gets_a_valid_child(
        server: FakeLLMServer, tmp_path: Path, mode: str, parent_id: str) -> None:
    server.enqueue(call("spawn_agent", task="Say hi.", memory=mode), "hi", "the child said hi")
    named = {"agent_id": parent_id} if len(parent_id) > 100 else {"agent_id": "lead", "name": parent_id}
    with MemoryAgent(chat(server), memory_dir=tmp_path / "memory", memory_config=FAST,
                     config=AgentConfig(allow_sub_agents=True), **named) as parent:
        run = parent.run("delegate a greeting")
        server.assert_complete()
        assert run.answer == "the child said hi"
        child_id = parent.children[0].agent_id
        assert validate_agent_id(child_id) == child_id and len(child_id) <= MAX_AGENT_ID_CHARS
        assert f"Sub-agent {child_id} ({mode} memory" in tool_messages(server.requests[-1])[0]
        assert (tmp_path / "memory" / "agents" / child_id).is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory"]


def test_generated_ids_of_long_parents_are_distinct_and_bounded() -> None:
    long_a, long_b = "a" * 128, "a" * 127 + "b"  # the same first 110 characters
    ids = {sub_agent_id(parent, n) for parent in (long_a, long_b) for n in (1, 2, 100)}
    assert len(ids) == 6 and all(validate_agent_id(i) and len(i) <= MAX_AGENT_ID_CHARS for i in ids)
    assert sub_agent_id("lead", 3) == "lead.sub03"
    assert sub_agent_id("../../x", 1) == "x.sub01"


@pytest.mark.parametrize("mode", ["shared", "isolated"])  # the modes that read the parent's memory
def test_a_spawn_that_fails_is_a_tool_error_and_frees_its_directory(server: FakeLLMServer, tmp_path: Path,
                                                                    mode: str) -> None:
    from agent_memory.agent.sub_agents import run_spawn_call

    with MemoryAgent(chat(server), memory_dir=tmp_path, agent_id="lead", memory_config=FAST,
                     config=AgentConfig(allow_sub_agents=True)) as parent:
        parent.memory.store("The lead's note.", title="note")
        parent.memory.close()  # the memory fails under the spawn (MemoryClosedError, an AgentMemoryError)
        text, ok = run_spawn_call(parent, json.dumps({"task": "Say hi.", "memory": mode}))
        assert not ok and text.startswith("the sub-agent could not run (MemoryClosedError")
        assert "Do the task yourself" in text
        assert sorted(p.name for p in (tmp_path / "agents").iterdir()) == ["lead"]  # the claimed id is free again
        assert parent.children == [] and server.calls == 0


def test_a_child_whose_model_fails_is_a_tool_error(server: FakeLLMServer, tmp_path: Path) -> None:
    server.enqueue(call("spawn_agent", task="Say hi.", memory="shared"),
                   ScriptedReply(content="the provider is down", status=500), "did it myself")
    with MemoryAgent(chat(server), memory_dir=tmp_path, agent_id="lead", memory_config=FAST,
                     config=AgentConfig(allow_sub_agents=True)) as parent:
        run = parent.run("delegate a greeting")
        server.assert_complete()
        assert run.answer == "did it myself"
        assert tool_messages(server.requests[-1])[0].startswith("the sub-agent failed")


def test_a_fork_is_never_saved_for_its_parent_itself(tmp_path: Path) -> None:
    from agent_memory.fork import MemoryFork

    with AgentMemory("lead", tmp_path, config=FAST) as memory:
        note = memory.store("The lead's note.", title="note")
        before = tree(tmp_path)
        with pytest.raises(InvalidArgumentError, match="for that agent itself"):
            MemoryFork.of(memory).save_for(memory.backend, "lead")
        assert tree(tmp_path) == before
    with AgentMemory("lead", tmp_path, config=FAST) as reopened:
        assert reopened.fork is None and reopened.get(note).content == "The lead's note."


@pytest.mark.parametrize(("version", "field"), [(1, "parent_memory_dir"), (2, "parent_store")])
def test_a_fork_written_by_an_earlier_version_still_opens_its_parent(tmp_path: Path, version: int, field: str) -> None:
    import json

    from agent_memory.fork import FORK_DOCUMENT, MemoryFork
    from agent_memory.storage import common

    with AgentMemory("lead", tmp_path, config=FAST) as parent:
        shown = parent.store("Visible to the child.", title="shown")
        fork = MemoryFork.of(parent)
    old = {"schema_version": version, "parent_agent_id": "lead", field: fork.parent_backend,
           "item_ids": [shown], "created_at": fork.created_at.isoformat()}
    with AgentMemory("lead.sub01", tmp_path, config=FAST) as child:
        common.document(child.backend, "lead.sub01", FORK_DOCUMENT).put(json.dumps(old).encode())
    with AgentMemory("lead.sub01", tmp_path, config=FAST) as reopened:
        assert reopened.fork is not None and reopened.fork.parent_backend == fork.parent_backend
        assert reopened.get(shown).content == "Visible to the child."
