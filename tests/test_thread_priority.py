"""The background threads' lower CPU priority (``agent_memory.thread_priority``)."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from agent_memory.thread_priority import BACKGROUND_NICE, background_priority

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
    memory.flush_index()
    memory.close()
    assert "agent-memory-index-agent" in lowered and threading.current_thread().name not in lowered
