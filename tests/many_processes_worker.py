"""One process of tests/test_many_processes.py: opens a memory by its backend (a directory or a URL)
and works on it, printing a line for every operation the moment it returned (acknowledged):

- ``writer STORE AGENT SEED OPS CONFIG QUERY``: stores notes, forgets some of its own, pins some
  (through a fresh MemoryManager under the kernel lock, as an MCP server's pin tool does), and
  with QUERY ``query`` queries by text once at the end. Lines: ``S <id>``, ``X <id>`` (a forget
  begins), ``F <id>`` (it returned), ``P <id>``, ``Q <hits>``.
- ``talker STORE AGENT SEED OPS CONFIG QUERY``: one conversation turn per operation under the
  kernel lock (a user message and the answer), compacting every third turn. Lines: ``T <turn id>``.

CONFIG is the MemoryConfig as JSON; QUERY is ``query`` or ``no``. Run by the test with the project's Python; not a test itself.
"""

from __future__ import annotations

import json
import random
import sys

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.kernel.budget import ModelLimits
from agent_memory.kernel.lock import kernel_lock
from agent_memory.kernel.manager import MemoryManager

LIMITS = ModelLimits(max_context_tokens=200_000, max_output_tokens=1_000, safety_margin_tokens=0)


def say(line: str) -> None:
    print(line, flush=True)


def writer(memory: AgentMemory, rng: random.Random, ops: int, query: bool) -> None:
    mine: list[str] = []
    pinned: set[str] = set()
    for n in range(ops):
        item_id = memory.store(f"note {n} of {memory.agent_id}: the {rng.choice(['river', 'violin', 'bread'])} "
                               f"{rng.randrange(10**6)}", tags=["stress"])
        say(f"S {item_id}")
        mine.append(item_id)
        roll = rng.random()
        if roll < 0.2 and len(mine) > 1:
            victim = rng.choice([i for i in mine[:-1] if i not in pinned] or [mine[0]])
            if victim not in pinned:
                say(f"X {victim}")  # about to forget: a process killed now may or may not have forgotten it
                memory.forget(victim)
                mine.remove(victim)
                say(f"F {victim}")
        elif roll < 0.35:
            chosen = rng.choice(mine)
            with kernel_lock(memory):
                MemoryManager(memory, limits=LIMITS).pin_item(chosen)
            pinned.add(chosen)
            say(f"P {chosen}")
    if query:
        say(f"Q {len(memory.query(text='a note about the river', limit=3))}")


def talker(memory: AgentMemory, rng: random.Random, ops: int, query: bool) -> None:
    for n in range(ops):
        with kernel_lock(memory):
            manager = MemoryManager(memory, system_prompt="You keep notes.", limits=LIMITS, tail_turns=2)
            turn = manager.ingest_user_message(f"Remember number {rng.randrange(10**6)} (message {n}).")
            manager.ingest_assistant_response("Noted.")
            if n % 3 == 2:
                manager.compact()
            manager.save()
        say(f"T {turn}")


def main() -> None:
    role, backend, agent, seed, ops, config, query = sys.argv[1:8]
    memory = AgentMemory(agent, backend=backend, config=MemoryConfig.model_validate(json.loads(config)))
    rng = random.Random(int(seed))
    {"writer": writer, "talker": talker}[role](memory, rng, int(ops), query == "query")
    memory.close()


if __name__ == "__main__":
    main()
