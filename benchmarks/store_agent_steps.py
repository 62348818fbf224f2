"""What one agent step with a large result waits for and writes (issue #38): a ``MemoryAgent``
against the loopback ``FakeLLMServer`` fetches large pages, or calls a query tool that answers
large JSON rows, one per step; each step's wall time, the tool's and the LLM call's within it, and
what is left, the step's wait on memory. Measured by ``bench_store.py`` (its module docstring says
what and how), in the library on ``sys.path``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from revisions import forget_extractions

def _written_bytes() -> int | None:
    """``wchar`` of this process (bytes handed to ``write`` calls), or ``None`` off Linux."""
    try:
        for line in Path("/proc/self/io").read_text(encoding="ascii").splitlines():
            if line.startswith("wchar:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _write_and_fsync_ms(content: bytes, directory: Path) -> float:
    """What a plain file offloader pays for a result: write it to a new file and fsync it, in ms."""
    started = time.perf_counter()
    with open(directory / "result.bin", "wb") as handle:
        handle.write(content)
        handle.flush()
        os.fsync(handle.fileno())
    spent = time.perf_counter() - started
    (directory / "result.bin").unlink()
    return round(1000 * spent, 1)


def _timed_model(server: Any, spent: list[float]) -> Any:
    """An ``OpenAIChatModel`` on the loopback ``server`` that appends the wall time of each of its
    LLM calls to ``spent``, in seconds: the SDK building the request, the loopback round trip and
    the answer parsed, which an agent without memory pays as well (and more, its prompt holding the
    whole result). A step's time without it and without the tool's is what the step waits on memory."""
    from agent_memory import OpenAIChatModel

    model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key="x", max_retries=0)
    call = model.generate

    def generate(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - began)

    model.generate = generate
    return model


def _agent_run(root: Path, chosen: list[Path], config: Any,
               tmp: str) -> tuple[list[tuple[int | None, float]], dict[str, int], list[float]]:
    """A MemoryAgent fetches ``chosen`` pages, one per step: the (bytes written, time) at each LLM
    call, the bytes of the journal's payloads by event kind, and each LLM call's own wall time in
    seconds (:func:`_timed_model`)."""
    from agent_memory import MemoryAgent, ModelLimits, tool
    from agent_memory.testing import FakeLLMServer, ScriptedReply, ScriptedToolCall

    @tool
    def fetch_page(page: str) -> str:
        """Fetch one web page by name.

        Args:
            page: the page's name.
        """
        return (root / page / "source.html").read_text(encoding="utf-8", errors="replace")

    marks: list[tuple[int | None, float]] = []

    class StepMarks:
        def on_notice(self, notice: Any) -> None:
            if getattr(notice, "kind", None) == "llm_called":
                marks.append((_written_bytes(), time.perf_counter()))

    with FakeLLMServer() as server:
        calls = [ScriptedToolCall("fetch_page", json.dumps({"page": p.parent.name})) for p in chosen]
        server.enqueue(*[ScriptedReply(tool_calls=(call,)) for call in calls], "Read them all.")
        model_s: list[float] = []
        model = _timed_model(server, model_s)
        limits = ModelLimits(max_context_tokens=200_000, max_output_tokens=8_192)
        with MemoryAgent(model, tools=[fetch_page], memory_dir=tmp, agent_id="steps", observers=[StepMarks()],
                         memory_config=config, limits=limits) as agent:
            run = agent.run("Read these pages.")
    if run.stopped != "answer" or len(marks) != len(chosen) + 1:
        raise SystemExit(f"the scripted agent run went astray: {run.stopped}, {len(marks)} LLM calls")
    journal = Path(tmp) / "agents" / "steps" / "events.sqlite3"
    db = sqlite3.connect(f"file:{journal}?mode=ro", uri=True)
    try:
        payloads = dict(db.execute("SELECT kind, sum(length(CAST(payload AS BLOB))) FROM events GROUP BY kind"))
    finally:
        db.close()
    return marks, {str(kind): int(size or 0) for kind, size in payloads.items()}, model_s


def agent_steps(data: Path, count: int) -> dict[str, Any]:
    """A MemoryAgent fetches the ``count`` largest pages, one per step: what each step waits for
    (default config) and writes (``index_on_store=False``)."""
    from agent_memory import MemoryConfig

    root = data / "webpages" / "readability"
    chosen = sorted(root.glob("*/source.html"), key=lambda p: (-p.stat().st_size, p))[:count]
    forget_extractions()  # the backends' phase stored these pages: no step may read their extraction from it
    with tempfile.TemporaryDirectory(prefix="bench-store-agent-") as tmp:
        baseline = [_write_and_fsync_ms(p.read_bytes(), Path(tmp)) for p in chosen]
    with tempfile.TemporaryDirectory(prefix="bench-store-agent-") as tmp:
        timed, _, model_s = _agent_run(root, chosen, MemoryConfig(), tmp)
    forget_extractions()
    with tempfile.TemporaryDirectory(prefix="bench-store-agent-") as tmp:
        marks, payloads, _ = _agent_run(root, chosen, MemoryConfig(index_on_store=False), tmp)
    sizes = [p.stat().st_size for p in chosen]
    written = [None if a is None or b is None else b - a for (a, _), (b, _) in zip(marks, marks[1:])]
    step_ms = [round(1000 * (b - a), 1) for (_, a), (_, b) in zip(timed, timed[1:])]
    model_ms = [round(1000 * t, 1) for t in model_s[1:]]  # a step ends with the next LLM call
    return {
        "pages": [p.parent.name for p in chosen],
        "page_bytes": sizes,
        "step_ms": step_ms,
        "model_call_ms": model_ms,
        "memory_ms": [round(a - b, 1) for a, b in zip(step_ms, model_ms)],
        "write_and_fsync_ms": baseline,
        "step_over_write_ms": [round(s - w, 1) for s, w in zip(step_ms, baseline)],
        "written_config": "MemoryConfig(index_on_store=False)",
        "written_bytes_per_step": written,
        "written_per_result_byte": [round(w / s, 2) if w is not None else None for w, s in zip(written, sizes)],
        "journal_tool_result_bytes": payloads.get("tool_result", 0),
        "journal_bytes_by_kind": payloads,
    }


JSON_STEPS = 5
"""Steps of each JSON agent-step measurement: each calls the query tool once."""

JSON_STEP_SIZES = {"1 MB": 1_000_000, "2.43 MB": None}
"""The JSON results the agent steps are measured with: the first rows of the query result given
(bench_store's every-playlist's-tracks query) whose JSON is at most this many bytes (issue #38's bound: "an
agent step with a 1 MB result"), and the whole 8,715 rows (``None``)."""


def json_agent_steps(columns: list[str], rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    """For each of :data:`JSON_STEP_SIZES`, a MemoryAgent calls a query tool that answers those
    of ``rows`` (a fresh list each call), once per step, :data:`JSON_STEPS` times (default
    config): what each step waits for (``step_ms``, from one LLM request to the next), of which
    ``tool_ms`` is the tool's own (building the rows, no memory), and writing the result's JSON to
    a file with fsync, the plain offloader's cost."""
    out: dict[str, Any] = {}
    for label, most in JSON_STEP_SIZES.items():
        chosen = rows
        if most is not None:
            sizes = [len(json.dumps(dict(zip(columns, row)), ensure_ascii=False).encode("utf-8")) + 1 for row in rows]
            total, count = 1, 0
            while count < len(rows) and total + sizes[count] <= most:
                total, count = total + sizes[count], count + 1
            chosen = rows[:count]
        out[label] = _json_steps(columns, chosen)
    return out


def _json_steps(columns: list[str], rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    """:func:`json_agent_steps` for one result: each step's wall time, the tool's and the LLM
    call's (:func:`_timed_model`) within it, and what is left, the step's wait on memory
    (``memory_ms``)."""
    from agent_memory import MemoryAgent, ModelLimits, tool
    from agent_memory.testing import FakeLLMServer, ScriptedReply, ScriptedToolCall

    tool_s: list[float] = []
    tool_cpu_s: list[float] = []

    @tool
    def run_query(sql: str) -> list[dict[str, Any]]:
        """Run a read-only SQL query on the music store's database.

        Args:
            sql: the query.
        """
        began, began_cpu = time.perf_counter(), time.thread_time()
        answer = [dict(zip(columns, row)) for row in rows]
        tool_s.append(time.perf_counter() - began)
        tool_cpu_s.append(time.thread_time() - began_cpu)
        return answer

    result = json.dumps([dict(zip(columns, row)) for row in rows], ensure_ascii=False).encode("utf-8")
    marks: list[float] = []
    cpu_marks: list[tuple[int, float]] = []  # the thread the notice came on, and its CPU time then

    class StepMarks:
        def on_notice(self, notice: Any) -> None:
            if getattr(notice, "kind", None) == "llm_called":
                marks.append(time.perf_counter())
                cpu_marks.append((threading.get_ident(), time.thread_time()))

    with tempfile.TemporaryDirectory(prefix="bench-store-agent-") as tmp:
        baseline = _write_and_fsync_ms(result, Path(tmp))
        with FakeLLMServer() as server:
            calls = [ScriptedToolCall("run_query", json.dumps({"sql": f"SELECT * FROM playlist_tracks -- {n}"}))
                     for n in range(JSON_STEPS)]
            server.enqueue(*[ScriptedReply(tool_calls=(call,)) for call in calls], "Done.")
            model_s: list[float] = []
            model = _timed_model(server, model_s)
            limits = ModelLimits(max_context_tokens=200_000, max_output_tokens=8_192)
            with MemoryAgent(model, tools=[run_query], memory_dir=tmp, agent_id="rows", observers=[StepMarks()],
                             limits=limits) as agent:
                run = agent.run("Query the playlists.")
    if run.stopped != "answer" or len(marks) != JSON_STEPS + 1 or len(tool_s) != JSON_STEPS:
        raise SystemExit(f"the scripted agent run went astray: {run.stopped}, {len(marks)} LLM calls")
    step_ms = [round(1000 * (b - a), 1) for a, b in zip(marks, marks[1:])]
    tool_ms = [round(1000 * t, 1) for t in tool_s]
    one_thread = len({ident for ident, _ in cpu_marks}) == 1  # the agent's: the CPU it spent in each step
    cpu_ms = ([round(1000 * (b - a - t), 1) for (_, a), (_, b), t in zip(cpu_marks, cpu_marks[1:], tool_cpu_s)]
              if one_thread else None)
    model_ms = [round(1000 * t, 1) for t in model_s[1:]]  # a step ends with the next LLM call
    return {"result_bytes": len(result), "rows": len(rows), "step_ms": step_ms, "tool_ms": tool_ms,
            "step_without_tool_ms": [round(a - b, 1) for a, b in zip(step_ms, tool_ms)],
            "model_call_ms": model_ms,
            "memory_ms": [round(a - b - c, 1) for a, b, c in zip(step_ms, tool_ms, model_ms)],
            "agent_thread_cpu_ms_without_tool": cpu_ms, "write_and_fsync_ms": baseline}
