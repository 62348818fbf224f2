"""Ids from outside never become paths unchecked; the memory directory is found as documented.

No index is touched here (``index_on_store=False`` and no query), so these tests are fast.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent_memory import AgentMemory, ItemNotFoundError, MemoryConfig, MemorySnapshot, StoreError
from agent_memory.errors import InvalidIdError
from agent_memory.ids import new_memory_id, validate_agent_id, validate_memory_id

NO_INDEX = MemoryConfig(index_on_store=False)

BAD_AGENT_IDS = [
    pytest.param("../x", id="parent-escape"),
    pytest.param("a/b", id="slash"),
    pytest.param("a\\b", id="backslash"),
    pytest.param("..", id="dotdot"),
    pytest.param(".", id="dot"),
    pytest.param("...", id="dots-only"),
    pytest.param(".hidden", id="leading-dot"),
    pytest.param("/etc", id="absolute"),
    pytest.param("/tmp/evil", id="absolute-tmp"),
    pytest.param("x/../../y", id="nested-escape"),
    pytest.param("", id="empty"),
    pytest.param("a" * 200, id="200-chars"),
    pytest.param("a" * 129, id="129-chars"),
    pytest.param("a\x00b", id="nul"),
    pytest.param("agent\n", id="trailing-newline"),
    pytest.param(" agent", id="leading-space"),
    pytest.param("~root", id="tilde"),
    pytest.param("-rf", id="leading-dash"),
]

BAD_MEMORY_IDS = [
    pytest.param("../../etc/passwd", id="traversal"),
    pytest.param("mem_0123456789ab/../x", id="traversal-after-id"),
    pytest.param("mem_0123456789a", id="too-short"),
    pytest.param("mem_0123456789abc", id="too-long"),
    pytest.param("mem_0123456789AB", id="upper-hex"),
    pytest.param("mem_0123456789xz", id="not-hex"),
    pytest.param("item_0123456789ab", id="wrong-prefix"),
    pytest.param("", id="empty"),
    pytest.param("mem_0123456789a\x00", id="nul"),
    pytest.param("/abs/mem_0123456789ab", id="absolute"),
]


def _tree(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*")}


@pytest.mark.parametrize("agent_id", BAD_AGENT_IDS)
def test_malformed_agent_id_is_refused_and_nothing_is_created(tmp_path: Path, agent_id: str) -> None:
    base = tmp_path / "outer" / "memory"
    base.mkdir(parents=True)
    before = _tree(tmp_path)

    with pytest.raises(InvalidIdError) as info:
        AgentMemory(agent_id, base, config=NO_INDEX)

    assert info.value.value == agent_id
    assert isinstance(info.value, ValueError)
    assert _tree(tmp_path) == before


@pytest.mark.parametrize("agent_id", ["a", "A-1_b.c", "agent.v2", "9lives", "a" * 128])
def test_well_formed_agent_ids_live_inside_the_memory_dir(tmp_path: Path, agent_id: str) -> None:
    memory = AgentMemory(agent_id, tmp_path, config=NO_INDEX)
    memory.store("hello")

    assert memory.path == tmp_path.resolve() / "agents" / agent_id
    assert (memory.path / "items.jsonl").is_file()
    assert memory.path.resolve().is_relative_to(tmp_path.resolve())


def test_non_string_agent_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidIdError):
        validate_agent_id(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidIdError):
        AgentMemory(Path("x"), tmp_path, config=NO_INDEX)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("memory_id", BAD_MEMORY_IDS)
def test_malformed_memory_id_is_refused_by_every_entry_point(tmp_path: Path, memory_id: str) -> None:
    memory = AgentMemory("agent", tmp_path, config=NO_INDEX)
    good = memory.store("an item to relate to")
    before = _tree(tmp_path)

    with pytest.raises(InvalidIdError):
        memory.get(memory_id)
    with pytest.raises(InvalidIdError):
        memory.retrieve(memory_id)
    with pytest.raises(InvalidIdError):
        memory.store("x", related_to=[good, memory_id])
    with pytest.raises(InvalidIdError):
        validate_memory_id(memory_id)
    assert memory_id not in memory

    assert _tree(tmp_path) == before
    assert [record.id for record in memory.records()] == [good]


def test_well_formed_but_unknown_memory_id_is_not_found(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path, config=NO_INDEX)
    memory.store("something")
    unknown = "mem_000000000000"

    with pytest.raises(ItemNotFoundError) as info:
        memory.get(unknown)
    assert info.value.item_id == unknown
    assert isinstance(info.value, KeyError)
    with pytest.raises(ItemNotFoundError):
        memory.store("linked", related_to=[unknown])
    assert len(memory) == 1  # the refused store left nothing behind


def test_quoted_memory_id_from_a_model_is_accepted(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path, config=NO_INDEX)
    item_id = memory.store("quoted")

    assert memory.get(f" '{item_id}' ").content == "quoted"
    assert memory.get(f"`{item_id}`\n").id == item_id


def test_new_memory_ids_are_valid_and_distinct() -> None:
    ids = {new_memory_id() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(validate_memory_id(item_id) == item_id for item_id in ids)


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("id", "../../../escaped", InvalidIdError),
        ("id", "mem_0123456789ab/../../x", InvalidIdError),
        ("content_sha256", "../../../../tmp/evil", StoreError),
    ],
)
def test_restore_refuses_a_snapshot_that_names_paths(
    tmp_path: Path, field: str, value: str, error: type[Exception]
) -> None:
    source = AgentMemory("source", tmp_path / "a", config=NO_INDEX)
    source.store("payload")
    snap_file = source.snapshot().save(tmp_path / "snap.json")
    data = json.loads(snap_file.read_text(encoding="utf-8"))
    if field == "id":
        data["items"][0]["id"] = value
    else:
        data["items"][0]["metadata"]["content_sha256"] = value
    snap_file.write_text(json.dumps(data), encoding="utf-8")
    target = AgentMemory("target", tmp_path / "b", config=NO_INDEX)
    target.store("kept")
    before = _tree(tmp_path)

    with pytest.raises(error):
        target.restore(MemorySnapshot.load(snap_file))

    assert _tree(tmp_path) == before
    assert [target.get(r.id).content for r in target.records()] == ["kept"]


def test_agent_memory_dir_env_var_is_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_dir = tmp_path / "from-env"
    monkeypatch.setenv("AGENT_MEMORY_DIR", str(env_dir))
    monkeypatch.chdir(tmp_path)

    memory = AgentMemory("envagent", config=NO_INDEX)
    item_id = memory.store("where am I")

    assert memory.memory_dir == env_dir.resolve()
    assert (env_dir / "agents" / "envagent" / "items.jsonl").is_file()
    assert not (tmp_path / "memory").exists()
    assert AgentMemory("envagent", config=NO_INDEX).get(item_id).content == "where am I"


def test_explicit_memory_dir_beats_the_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DIR", str(tmp_path / "from-env"))

    memory = AgentMemory("agent", tmp_path / "explicit", config=NO_INDEX)
    memory.store("x")

    assert memory.memory_dir == (tmp_path / "explicit").resolve()
    assert not (tmp_path / "from-env").exists()


def test_without_env_var_the_default_is_memory_in_the_working_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENT_MEMORY_DIR", raising=False)
    monkeypatch.chdir(tmp_path)

    memory = AgentMemory("agent", config=NO_INDEX)
    memory.store("x")

    assert memory.memory_dir == (tmp_path / "memory").resolve()
    assert (tmp_path / "memory" / "agents" / "agent" / "items.jsonl").is_file()


def test_relative_env_var_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DIR", "rel/mem")
    monkeypatch.chdir(tmp_path)

    memory = AgentMemory("agent", config=NO_INDEX)
    assert memory.memory_dir == (tmp_path / "rel" / "mem").resolve()
    # Changing directory later does not move an existing memory.
    monkeypatch.chdir(os.sep)
    memory.store("still here")
    assert (tmp_path / "rel" / "mem" / "agents" / "agent" / "items.jsonl").is_file()
