"""Issue #6 §3, measured: every hostile reproduction the issue lists, run as written, timed; and
with ``--agent``, issue #37 §4's calls sent by a model to a real ``MemoryAgent``.

Run from the project root::

    .venv/bin/python benchmarks/bench_hostile.py --out benchmarks/results/hostile.json
    .venv/bin/python benchmarks/bench_hostile.py --agent   # benchmarks/results/hostile_agent.json

Each reproduction runs against one real memory (``AgentMemory`` with the real embedding model and
embedded Chroma, three items stored first): the model's calls through ``MemoryToolkit.dispatch``
(separate tools, and a few through the one-tool ``memory`` form), the developer's calls through
the API, and the damage the issue names (a garbage JSONL line, a lost content blob, a corrupt
keyword index, a config that breaks every call). For each: what came back (the tool error code,
or the exception class the API raised), the wall-clock seconds of the call, and whether the memory
still works right after (it lists, answers a text query and reads an item). After every case, a
new process opens the same directory and lists, queries, stores and rebuilds the index: the
issue's "memory poisoned for good" check.

The issue's bound is 1 s per call; ``tests/test_hostile_calls.py`` asserts the behaviour and no
time (a loaded CI machine is not a benchmark), this script reports the times. It needs no
data: the reproductions are the issue's own inputs. It takes about 8 minutes on 2 cores, mostly
the new processes (each loads the embedding model and re-embeds the memory).

``--agent`` (about 30 s): each of issue #37 §4's calls is the tool call of a model's answer to a
real ``MemoryAgent`` (real memory, embedding model and Chroma; the openai SDK against the loopback
scripted LLM server) whose next answer is "done". For each: the seconds ``run()`` took (two
loopback LLM calls and the tool), whether it returned, and whether the tool answered with an error;
at the end, whether a new agent on the same directory reads everything back and runs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from actions import MemoryToolkit  # noqa: E402 - after the offline switches
from agent_memory import AgentMemory, AgentMemoryError, MemoryConfig  # noqa: E402

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = PROJECT_ROOT / "benchmarks" / "results" / "hostile.json"
DEFAULT_AGENT_OUT = PROJECT_ROOT / "benchmarks" / "results" / "hostile_agent.json"

LIMIT_S = 1.0
"""The issue's bound on one hostile call, in seconds."""

REOPEN_CHECK = """
import sys
from agent_memory import AgentMemory
with AgentMemory("hostile", sys.argv[1]) as memory:
    assert memory.query(limit=5), "listing is empty"
    assert memory.query(text="moon landing", limit=3), "text query found nothing"
    new = memory.store("stored after the hostile calls", tags=["after"])
    assert memory.get(new).content == "stored after the hostile calls"
    memory.rebuild_index()
    assert memory.query(tags=["after"], limit=3), "rebuilt index lost an item"
    memory.forget(new)
print("ok")
"""
"""Run in a new process after every case: the memory opens, lists, queries, stores, rebuilds."""


@dataclass(frozen=True)
class Case:
    """One reproduction: a name in the issue's words and the call that reproduces it."""

    name: str
    run: Callable[[AgentMemory, dict[str, str]], Any]
    """Makes the call; returns a ``ToolResult`` (model calls) or anything (API calls)."""
    setup: Callable[[AgentMemory, dict[str, str]], None] | None = None
    """Untimed preparation (damage done before the timed call); ``None``: none."""


def tool(name: str, arguments: Any, *, form: str = "separate") -> Callable[[AgentMemory, dict[str, str]], Any]:
    """A model's call; ``{text}``/``{json}``/``{deep}`` in string arguments become item ids."""

    def call(memory: AgentMemory, ids: dict[str, str]) -> Any:
        args = arguments
        if isinstance(args, dict):
            args = {k: ids.get(v[1:-1], v) if isinstance(v, str) and v[:1] == "{" else v for k, v in args.items()}
        return MemoryToolkit(memory, form=form).dispatch(name, args)

    return call


def nested_list(depth: int) -> list[Any]:
    """``[[[...]]]`` ``depth`` lists deep, built without recursion (``json.loads`` stops at ~1,000)."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def corrupt_middle_line(memory: AgentMemory, ids: dict[str, str]) -> Any:
    """One garbage line in the middle of ``items.jsonl``, then every item is read."""
    path = memory.path / "items.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:1], b"{garbage, not JSON\n", *lines[1:]]))
    return [memory.get(item_id).id for item_id in ids.values()]


def lose_a_blob(memory: AgentMemory, ids: dict[str, str]) -> None:
    """Set-up: an item whose content blob is then deleted (``ids["doomed"]``)."""
    ids["doomed"] = memory.store("a result whose blob will be lost " * 200, title="doomed")
    (memory.path / "content" / memory.get(ids["doomed"]).metadata.content_sha256).unlink()


def read_the_lost_item(memory: AgentMemory, ids: dict[str, str]) -> Any:
    """A query answers; reading the item whose blob is gone fails that item only (``StoreError``)."""
    try:
        memory.query(text="moon landing")
    except AgentMemoryError as exc:  # the damage spread: report it as a failure, not as the answer
        raise RuntimeError(f"a query failed: {exc}") from exc
    try:
        memory.retrieve(ids["doomed"])
    finally:
        memory.forget(ids["doomed"])


def corrupt_keyword_index(memory: AgentMemory, ids: dict[str, str]) -> None:
    """Set-up: garbage written over ``lexical.sqlite3`` of the closed memory (reopened, untimed)."""
    memory.close()
    (memory.path / "index" / "lexical.sqlite3").write_bytes(b"not a database" * 1_000)


CASES = [
    # tags: chromadb's Rust bindings crashed, raised, or hung
    Case("query with 10,000 tags (was: process killed, exit 139)",
         tool("query_memory", json.dumps({"tags": [f"t{i}" for i in range(10_000)]}))),
    Case("query with 1,000 tags (was: VectorIndexError out of dispatch)",
         tool("query_memory", {"tags": [f"t{i}" for i in range(1_000)]})),
    Case("store with 6,000 tags (was: memory poisoned for good)",
         tool("store_memory", {"content": "x", "tags": [f"t{i}" for i in range(6_000)]})),
    Case("store with 10,000 tags (was: no answer after 6 min, 3.4 GB)",
         tool("store_memory", {"content": "x", "tags": [f"t{i}" for i in range(10_000)]})),
    # catastrophic backtracking
    *[Case(f"pattern {p} over 'a'*40+'b' (was: never answers)", tool("retrieve_memory", {"id": "{text}", "pattern": p}))
      for p in ("(a+)+$", "(a|a)+$", "(a|aa)+$")],
    # recursion
    Case('"[" * 100,000 as the arguments (was: RecursionError)', tool("query_memory", "[" * 100_000)),
    Case("valid 5,000-deep JSON arguments (was: RecursionError)",
         tool("query_memory", '{"query": ' + "[" * 5_000 + "]" * 5_000 + "}")),
    Case("json_path over deeply nested stored JSON (was: RecursionError)",
         lambda m, ids: m.retrieve(ids["deep"], {"type": "filtered", "json_path": "0.0.0.0"})),
    Case("column filter over deeply nested stored JSON (was: RecursionError)",
         lambda m, ids: m.retrieve(ids["deep"], {"type": "filtered", "column": "a", "value": "b"})),
    Case("store 5,000-deep JSON through the API (was: RecursionError)",
         lambda m, ids: m.store(nested_list(5_000))),
    Case("1,000 nested regex groups (was: RecursionError)",
         tool("retrieve_memory", {"id": "{text}", "pattern": "(" * 1_000 + "a" + ")" * 1_000})),
    Case("a{99999999999} (was: OverflowError)", tool("retrieve_memory", {"id": "{text}", "pattern": "a{99999999999}"})),
    # lone surrogates
    Case("title '\\ud800' (was: PydanticSerializationError)",
         tool("store_memory", '{"content": "x", "title": "\\ud800"}')),
    Case("query '\\ud800' (was: EmbeddingError)", tool("query_memory", '{"query": "\\ud800"}')),
    Case("tag '\\ud800' in a query (was: VectorIndexError)", tool("query_memory", '{"tags": ["\\ud800"]}')),
    Case("source '\\ud800' in an API query (was: VectorIndexError)", lambda m, ids: m.query(source="\ud800")),
    # unbounded answers and work
    Case("10 MB tool name (was: 10.5 MB error message)", tool("x" * 10_000_000, {})),
    Case("10 MB id (was: 10.5 MB error message)", tool("retrieve_memory", {"id": "m" * 10_000_000})),
    Case("10 MB since (was: 10.5 MB error message)", tool("query_memory", {"since": "2" * 10_000_000})),
    Case("10 MB query text (was: 64 s, echoed whole)", tool("query_memory", {"query": "paris " * 1_700_000})),
    Case("store 10 MB (was: 179 s)", tool("store_memory", {"content": "z" * 10_000_000})),
    Case("100 KB title (was: 48 s)", tool("store_memory", {"content": "x", "title": "t" * 100_000})),
    Case("one-tool form, 10,000 tags", tool("memory", {"op": "query", "tags": [f"t{i}" for i in range(10_000)]},
                                            form="single")),
    Case("one-tool form, pattern (a+)+$", tool("memory", {"op": "retrieve", "id": "{text}", "pattern": "(a+)+$"},
                                               form="single")),
    # developer errors through the API
    Case("m.retrieve(id, 123) (was: UnboundLocalError)", lambda m, ids: m.retrieve(ids["text"], 123)),
    Case("m.store(object()) (was: TypeError)", lambda m, ids: m.store(object())),
    Case("m.query(limit='ten') (was: ValidationError)", lambda m, ids: m.query(limit="ten")),
    Case("MemoryConfig(retrieve_max_tokens=50) (was: every retrieve raised)",
         lambda m, ids: MemoryConfig(retrieve_max_tokens=50)),
    # damage
    Case("garbage line in the middle of items.jsonl (was: every get raised)", corrupt_middle_line),
    Case("a missing content blob (was: every query failed)", read_the_lost_item, setup=lose_a_blob),
    Case("corrupt lexical.sqlite3, then a text query (was: every query raised until rebuild_index())",
         lambda m, ids: m.query(text="moon landing"), setup=corrupt_keyword_index),
]


def outcome(value: Any) -> tuple[str, bool]:
    """What a call answered: the tool error code / ``ok``, and whether that answer is acceptable."""
    if hasattr(value, "error") and hasattr(value, "content"):  # a ToolResult
        bounded = len(value.content) < 20_000
        return (value.error or "ok"), bounded
    return "returned", True


def works(memory: AgentMemory, ids: dict[str, str]) -> bool:
    """The memory still lists, answers a text query and reads an item."""
    return bool(memory.query(limit=3)) and bool(memory.query(text="moon landing", limit=3)) and bool(
        memory.retrieve(ids["text"]).content
    )


def run(directory: Path) -> list[dict[str, Any]]:
    """Every case in order on one memory under ``directory``; one row per case."""
    memory = AgentMemory("hostile", directory)
    ids = {
        "text": memory.store("Apollo 11 landed on the Moon in July 1969.\n" + "a" * 40 + "b\n", title="lines"),
        "json": memory.store({"rows": [{"n": 1, "name": "a"}, {"n": 2, "name": "b"}]}, type="database_result"),
        "deep": memory.store("[" * 5_000 + "]" * 5_000, title="deeply nested JSON text"),
    }
    memory.query(text="warm up the embedding model")
    rows = []
    for case in CASES:
        if case.setup is not None:
            case.setup(memory, ids)
            if memory.closed:
                memory = AgentMemory("hostile", directory)
        started = time.perf_counter()
        try:
            answer, acceptable = outcome(case.run(memory, ids))
        except AgentMemoryError as exc:
            answer, acceptable = type(exc).__name__, True
        except Exception as exc:  # noqa: BLE001 - a raw exception is what this benchmark looks for
            answer, acceptable = f"RAW {type(exc).__name__}", False
        seconds = time.perf_counter() - started
        if memory.closed:
            memory = AgentMemory("hostile", directory)
        reopened = subprocess.run(
            [sys.executable, "-c", REOPEN_CHECK, str(directory)], capture_output=True, text=True, timeout=300
        )
        row = {
            "case": case.name,
            "answer": answer,
            "seconds": round(seconds, 4),
            "within_1s": seconds < LIMIT_S,
            "acceptable": acceptable,
            "works_after": works(memory, ids),
            "new_process_works": reopened.returncode == 0 and reopened.stdout.strip().endswith("ok"),
        }
        print(f"{row['seconds']:8.3f} s  {answer:22} {row['works_after']!s:5} {row['new_process_works']!s:5} "
              f"{case.name}", file=sys.stderr)
        rows.append(row)
    memory.close()
    return rows


AGENT_CASES = [
    ("limit NaN (was: InvalidArgumentError out of run)", "query_memory", '{"limit": NaN}'),
    ("limit Infinity (was: InvalidArgumentError out of run)", "query_memory", '{"limit": Infinity}'),
    ("limit 1e400 (was: InvalidArgumentError out of run)", "query_memory", '{"limit": 1e400}'),
    ("lone surrogate in a query (was: UnicodeEncodeError)", "query_memory", '{"query": "\\ud800"}'),
    ("lone surrogate in a note (was: UnicodeEncodeError)", "store_memory", '{"content": "note \\ud800"}'),
    ("lone surrogate in an id (was: UnicodeEncodeError)", "retrieve_memory", '{"id": "\\ud800"}'),
    ("5,001-digit limit (was: ValueError out of dispatch)", "query_memory", '{"limit": ' + "9" * 5_001 + "}"),
    ("400 KB of [ (was: ContextOverflowError after 248 s)", "query_memory", "[" * 400_000),
    ("limit true (was: taken as 1)", "query_memory", '{"limit": true}'),
]
"""Issue #37 §4: (name, tool, the raw arguments a model sends)."""


def run_agent(directory: Path) -> tuple[list[dict[str, Any]], bool]:
    """Every agent case in order on one agent under ``directory``: one row per case, and whether a
    new agent on the directory reads it all back and runs."""
    from agent_memory.agent.loop import MemoryAgent
    from agent_memory.kernel.budget import ModelLimits
    from agent_memory.llm.chat import OpenAIChatModel
    from agent_memory.testing import FakeLLMServer, ScriptedReply, ScriptedToolCall

    limits = ModelLimits(max_context_tokens=200_000, max_output_tokens=4_096)
    rows = []
    with FakeLLMServer() as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key="x", max_retries=0)
        with MemoryAgent(model, memory_dir=directory, limits=limits) as agent:
            agent.memory.store("Apollo 11 landed on the Moon in July 1969.")
            agent.memory.query(text="warm up the embedding model")
            for name, tool_name, arguments in AGENT_CASES:
                server.enqueue(ScriptedReply(tool_calls=(ScriptedToolCall(tool_name, arguments),)), "done")
                started = time.perf_counter()
                try:
                    returned = agent.run(f"try: {name}").answer == "done"
                except Exception as exc:  # noqa: BLE001 - a raise out of run() is what this measures
                    returned, answer = False, f"RAW {type(exc).__name__}"
                else:
                    sent = server.requests[-1]["messages"]
                    answer = next(m["content"] for m in reversed(sent) if m["role"] == "tool")
                seconds = time.perf_counter() - started
                rows.append({"case": name, "seconds": round(seconds, 4), "within_1s": seconds < LIMIT_S,
                             "run_returned": returned, "tool_error": answer.startswith("Error: "),
                             "answer": answer[:160]})
                print(f"{seconds:8.3f} s  {returned!s:5} {name}", file=sys.stderr)
        server.enqueue(ScriptedReply(tool_calls=(ScriptedToolCall("query_memory", '{"query": "Moon"}'),)), "done")
        with MemoryAgent(model, memory_dir=directory, limits=limits) as again:
            readable = again.run("where did Apollo 11 land?").answer == "done"
    return rows, readable


def _machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()}


def main(argv: list[str] | None = None) -> int:
    """Run every case in a temporary memory and write the results JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="results JSON")
    parser.add_argument("--agent", action="store_true", help="issue #37's calls through a MemoryAgent")
    args = parser.parse_args(argv)
    if args.agent:
        with tempfile.TemporaryDirectory(prefix="bench-hostile-agent-") as tmp:
            rows, readable = run_agent(Path(tmp) / "memory")
        failures = [r["case"] for r in rows if not (r["within_1s"] and r["run_returned"] and r["tool_error"])]
        out = args.out or DEFAULT_AGENT_OUT
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({
            "measured_at": datetime.now(UTC).isoformat(timespec="seconds"), "machine": _machine(), "limit_s": LIMIT_S,
            "cases": rows, "slowest_s": max(r["seconds"] for r in rows), "new_agent_reads_it_back": readable,
            "failures": failures}, indent=2, ensure_ascii=False) + "\n")
        print(f"{len(rows)} agent cases, slowest {max(r['seconds'] for r in rows):.3f} s, "
              f"failures: {failures or 'none'}, read back: {readable}")
        return 1 if failures or not readable else 0
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        rows = run(Path(tmp) / "memory")
    failures = [r["case"] for r in rows if not (r["within_1s"] and r["acceptable"] and r["works_after"]
                                                  and r["new_process_works"])]
    result = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": _machine(),
        "limit_s": LIMIT_S,
        "cases": rows,
        "slowest_s": max(r["seconds"] for r in rows),
        "failures": failures,
    }
    args.out = args.out or DEFAULT_OUT
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"{len(rows)} cases, slowest {result['slowest_s']:.3f} s, failures: {failures or 'none'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
