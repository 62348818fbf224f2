"""The MCP server (``agent-memory serve-mcp``), driven by the MCP SDK's own client over stdio.

Every server here is a real ``agent-memory serve-mcp`` process (the console script of this venv).
One server serves most tests (module fixture: it starts in ~1.5 s, its first store loads the
embedding model); the concurrency test starts a second one on the same memory, and the README
tests start servers exactly as the README's configuration and three agent lines say.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, Tool
from typer.testing import CliRunner

from actions import MemoryToolkit
from actions.base import format_call
from actions.compact import CompactMemoryAction
from actions.forget import ForgetMemoryAction
from actions.pin import PinMemoryAction
from actions.query import EXCERPT_CHARS, MAX_TOOL_QUERY_LIMIT, QueryMemoryAction
from actions.retrieve import RetrieveMemoryAction
from actions.store import StoreMemoryAction, StoreMemoryUploadAction
from agent_memory import AgentMemory, MemoryConfig
from agent_memory.cli import app
from agent_memory.config import DEFAULT_QUERY_LIMIT, DEFAULT_RETRIEVE_MAX_TOKENS
from agent_memory.kernel.manager import MemoryManager

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
AGENT_MEMORY = VENV_BIN / "agent-memory"
AGENT = "mcp-test"
CALL_TIMEOUT_S = 120.0
SERVER_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
"""Offline (the CLI sets these itself too) and one thread per server: two servers on two cores."""

ACTIONS = (StoreMemoryAction, RetrieveMemoryAction, QueryMemoryAction, CompactMemoryAction, ForgetMemoryAction,
           PinMemoryAction)
"""The tools the server must list, in the toolkit's order."""

LIBRARY = MemoryConfig(index_on_store=False)
"""How the test process stores an agent's results beside a running server: the server indexes them
before its next search (and the test process never loads the embedding model)."""


class StdioSession:
    """``mcp.Client`` on a stdio server, with blocking calls for sync tests: the client lives in an
    event loop on a portal thread, entered and left in one task."""

    def __init__(self, params: StdioServerParameters) -> None:
        self.params = params
        self._stack = ExitStack()
        self.portal: BlockingPortal | None = None
        self.client: Client | None = None

    def __enter__(self) -> StdioSession:
        self.portal = self._stack.enter_context(start_blocking_portal())
        self.client = self._stack.enter_context(
            self.portal.wrap_async_context_manager(Client(self.params, read_timeout_seconds=CALL_TIMEOUT_S))
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def tools(self) -> list[Tool]:
        assert self.portal is not None and self.client is not None
        return self.portal.call(self.client.list_tools).tools

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        assert self.portal is not None and self.client is not None
        return self.portal.call(self.client.call_tool, name, arguments or {})


def serve(memory_dir: Path, agent: str = AGENT) -> StdioSession:
    """A session on a new ``agent-memory serve-mcp`` process for ``agent`` under ``memory_dir``."""
    return StdioSession(StdioServerParameters(
        command=str(AGENT_MEMORY),
        args=["serve-mcp", "--memory-dir", str(memory_dir), "--agent-id", agent],
        env=SERVER_ENV,
        cwd=str(memory_dir.parent),
    ))


def text_of(result: CallToolResult) -> str:
    """The one text block of a memory tool's answer."""
    assert len(result.content) == 1 and result.content[0].type == "text"
    return result.content[0].text


def hit_ids(result: CallToolResult) -> list[str]:
    assert not result.is_error, text_of(result)
    return [hit["id"] for hit in result.structured_content["hits"]]


@pytest.fixture(scope="module")
def memory_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mcp") / "memory"


@pytest.fixture(scope="module")
def server(memory_dir: Path) -> Iterator[StdioSession]:
    with serve(memory_dir) as session:
        yield session


def library(memory_dir: Path) -> AgentMemory:
    """The served agent's memory, opened by the test process as an agent's own code would."""
    return AgentMemory(AGENT, memory_dir, config=LIBRARY)


def kernel(memory_dir: Path) -> MemoryManager:
    """The served agent's conversation kernel, as a MemoryManager opened now sees it on disk."""
    return MemoryManager(library(memory_dir))


# -- tools -----------------------------------------------------------------------------------------
def test_lists_every_memory_tool_with_its_actions_name_description_and_schema(server: StdioSession) -> None:
    tools = server.tools()

    assert [tool.name for tool in tools] == [action.name for action in ACTIONS]
    for tool, action in zip(tools, ACTIONS, strict=True):
        if action is StoreMemoryAction:  # served: long text in parts (no files without --allow-read)
            action = StoreMemoryUploadAction()
        assert tool.title == action.title
        assert tool.description == action.description
        assert tool.input_schema == action.parameters_schema()
    hints = {tool.name: tool.annotations for tool in tools}
    assert hints["retrieve_memory"].read_only_hint and hints["query_memory"].read_only_hint
    assert hints["forget_memory"].destructive_hint
    assert not hints["store_memory"].read_only_hint and not hints["store_memory"].destructive_hint


def test_store_then_query_then_retrieve(server: StdioSession) -> None:
    note = "The Cremona workshop sold 14 violins to the Vienna orchestra in March."
    stored = server.call("store_memory", {"content": note, "title": "Violin sales", "tags": ["sales"]})
    assert not stored.is_error, text_of(stored)
    item_id = stored.structured_content["id"]
    assert text_of(stored).startswith(f"Stored as {item_id}")

    found = server.call("query_memory", {"query": "how many violins went to Vienna"})
    assert item_id in hit_ids(found)
    assert item_id in text_of(found)
    assert hit_ids(server.call("query_memory", {"tags": ["sales"]})) == [item_id]

    read = server.call("retrieve_memory", {"id": item_id})
    assert not read.is_error
    assert read.structured_content["content"] == note and note in text_of(read)
    around = server.call("retrieve_memory", {"id": item_id, "around": "Vienna"})
    assert "Vienna orchestra" in around.structured_content["content"]


# -- the model's mistakes ------------------------------------------------------------------------
MISTAKES = [
    ("retrieve_memory", {"id": "mem_12"}, "invalid_id", "is not a memory id"),
    ("retrieve_memory", {"id": "mem_000000000000"}, "not_found", "No memory item 'mem_000000000000'"),
    ("retrieve_memory", {}, "invalid_arguments", "the required argument 'id' is missing"),
    ("retrieve_memory", {"id": "mem_000000000000", "around": "x", "summary": True}, "invalid_arguments",
     "give one of around, lines, pattern or summary"),
    ("query_memory", {"limit": MAX_TOOL_QUERY_LIMIT + 1}, "invalid_arguments", "'limit'"),
    ("store_memory", {"content": "x" * 8_001}, "invalid_arguments", "'content'"),
    ("store_memory", {"content": "x", "upload": "up_000000000000-2"}, "not_found", "there is no upload"),
    ("store_memory", {"content": "x", "upload": "mem_000000000000"}, "invalid_arguments", "not an upload handle"),
    ("store_memory", {"path": "/etc/passwd"}, "invalid_arguments", "reads no files here"),
    ("forget_memory", {"id": "mem_000000000000"}, "not_found", "nothing was deleted"),
    ("pin_memory", {"id": "mem_000000000000", "fact": "both"}, "invalid_arguments", "not both"),
    ("recall_memory", {"id": "mem_000000000000"}, "unknown_tool", "The memory tools are: store_memory"),
]


def test_a_mistake_is_a_tool_error_the_model_can_act_on(server: StdioSession, tmp_path: Path) -> None:
    in_process = AgentMemory("other", tmp_path / "memory", config=LIBRARY)
    toolkit = MemoryToolkit(in_process, manager=MemoryManager(in_process), uploads=True)  # as the server
    for name, arguments, code, says in MISTAKES:
        result = server.call(name, arguments)

        assert result.is_error, (name, arguments)
        assert result.structured_content == {"error": code}
        assert text_of(result).startswith("Error: ") and says in text_of(result)
        assert text_of(result) == toolkit.dispatch(name, arguments).content  # word for word as in-process


# -- bounded answers -----------------------------------------------------------------------------
def test_a_large_item_comes_back_capped_and_paged(server: StdioSession, memory_dir: Path) -> None:
    log = "\n".join(f"Line {n}: the keeper logged wind {n % 13} knots and {n * 7 % 101} gulls." for n in range(1_000))
    memory = library(memory_dir)
    item_id = memory.store(log, type="file", source="keeper.log")  # an agent's tool result, 15k+ tokens

    pages: list[str] = []
    call: dict[str, Any] | None = {"name": "retrieve_memory", "arguments": {"id": item_id}}
    while call is not None:
        result = server.call(call["name"], call["arguments"])
        assert not result.is_error, text_of(result)
        data = result.structured_content
        assert data["max_tokens"] == DEFAULT_RETRIEVE_MAX_TOKENS
        assert memory.tokens.count(text_of(result)) <= DEFAULT_RETRIEVE_MAX_TOKENS
        pages.append(data["content"])
        call = data["next_call"]
        if call is not None:
            assert text_of(result).endswith(f"Next page: {format_call(call['name'], call['arguments'])}")
    assert len(pages) == data["pages"] >= 4
    assert "".join(pages) == log  # the pages are the item, in order, nothing twice
    assert not server.call("forget_memory", {"id": item_id}).is_error  # (spares the next search indexing it)


def test_query_answers_are_limited(server: StdioSession, memory_dir: Path) -> None:
    library(memory_dir).store_many(
        [{"content": f"Tide table {n}: high water at {n % 12}:00 in the harbour.", "tags": ["tides"]} for n in range(30)]
    )

    assert len(hit_ids(server.call("query_memory", {"tags": ["tides"]}))) == DEFAULT_QUERY_LIMIT
    most = server.call("query_memory", {"query": "high water in the harbour", "limit": MAX_TOOL_QUERY_LIMIT})
    assert len(hit_ids(most)) == MAX_TOOL_QUERY_LIMIT
    assert all(len(hit["excerpt"]) <= EXCERPT_CHARS + 2 for hit in most.structured_content["hits"])  # + " …"
    assert library(memory_dir).tokens.count(text_of(most)) < DEFAULT_RETRIEVE_MAX_TOKENS


# -- the kernel tools ------------------------------------------------------------------------------
def test_compact_pin_and_forget(server: StdioSession, memory_dir: Path) -> None:
    item_id = server.call("store_memory", {"content": "The client's budget is 40,000 EUR.", "tags": ["budget"]}
                          ).structured_content["id"]

    compact = server.call("compact_memory")
    assert not compact.is_error and text_of(compact).startswith("Compaction requested")
    pinned = server.call("pin_memory", {"id": item_id})
    assert not pinned.is_error and text_of(pinned).startswith(f"Pinned {item_id}")
    fact = server.call("pin_memory", {"fact": "Answer the client in French."})
    assert not fact.is_error
    seen = kernel(memory_dir)  # what the agent's own kernel finds on disk
    assert seen.compaction_required
    assert item_id in seen.pinned_items
    assert fact.structured_content["id"] in {item.id for item in seen.traces.list_semantic(pinned=True)}

    forgot = server.call("forget_memory", {"id": item_id})
    assert not forgot.is_error, text_of(forgot)
    gone = server.call("retrieve_memory", {"id": item_id})
    assert gone.is_error and gone.structured_content == {"error": "not_found"}
    assert server.call("forget_memory", {"id": item_id}).structured_content == {"error": "not_found"}
    assert hit_ids(server.call("query_memory", {"tags": ["budget"]})) == []
    assert item_id not in kernel(memory_dir).pinned_items


# -- two servers -----------------------------------------------------------------------------------
def test_two_servers_storing_at_once_lose_nothing(server: StdioSession, memory_dir: Path) -> None:
    per_server = 8

    def write(session: StdioSession, tag: str) -> list[str]:
        ids = []
        for n in range(per_server):
            result = session.call("store_memory", {"content": f"Writer {tag} entry {n}: codeword {tag}{n:03d}.",
                                                   "tags": [tag]})
            assert not result.is_error, text_of(result)
            ids.append(result.structured_content["id"])
        assert not session.call("pin_memory", {"id": ids[0]}).is_error
        return ids

    with serve(memory_dir) as second, ThreadPoolExecutor(2) as pool:
        futures = {tag: pool.submit(write, session, tag) for tag, session in (("alpha", server), ("beta", second))}
        written = {tag: future.result() for tag, future in futures.items()}

        everything = [item_id for ids in written.values() for item_id in ids]
        assert len(set(everything)) == 2 * per_server
        lines = (memory_dir / "agents" / AGENT / "items.jsonl").read_text(encoding="utf-8").splitlines()
        assert set(everything) <= {json.loads(line)["id"] for line in lines}
        for session in (server, second):
            for tag, ids in written.items():
                for n, item_id in enumerate(ids):
                    read = session.call("retrieve_memory", {"id": item_id})
                    assert read.structured_content["content"] == f"Writer {tag} entry {n}: codeword {tag}{n:03d}."
        # Each server finds the other's items: before a search a server indexes every item it did
        # not index itself and the index lacks.
        limit = {"limit": MAX_TOOL_QUERY_LIMIT}
        assert set(hit_ids(second.call("query_memory", {"tags": ["alpha"], **limit}))) == set(written["alpha"])
        assert set(hit_ids(server.call("query_memory", {"tags": ["beta"], **limit}))) == set(written["beta"])
    # Both pins survive: each server pinned on state read from disk, one at a time.
    assert {written["alpha"][0], written["beta"][0]} <= set(kernel(memory_dir).pinned_items)


# -- stdout ----------------------------------------------------------------------------------------
def test_stdout_carries_only_protocol_messages(tmp_path: Path) -> None:
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "retrieve_memory", "arguments": {"id": "mem_000000000000"}}},
    ]
    log = tmp_path / "stderr.log"
    with log.open("w", encoding="utf-8") as stderr:
        server = subprocess.Popen(
            [str(AGENT_MEMORY), "serve-mcp", "--memory-dir", str(tmp_path / "memory")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True, env={**os.environ, **SERVER_ENV},
        )
    watchdog = threading.Timer(CALL_TIMEOUT_S, server.kill)
    watchdog.start()
    try:
        server.stdin.write("".join(json.dumps(message) + "\n" for message in messages))
        server.stdin.flush()
        answers = [json.loads(server.stdout.readline()) for _ in range(3)]  # every line is JSON-RPC
        server.stdin.close()  # the client is done: the server ends
        rest = server.stdout.read()
        server.wait()
    finally:
        watchdog.cancel()
        server.kill()

    assert server.returncode == 0, log.read_text(encoding="utf-8")[-2000:]
    assert [answer["id"] for answer in answers] == [1, 2, 3] and rest == ""
    assert answers[2]["result"]["isError"] is True


MALFORMED = [
    # (raw line, the error code, the id of the answer)
    (b'{"jsonrpc": "2.0", "id": 4, "method": "tools/list"', -32700, None),  # cut short: not JSON
    (b"\xff\xfe not even text", -32700, None),
    (b'{"jsonrpc": "2.0", "id": 5, "method": 7}', -32600, 5),  # JSON, but method is not a string
    (b'{"jsonrpc": "1.0", "id": "six", "method": "tools/list"}', -32600, "six"),
    (b'{"id": true, "method": "tools/list"}', -32600, None),  # no usable id
    (b"[1, 2, 3]", -32600, None),
    (b'"tools/list"', -32600, None),
]


def test_malformed_lines_are_answered_with_json_rpc_errors(tmp_path: Path) -> None:
    """Raw bytes on a real server's stdin: each malformed line gets its JSON-RPC 2.0 error (the
    SDK's transport alone drops them, and a client waiting on the id waits for ever); blank lines
    are skipped and the session goes on."""
    start = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    lines = [json.dumps(message).encode() for message in start]
    for raw, _, _ in MALFORMED:
        lines += [raw, b"", b"   "]
    lines.append(json.dumps({"jsonrpc": "2.0", "id": 99, "method": "tools/list"}).encode())
    server = subprocess.Popen(
        [str(AGENT_MEMORY), "serve-mcp", "--memory-dir", str(tmp_path / "memory")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ, **SERVER_ENV},
    )
    watchdog = threading.Timer(CALL_TIMEOUT_S, server.kill)
    watchdog.start()
    try:
        server.stdin.write(b"\n".join(lines) + b"\n")
        server.stdin.flush()
        answers = []
        while len(answers) < len(MALFORMED) + 2:  # one answer per line with an id: any order (JSON-RPC 2.0 §6)
            line = server.stdout.readline()
            assert line, f"the server closed stdout after {answers}"
            answers.append(json.loads(line))
        server.stdin.close()
        server.wait()
    finally:
        watchdog.cancel()
        server.kill()

    results = {answer["id"]: answer["result"] for answer in answers if "result" in answer}
    assert set(results) == {1, 99}
    errors = [answer for answer in answers if "error" in answer]
    assert len(answers) == len(errors) + 2
    assert sorted((error["error"]["code"], repr(error["id"])) for error in errors) == sorted(
        (code, repr(id_)) for _, code, id_ in MALFORMED)
    assert all(error["jsonrpc"] == "2.0" and "id" in error and error["error"]["message"] for error in errors)
    assert [tool["name"] for tool in results[99]["tools"]] == [action.name for action in ACTIONS]
    assert server.returncode == 0


def test_a_bad_agent_id_is_one_line_on_stderr(tmp_path: Path) -> None:
    done = CliRunner().invoke(app, ["serve-mcp", "--memory-dir", str(tmp_path / "memory"), "--agent-id", "../up"])

    assert done.exit_code == 1
    assert done.stdout == "" and done.stderr.startswith("Error: invalid agent id '../up'")
    assert not (tmp_path / "memory").exists()


# -- the README's set-ups ------------------------------------------------------------------------
def readme_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8"), re.S)


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home directory for ``~`` in the README, and this venv's ``agent-memory`` on the PATH."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PATH", f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}")
    return home


def test_readme_client_config_starts_a_working_server(user_home: Path) -> None:
    entry = json.loads(next(block for block in readme_blocks("json") if "mcpServers" in block))["mcpServers"][
        "agent-memory"]
    one_liner = next(line for block in readme_blocks("sh") for line in block.splitlines()
                     if line.startswith("claude mcp add"))
    words = shlex.split(one_liner)
    assert words[words.index("--") + 1:] == [entry["command"], *entry["args"]]  # Claude Code runs the same server

    memory_dir = Path(option(entry["args"], "--memory-dir")).expanduser()
    assert memory_dir.is_relative_to(user_home)
    stored = AgentMemory(option(entry["args"], "--agent-id"), memory_dir, config=LIBRARY).store(
        "Q3 revenue was $4.2M, up 12% on Q2.", tags=["finance"])

    # As a client runs it: the command and args alone, the client's environment (HOME, PATH, ...).
    with StdioSession(StdioServerParameters(command=entry["command"], args=entry["args"])) as session:
        assert [tool.name for tool in session.tools()] == [action.name for action in ACTIONS]
        read = session.call("retrieve_memory", {"id": stored})
        assert not read.is_error and "Q3 revenue was $4.2M" in text_of(read)


# -- every request answered once, with its id (issue #37 §5) -------------------------------------
INITIALIZE = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]


def raw_session(memory_dir: Path, lines: list[str]) -> tuple[list[dict[str, Any]], int]:
    """Write an initialization, then ``lines``, to a new server's stdin at once and close it (EOF):
    every answer the server writes before it exits, and its exit code."""
    server = subprocess.Popen(
        [str(AGENT_MEMORY), "serve-mcp", "--memory-dir", str(memory_dir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ, **SERVER_ENV},
    )
    watchdog = threading.Timer(CALL_TIMEOUT_S, server.kill)
    watchdog.start()
    try:
        out, _ = server.communicate("".join(line + "\n" for line in [*map(json.dumps, INITIALIZE), *lines]).encode())
    finally:
        watchdog.cancel()
        server.kill()
    return [json.loads(line) for line in out.decode("utf-8").splitlines()], server.returncode


def call_line(request_id: Any, name: str, arguments: str) -> str:
    """A ``tools/call`` line with ``arguments`` as raw JSON text (what ``json.dumps`` cannot write)."""
    return (f'{{"jsonrpc": "2.0", "id": {request_id}, "method": "tools/call", '
            f'"params": {{"name": "{name}", "arguments": {arguments}}}}}')


REQUESTS_WITH_IDS = [
    # (raw line, the id of its one answer, "result" with a phrase of the tool error, or the error code)
    (call_line(10, "store_memory", '{"content": "note \\ud800"}'), 10, "'content' holds a lone surrogate (\\ud800)"),
    (call_line(11, "query_memory", '{"limit": ' + "9" * 5_001 + "}"), 11, "'limit' is a number written in 5,001"),
    (call_line(12, "query_memory", '{"limit": NaN}'), 12, "'limit' is NaN"),
    (call_line(13, "query_memory", '{"limit": true}'), 13, "'limit' = true"),
    (call_line(14, "\\ud800", "{}"), 14, "There is no tool '\\ud800'"),
    ('{"jsonrpc": "2.0", "id": 15, "method": "tools/list", "params": {"cursor": "\\udfff"}}', 15, -32602),
    ('{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}', None, -32600),
    ('{"jsonrpc": "2.0", "id": 2.0, "method": "tools/list"}', None, -32600),
    ('{"jsonrpc": "2.0", "id": null, "method": "tools/list"}', None, -32600),
    ('{"jsonrpc": "2.0", "id": {"n": 16}, "method": "tools/list"}', None, -32600),
    ('{"jsonrpc": "2.0", "id": [17], "method": "tools/list"}', None, -32600),
    ('{"jsonrpc": "2.0", "id": true, "method": "tools/list"}', None, -32600),
    ('{"jsonrpc": "2.0", "id": "\\ud800", "method": "tools/list"}', None, -32600),
    ('{"jsonrpc": "2.0", "method": "notifications/roots/list_changed", "params": {"x": "\\ud800"}}', "none", 0),
    ('{"jsonrpc": "2.0", "id": 99, "method": "tools/list"}', 99, "result"),
]


def test_every_request_gets_one_answer_with_its_id_before_the_server_exits(tmp_path: Path) -> None:
    """Raw lines, then EOF at once: valid JSON the SDK's parser refuses is answered with its id (a
    tool error for a ``tools/call``: the model can act on it), an id MCP refuses with -32600 and
    ``"id": null`` (MCP: a string or an integer, never null), a notification never."""
    answers, code = raw_session(tmp_path / "memory", [line for line, _, _ in REQUESTS_WITH_IDS])

    assert code == 0
    expected = [1, *(request_id for _, request_id, _ in REQUESTS_WITH_IDS if request_id != "none")]
    assert sorted(map(repr, (answer["id"] for answer in answers))) == sorted(map(repr, expected))
    by_id = {answer["id"]: answer for answer in answers if answer["id"] is not None}
    for line, request_id, expect in REQUESTS_WITH_IDS:
        if request_id is None or request_id == "none":
            continue
        answer = by_id[request_id]
        if isinstance(expect, int):
            assert answer["error"]["code"] == expect, answer
        elif expect == "result":
            assert [tool["name"] for tool in answer["result"]["tools"]] == [action.name for action in ACTIONS]
        else:
            result = answer["result"]
            assert result["isError"] is True and expect in result["content"][0]["text"], (line[:80], result)
    refused = [answer for answer in answers if answer["id"] is None]
    assert all(answer["error"]["code"] == -32600 and "id must be a string or an integer" in answer["error"]["message"]
               for answer in refused)
    assert not (tmp_path / "memory" / "agents" / "default" / "items.jsonl").exists()  # nothing refused was stored


def test_pipelined_stores_then_eof_are_all_answered(tmp_path: Path) -> None:
    """50 ``store_memory`` calls written at once, then stdin closed: 50 answers before the server
    exits, one per stored item (a client that never heard of a store retries it: a duplicate)."""
    stores = [json.dumps({"jsonrpc": "2.0", "id": 100 + n, "method": "tools/call", "params": {
        "name": "store_memory", "arguments": {"content": f"Pipelined note {n}: tide at {n % 12}:00."}}})
        for n in range(50)]
    answers, code = raw_session(tmp_path / "memory", stores)

    assert code == 0
    results = {answer["id"]: answer["result"] for answer in answers if answer["id"] != 1}
    assert sorted(results) == list(range(100, 150))
    assert not any(result.get("isError") for result in results.values()), results
    stored = {result["structuredContent"]["id"] for result in results.values()}
    lines = (tmp_path / "memory" / "agents" / "default" / "items.jsonl").read_text(encoding="utf-8").splitlines()
    assert {json.loads(line)["id"] for line in lines} == stored and len(stored) == 50
