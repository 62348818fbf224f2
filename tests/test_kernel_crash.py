"""kill -9 in the middle of compactions, many times: no turn is lost, none is doubled, no
summary is duplicated, and every restart continues (issue #7 "Done when").

A child process runs a MemoryManager on one directory: it ingests turns and compacts every few
turns, printing each turn id once its traces are written. The test kills it with SIGKILL once it has
acknowledged a seeded number of turns (wherever it is then in the next turn or compaction), starts
the next child on the same directory, and checks the files after every kill and at the end.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kills import kill_after

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.ids import turn_memory_id
from agent_memory.models.traces import turn_number
from memory_helpers import file_traces

KILLS = 12
TURNS_PER_CHILD = 100_000
"""More than a child does before it is killed: every child is killed."""
TURNS_BEFORE_KILL = (4, 10)
"""A child is killed once it has acknowledged this many turns (seeded, inclusive): at least 48 in all."""

CHILD = r"""
import sys
from agent_memory import AgentMemory, MemoryConfig
from agent_memory.kernel.budget import ModelLimits
from agent_memory.kernel.manager import MemoryManager
from agent_memory.models.messages import Message, ToolCall

memory = AgentMemory("crash", sys.argv[1], config=MemoryConfig(index_on_store=False))
manager = MemoryManager(memory, system_prompt="S", limits=ModelLimits(max_context_tokens=4_000, max_output_tokens=500))
for i in range(int(sys.argv[2])):
    turn = manager.ingest_user_message(f"user message {i} " + "word " * 30)
    manager.ingest_assistant_response(Message(role="assistant", content="ok", tool_calls=(ToolCall(id=f"{turn}-c", name="t"),)))
    manager.ingest_tool_result(f"{turn}-c", "result " * 40)
    manager.ingest_assistant_response(f"done {i}")
    print(turn, flush=True)
    if i % 3 == 2:
        manager.compact()
"""


def check(agent_dir: Path, acknowledged: set[str]) -> None:
    store = file_traces(agent_dir)
    active = store.list_raw()
    archived = store.read_archive()
    active_ids = [item.id for item in active]
    assert len(active_ids) == len(set(active_ids)), "a trace doubled in the active file"
    every = {item.id: item for item in archived} | {item.id: item for item in active}
    turns = {item.turn_id for item in every.values()}
    assert acknowledged <= turns, f"lost turns: {sorted(acknowledged - turns)}"
    numbers = sorted(turn_number(t) for t in turns)
    assert numbers == list(range(1, len(numbers) + 1)), "turn ids skipped or reused"
    for turn in acknowledged:  # a finished turn is whole: 5 traces, in one place or the other
        lines = [item for item in every.values() if item.turn_id == turn]
        assert sorted(item.seq for item in lines) == [1, 2, 3, 4, 5], (turn, lines)
    episodes = store.list_episodic()
    windows = [episode.window_id for episode in episodes]
    assert len(windows) == len(set(windows)), "a summary was stored twice for one window"
    summarized = [t for episode in episodes for t in episode.turn_ids]
    assert len(summarized) == len(set(summarized)), "a turn is in two summaries"


def test_kill_9_during_compactions_loses_and_doubles_nothing(tmp_path: Path) -> None:
    rng = random.Random(7)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    agent_dir = tmp_path / "agents" / "crash"
    acknowledged: set[str] = set()
    for _ in range(KILLS):
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), str(TURNS_PER_CHILD)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # killed once a seeded number of its turns are acknowledged, wherever it is then (it compacts every third)
        read = kill_after(child, rng.randint(*TURNS_BEFORE_KILL), lambda line: line.startswith("turn_"))
        out, err = child.communicate(timeout=60)
        assert child.returncode == -signal.SIGKILL, err[-2000:]
        acknowledged.update(line.strip() for line in [*read, *out.splitlines()] if line.startswith("turn_"))
        check(agent_dir, acknowledged)
    # a last child runs to the end on what the kills left
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), "6"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    acknowledged.update(line.strip() for line in done.stdout.splitlines() if line.startswith("turn_"))
    check(agent_dir, acknowledged)
    assert len(acknowledged) >= KILLS * TURNS_BEFORE_KILL[0] + 6


CRASH_CHILD = r"""
import os, signal, sys
from agent_memory import AgentMemory, MemoryConfig
from agent_memory.kernel import compactor as compactor_module
from agent_memory.kernel.budget import ModelLimits
from agent_memory.kernel.manager import MemoryManager
from agent_memory.models.messages import Message, ToolCall
from agent_memory.storage.common import LogTraceStore

point = sys.argv[3]


def die():
    print("killing at", point, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def after(cls, name, when=lambda *a, **k: True):
    original = getattr(cls, name)
    def wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        if when(*args, **kwargs):
            die()
        return result
    setattr(cls, name, wrapper)


def before(cls, name, when=lambda *a, **k: True):
    original = getattr(cls, name)
    def wrapper(*args, **kwargs):
        if when(*args, **kwargs):
            die()
        return original(*args, **kwargs)
    setattr(cls, name, wrapper)


if point == "episode-written":
    after(LogTraceStore, "add_episodic")
elif point == "facts-written":
    after(LogTraceStore, "add_semantic")
elif point == "turns-indexed":
    after(AgentMemory, "store_many")
elif point == "archive-synced":  # archive lines appended and synced, active file not rewritten yet
    before(LogTraceStore, "_rewrite", when=lambda self, kind, records: kind == "raw")
elif point == "active-rewritten":
    after(LogTraceStore, "_rewrite", when=lambda self, kind, records: kind == "raw")

memory = AgentMemory("crash", sys.argv[1], config=MemoryConfig(index_on_store=False))
manager = MemoryManager(memory, system_prompt="S", limits=ModelLimits(max_context_tokens=4_000, max_output_tokens=500))
for i in range(int(sys.argv[2])):
    turn = manager.ingest_user_message(f"user message {i} " + "word " * 30)
    manager.ingest_assistant_response(Message(role="assistant", content="ok", tool_calls=(ToolCall(id=f"{turn}-c", name="t"),)))
    manager.ingest_tool_result(f"{turn}-c", "result " * 40)
    manager.ingest_assistant_response(f"done {i}")
    print(turn, flush=True)
    if i % 3 == 2:
        manager.compact()
"""

CRASH_POINTS = ("episode-written", "facts-written", "turns-indexed", "archive-synced", "active-rewritten")


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_kill_9_at_each_step_of_a_compaction(tmp_path: Path, point: str) -> None:
    """Killed at a chosen step of the first compaction (not at a random moment): the restarted
    agent finishes that compaction without a second summary, a lost turn or a doubled item."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    agent_dir = tmp_path / "agents" / "crash"
    crashed = subprocess.run([sys.executable, "-c", CRASH_CHILD, str(tmp_path), "9", point], env=env,
                             capture_output=True, text=True, timeout=300, check=False)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert f"killing at {point}" in crashed.stdout
    acknowledged = {line.strip() for line in crashed.stdout.splitlines() if line.startswith("turn_")}
    assert len(acknowledged) == 6  # killed inside the first compaction with work: after turn 6, tail of 4
    check(agent_dir, acknowledged)
    before = file_traces(agent_dir)
    episodes_before = before.list_episodic()
    assert len(episodes_before) == 1  # every crash point comes after the summary was written

    resumed = subprocess.run([sys.executable, "-c", CRASH_CHILD, str(tmp_path), "6", "none"], env=env,
                             capture_output=True, text=True, timeout=300, check=False)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    acknowledged |= {line.strip() for line in resumed.stdout.splitlines() if line.startswith("turn_")}
    assert len(acknowledged) == 12
    check(agent_dir, acknowledged)
    store = file_traces(agent_dir)
    episodes = store.list_episodic()
    # the interrupted compaction's summary, if it was written, is the one kept for those turns
    for episode in episodes_before:
        assert [e.id for e in episodes if set(e.turn_ids) & set(episode.turn_ids)] == [episode.id]
    summarized = {turn for episode in episodes for turn in episode.turn_ids}
    archived = {item.turn_id for item in store.read_archive()}
    assert {"turn_0001", "turn_0002"} <= archived  # the interrupted compaction was completed
    assert summarized <= archived
    assert not archived & {item.turn_id for item in store.list_raw()}  # no turn both archived and active
    with AgentMemory("crash", tmp_path, config=MemoryConfig(index_on_store=False)) as memory:
        ids = [record.id for record in memory.records()]
        assert len(ids) == len(set(ids)), "an item stored twice"
        for turn in sorted(archived):  # each compacted turn is retrievable verbatim
            asked = next(item.content for item in store.find_turn(turn) if item.trace_type == "user")
            assert f"User: {asked.split(' word')[0]} word" in memory.get(turn_memory_id(turn, agent_id="crash")).content
