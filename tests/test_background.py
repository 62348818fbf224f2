"""Where background work pauses for the agent (``agent_memory.background``)."""

from __future__ import annotations

import threading

import pytest


def test_checkpoints_call_the_registered_step_back_on_that_thread_only() -> None:
    from agent_memory.background import checkpoint, checkpoints

    calls: list[str] = []
    checkpoint()  # nothing registered: nothing happens
    with checkpoints(lambda: calls.append(threading.current_thread().name)):
        checkpoint()
        other = threading.Thread(target=checkpoint, name="elsewhere")
        other.start()
        other.join()
        with checkpoints(lambda: calls.append("inner")):
            checkpoint()
        checkpoint()
    checkpoint()
    assert calls == [threading.current_thread().name, "inner", threading.current_thread().name]


def test_the_indexing_thread_passes_checkpoints_inside_its_long_loops(
        tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    # while the agent's step runs, the indexing thread waits at these, not only between its stages
    import agent_memory.index.chunking as chunking
    import agent_memory.transforms as transforms
    from agent_memory import AgentMemory
    from agent_memory.background import CHECKPOINT_ROWS

    passed: list[tuple[str, str]] = []
    for module in (transforms, chunking):
        real = module.checkpoint

        def recorded(module: object = module, real: object = real) -> None:
            passed.append((module.__name__, threading.current_thread().name))  # type: ignore[attr-defined]
            real()  # type: ignore[operator]

        monkeypatch.setattr(module, "checkpoint", recorded)
    rows = [{"id": n, "name": f"row {n}", "note": "a row of the table"} for n in range(4 * CHECKPOINT_ROWS)]
    memory = AgentMemory("agent", tmp_path)  # type: ignore[arg-type]
    memory.store(rows, source="sql")  # its rows become lines
    memory.store(" ".join(f"word{n} of a long text" for n in range(40 * CHECKPOINT_ROWS)))  # many chunks
    # wait for the indexing thread (flush_index would index what it has not taken yet in this thread)
    assert memory._upkeep._wait_pending(None, timeout_s=300)
    memory.close()
    on_worker = {name for name, thread in passed if thread == "agent-memory-index-agent"}
    assert on_worker == {"agent_memory.transforms", "agent_memory.index.chunking"}, passed
