"""Many processes on one memory, as many machines would be (issue 16): each process opens the
backend by its directory or URL alone, with its own connections.

- 8 writer processes on 2 agents store, forget, pin and query at once while 2 processes hold
  conversations on one of the agents (a MemoryManager each, compacting): every acknowledged item,
  forget, pin and turn is there exactly once afterwards, on both backends.
- 20 trials of killing one process (``kill -9``) at a random moment while others work: nothing
  it acknowledged is lost, nothing it did not finish is half there, and no lock stays held.

Workers: tests/many_processes_worker.py (real AgentMemory, real MemoryManager, kernel lock as the
MCP server takes it). The file backend runs with the Chroma server, the documented set-up for
processes that index at once; Postgres with pgserver's server.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.kernel.manager import MemoryManager
from agent_memory.storage import open_backend
from agent_memory.testing import ChromaServer, PostgresServer

WORKER = str(Path(__file__).with_name("many_processes_worker.py"))
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
       "OMP_NUM_THREADS": "1"}
TIMEOUT_S = 600.0
LOCK_NAMES = ("items", "index", "kernel", "step", "traces.raw", "traces.archive", "traces.episodic", "traces.semantic")


@dataclass
class Acknowledged:
    """What the workers said they did (each line printed once the operation returned)."""

    stored: dict[str, list[str]] = field(default_factory=dict)
    forgetting: dict[str, list[str]] = field(default_factory=dict)
    """Forgets begun; those not acknowledged were cut short by a kill: either outcome is right."""
    forgotten: dict[str, list[str]] = field(default_factory=dict)
    pinned: dict[str, list[str]] = field(default_factory=dict)
    turns: dict[str, list[str]] = field(default_factory=dict)

    def take(self, agent: str, output: str) -> None:
        for line in output.splitlines():
            kind, _, value = line.partition(" ")
            target = {"S": self.stored, "X": self.forgetting, "F": self.forgotten, "P": self.pinned,
                      "T": self.turns}.get(kind)
            if target is not None and value:
                target.setdefault(agent, []).append(value)


def _start(role: str, backend: str, agent: str, seed: int, ops: int, config: MemoryConfig, query: bool) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, WORKER, role, backend, agent, str(seed), str(ops), config.model_dump_json(),
         "query" if query else "no"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)


def _check(backend: str, config: MemoryConfig, done: Acknowledged) -> None:
    """Every acknowledged item is present unless forgotten, once; pins and turns are there once."""
    for agent in sorted(set(done.stored) | set(done.turns)):
        memory = AgentMemory(agent, backend=backend, config=config)
        ids = [record.id for record in memory.records()]
        assert len(ids) == len(set(ids)), f"{agent}: an item twice"
        stored, forgotten = set(done.stored.get(agent, [])), set(done.forgotten.get(agent, []))
        in_flight = set(done.forgetting.get(agent, [])) - forgotten
        assert stored - forgotten - in_flight <= set(ids), f"{agent}: acknowledged items lost"
        assert not (forgotten & set(ids)), f"{agent}: forgotten items back"
        manager = MemoryManager(memory)
        pins = manager.pinned_items
        assert len(pins) == len(set(pins)) and set(done.pinned.get(agent, [])) <= set(pins), f"{agent}: pins lost"
        users = Counter(t.turn_id for t in [*manager.traces.list_raw(), *manager.traces.read_archive()]
                        if t.trace_type == "user")
        assert all(users[turn] == 1 for turn in done.turns.get(agent, [])), f"{agent}: a turn lost or twice"
        locks = memory.backend.locks(agent)
        assert all(locks.probe(name) is None for name in LOCK_NAMES), f"{agent}: a lock still held"
        with locks.hold("kernel", timeout_s=5), locks.hold("index", timeout_s=5), locks.hold("step", timeout_s=5):
            pass
        memory.close()


@pytest.fixture(params=["files", "postgres"])
def backend_and_config(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, MemoryConfig]:
    if request.param == "files":
        server: ChromaServer = request.getfixturevalue("chroma_server")
        return str(tmp_path / "memory"), MemoryConfig(index_on_store=False, chroma_mode="server",
                                                      chroma_port=server.port)
    postgres: PostgresServer = request.getfixturevalue("postgres_server")
    return postgres.new_database(), MemoryConfig(index_on_store=False)


def test_eight_writers_on_two_agents_and_two_conversations_lose_nothing(
        backend_and_config: tuple[str, MemoryConfig]) -> None:
    backend, config = backend_and_config
    agents = [f"stress-{abs(hash(backend)) % 10**6}-{n}" for n in range(2)]  # a shared Chroma server: new names
    workers = [(agents[n % 2], _start("writer", backend, agents[n % 2], n, 12, config, query=n < 2)) for n in range(8)]
    workers += [(agents[0], _start("talker", backend, agents[0], 100 + n, 6, config, query=False)) for n in range(2)]
    done = Acknowledged()
    for agent, process in workers:
        out, err = process.communicate(timeout=TIMEOUT_S)
        assert process.returncode == 0, err
        done.take(agent, out)
    assert sum(len(v) for v in done.stored.values()) == 96 and len(done.turns[agents[0]]) == 12
    assert done.forgotten and done.pinned
    _check(backend, config, done)
    memory = AgentMemory(agents[0], backend=backend, config=config)
    assert memory.query(text="a note about the violin", limit=3)  # every item indexed by now
    assert len(MemoryManager(memory).traces.read_archive()) > 0  # the conversations compacted


def test_a_process_killed_at_random_loses_nothing_it_acknowledged(backend_and_config: tuple[str, MemoryConfig]) -> None:
    backend, config = backend_and_config
    rng = random.Random(16)
    done = Acknowledged()
    agent = f"kill-{abs(hash(backend)) % 10**6}"
    for trial in range(20):
        workers = [_start("writer", backend, agent, 1000 * trial + n, 40, config, query=False) for n in range(2)]
        workers.append(_start("talker", backend, agent, 1000 * trial + 9, 15, config, query=False))
        victim = rng.randrange(len(workers))
        time.sleep(rng.uniform(0.3, 1.5))
        os.kill(workers[victim].pid, signal.SIGKILL)
        for n, process in enumerate(workers):
            out, err = process.communicate(timeout=TIMEOUT_S)
            assert process.returncode == (-signal.SIGKILL if n == victim else 0) or n == victim, err
            done.take(agent, out)  # the victim's lines too: what it acknowledged before it died
    assert len(done.stored[agent]) > 40 and done.turns.get(agent)
    _check(backend, config, done)
    assert open_backend(backend).locks(agent).probe("kernel") is None
