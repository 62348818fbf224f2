"""The background threads' lower CPU priority (``agent_memory.background``)."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from agent_memory.background import BACKGROUND_NICE, background_priority

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")


def _in_thread(work: object) -> dict[str, object]:
    seen: dict[str, object] = {}

    def run() -> None:
        me = threading.get_native_id()
        seen["before"] = os.getpriority(os.PRIO_PROCESS, me)
        seen["lowered"] = work()  # type: ignore[operator]
        seen["after"] = os.getpriority(os.PRIO_PROCESS, me)
        child: dict[str, int] = {}
        grandchild = threading.Thread(target=lambda: child.update(n=os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
        grandchild.start()
        grandchild.join()
        seen["child"] = child["n"]

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return seen


def test_a_background_thread_lowers_its_own_priority_only() -> None:
    main_before = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen = _in_thread(background_priority)
    assert seen["lowered"] is True
    assert seen["after"] == min(19, int(seen["before"]) + BACKGROUND_NICE)  # type: ignore[call-overload]
    assert seen["child"] == seen["after"]  # a pool it starts (the ONNX runtime's) inherits it
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == main_before  # not the process's


def test_the_embedding_pool_runs_at_background_priority() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from agent_memory.embeddings import onnx_model

    runner = object.__new__(onnx_model.OnnxSentenceModel)  # only its pool: no model is loaded
    runner.workers = 2
    runner._pool = None
    runner._pool_lock = threading.Lock()
    pool: ThreadPoolExecutor = runner._executor()
    try:
        main = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        niceness = pool.submit(lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id())).result()
        assert niceness == min(19, main + BACKGROUND_NICE)
    finally:
        pool.shutdown()


def test_the_indexing_thread_runs_at_background_priority(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    import agent_memory.index.upkeep as upkeep
    from agent_memory import AgentMemory

    lowered: list[str] = []
    real = upkeep.background_priority

    def recorded() -> bool:
        lowered.append(threading.current_thread().name)
        return real()

    monkeypatch.setattr(upkeep, "background_priority", recorded)
    memory = AgentMemory("agent", tmp_path)  # type: ignore[arg-type]
    memory.store("a note about the priority of background threads " * 20)
    assert memory._upkeep._wait_pending(None, timeout_s=300)  # indexed by the indexing thread
    memory.close()
    assert "agent-memory-index-agent" in lowered and threading.current_thread().name not in lowered


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
