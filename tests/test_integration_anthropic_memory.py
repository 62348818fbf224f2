"""Claude's memory tool (memory_20250818) on agent-memory: every command of Anthropic's documented
examples, path traversal refused with a tool error, and a real run of the Anthropic SDK's tool
runner against the loopback scripted server."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest
from anthropic import Anthropic, AsyncAnthropic
from anthropic.lib.tools import BetaAsyncAbstractMemoryTool, ToolError

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.integrations.anthropic_memory import MEMORY_FILE_TAG, AgentMemoryTool, AsyncAgentMemoryTool
from agent_memory.storage import FileBackend
from agent_memory.storage.contracts import LogChange
from agent_memory.storage.files.items import FileItemLog
from agent_memory.testing import FakeLLMServer, ScriptedReply, ScriptedToolCall


def _use(tool: AgentMemoryTool, **command: Any) -> dict[str, Any]:
    return tool.tool_result({"type": "tool_use", "id": "toolu_1", "name": "memory", "input": command})


@pytest.fixture
def tool(tmp_path: Path) -> AgentMemoryTool:
    return AgentMemoryTool(AgentMemory("assistant", tmp_path))


def test_the_documented_commands(tool: AgentMemoryTool) -> None:
    # The examples of Anthropic's memory tool documentation, in order.
    created = _use(tool, command="create", path="/memories/notes.txt",
                   file_text="Meeting notes:\n- Discussed project timeline\n- Next steps defined\n")
    assert created == {"type": "tool_result", "tool_use_id": "toolu_1",
                       "content": "File created successfully at: /memories/notes.txt"}
    listing = _use(tool, command="view", path="/memories")["content"]
    assert listing.startswith("Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:")
    assert "\t/memories/notes.txt" in listing
    shown = _use(tool, command="view", path="/memories/notes.txt")["content"]
    assert shown == ("Here's the content of /memories/notes.txt with line numbers:\n"
                     "     1\tMeeting notes:\n     2\t- Discussed project timeline\n     3\t- Next steps defined\n     4\t")
    assert _use(tool, command="view", path="/memories/notes.txt", view_range=[2, 3])["content"].endswith(
        "     2\t- Discussed project timeline\n     3\t- Next steps defined")
    edited = _use(tool, command="str_replace", path="/memories/notes.txt", old_str="project timeline",
                  new_str="launch timeline")
    assert edited["content"].startswith("The memory file has been edited.")
    assert "launch timeline" in edited["content"]
    assert _use(tool, command="insert", path="/memories/notes.txt", insert_line=1,
                insert_text="- Attendees: Ana, Bo\n")["content"] == "The file /memories/notes.txt has been edited."
    assert _use(tool, command="rename", old_path="/memories/notes.txt", new_path="/memories/archive/2024.txt")[
        "content"] == "Successfully renamed /memories/notes.txt to /memories/archive/2024.txt"
    item_id = tool.files()["/memories/archive/2024.txt"]
    assert tool.memory.get(item_id).content == (
        "Meeting notes:\n- Attendees: Ana, Bo\n- Discussed launch timeline\n- Next steps defined\n")
    assert tool.search("who attended the meeting") == ["/memories/archive/2024.txt"]  # Query Memory finds it
    assert _use(tool, command="delete", path="/memories/archive")["content"] == "Successfully deleted /memories/archive"
    assert tool.files() == {} and item_id not in tool.memory


def test_edits_that_cannot_apply_are_tool_errors(tool: AgentMemoryTool) -> None:
    _use(tool, command="create", path="/memories/a.md", file_text="x\nx\n")
    cases = [
        ({"command": "create", "path": "/memories/a.md", "file_text": "again"}, "already exists"),
        ({"command": "str_replace", "path": "/memories/a.md", "old_str": "x", "new_str": "y"}, "Multiple occurrences"),
        ({"command": "str_replace", "path": "/memories/a.md", "old_str": "zz", "new_str": "y"}, "did not appear verbatim"),
        ({"command": "insert", "path": "/memories/a.md", "insert_line": 9, "insert_text": "y"}, "range [0, 2]"),
        ({"command": "view", "path": "/memories/none.md"}, "does not exist"),
        ({"command": "delete", "path": "/memories"}, "Cannot delete"),
        ({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/a.md"}, "already exists"),
        ({"command": "view", "path": "/memories/a.md", "view_range": [3, 1]}, "Invalid view_range"),
        ({"command": "insert", "path": "/memories/a.md"}, "insert_text must be a string"),
    ]
    for command, message in cases:
        answer = _use(tool, **command)
        assert answer.get("is_error") is True and message in answer["content"], (command, answer)
    assert tool.memory.get(tool.files()["/memories/a.md"]).content == "x\nx\n"  # nothing changed


@pytest.mark.parametrize("path", [
    "/memories/../etc/passwd", "/etc/passwd", "/memories/%2e%2e/%2e%2e/etc/passwd", "/memories/..%2Fsecrets",
    "/memories\\..\\x", "/memories/a\x00b", "memories/notes.txt", "/memoriesX/notes.txt", "",
])
def test_paths_outside_memories_are_refused(tool: AgentMemoryTool, path: str) -> None:
    for command in ({"command": "view", "path": path}, {"command": "create", "path": path, "file_text": "x"},
                    {"command": "delete", "path": path},
                    {"command": "rename", "old_path": "/memories/x", "new_path": path}):
        answer = _use(tool, **command)
        assert answer.get("is_error") is True, (command, answer)
    assert tool.memory.records() == []  # nothing was written


def test_claude_runs_the_tool_through_the_sdk_tool_runner(tmp_path: Path) -> None:
    memory = AgentMemory("assistant", tmp_path)
    tool = AgentMemoryTool(memory)
    with FakeLLMServer() as server:
        server.enqueue(
            ScriptedReply(tool_calls=(ScriptedToolCall("memory", json.dumps({"command": "view", "path": "/memories"})),)),
            ScriptedReply(tool_calls=(ScriptedToolCall("memory", json.dumps(
                {"command": "create", "path": "/memories/prefs.md", "file_text": "Likes coffee, no sugar.\n"})),)),
            ScriptedReply(tool_calls=(ScriptedToolCall("memory", json.dumps(
                {"command": "view", "path": "/memories/../../etc/passwd"})),)),
            "Noted: coffee, no sugar.",
        )
        client = Anthropic(base_url=server.anthropic_base_url, api_key="test", max_retries=0)
        runner = client.beta.messages.tool_runner(
            model="claude-sonnet-4-6", max_tokens=512, tools=[tool],
            messages=[{"role": "user", "content": "Remember that I like coffee with no sugar."}])
        final = runner.until_done()
        requests = server.requests
    assert final.content[0].text == "Noted: coffee, no sugar."
    assert requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    results = [block for request in requests[1:] for block in request["messages"][-1]["content"]
               if isinstance(block, dict) and block.get("type") == "tool_result"]  # each call's answer
    assert "File created successfully at: /memories/prefs.md" in json.dumps(results[1])
    assert results[2].get("is_error") is True and "escape" in json.dumps(results[2])
    assert [r.metadata.source for r in memory.records() if MEMORY_FILE_TAG in r.metadata.tags] == ["/memories/prefs.md"]
    # Another agent sharing the memory reads Claude's note.
    assert AgentMemoryTool(AgentMemory("assistant", tmp_path)).view(
        _view("/memories/prefs.md")).endswith("Likes coffee, no sugar.\n     2\t")


def _view(path: str) -> Any:
    from anthropic.types.beta import BetaMemoryTool20250818ViewCommand

    return BetaMemoryTool20250818ViewCommand(command="view", path=path)


# -- answers are capped and paged; paths mean one thing on every command; arguments are checked ----

NO_INDEX = MemoryConfig(index_on_store=False)
_NEXT_RANGE = re.compile(r'"view_range": \[(\d+), (-?\d+)\]')


@pytest.fixture
def quick(tmp_path: Path) -> AgentMemoryTool:
    """A tool on a memory that does not embed on store (tests that write hundreds of files)."""
    return AgentMemoryTool(AgentMemory("assistant", tmp_path, config=NO_INDEX))


def _fits(tool: AgentMemoryTool, answer: dict[str, Any]) -> str:
    """The answer's text, after checking it is within the memory's answer cap (retrieve_max_tokens)."""
    text = answer["content"]
    assert tool.memory.tokens.count(text) <= tool.memory.config.retrieve_max_tokens, len(text)
    return text


def _shown_lines(text: str) -> list[tuple[int, str]]:
    """The numbered lines of a file view: (line number, text)."""
    found = []
    for line in text.split("\n")[1:]:
        number, tab, rest = line.partition("\t")
        if tab and number.strip().isdigit():
            found.append((int(number), rest))
    return found


def test_a_large_file_is_viewed_a_page_at_a_time_and_every_line_is_reachable(quick: AgentMemoryTool) -> None:
    lines = [f"entry {n:05d}: the lighthouse keeper logged the weather and the passing ships" for n in range(1, 12_001)]
    assert _use(quick, command="create", path="/memories/log.txt", file_text="\n".join(lines)).get("is_error") is None
    seen: list[tuple[int, str]] = []
    answer = _use(quick, command="view", path="/memories/log.txt")
    pages = 0
    while True:
        text = _fits(quick, answer)
        pages += 1
        seen += _shown_lines(text)
        follow = _NEXT_RANGE.search(text.split("\n")[-1])
        if follow is None:
            break
        assert "view_range" in text.split("\n")[-1] and int(follow.group(1)) == seen[-1][0] + 1
        answer = _use(quick, command="view", path="/memories/log.txt",
                      view_range=[int(follow.group(1)), int(follow.group(2))])
    assert pages > 5 and seen == list(enumerate(lines, 1))  # every line once, in order


def test_a_file_of_one_huge_line_is_cut_and_says_so(quick: AgentMemoryTool) -> None:
    _use(quick, command="create", path="/memories/blob.txt", file_text="word " * 190_000 + "\nsecond line")
    for command in ({"command": "view", "path": "/memories/blob.txt"},
                    {"command": "view", "path": "/memories/blob.txt", "view_range": [1, 1]}):
        text = _fits(quick, _use(quick, **command))
        assert "950,000 characters" in text and "word word" in text
    assert '"view_range": [2, -1]' in _use(quick, command="view", path="/memories/blob.txt")["content"]


def test_a_large_directory_is_listed_a_page_at_a_time(quick: AgentMemoryTool) -> None:
    names = [f"/memories/notes/note_{n:04d}.md" for n in range(700)]
    for name in names:
        _use(quick, command="create", path=name, file_text="a short note")
    listed: list[str] = []
    answer = _use(quick, command="view", path="/memories/notes")
    while True:
        text = _fits(quick, answer)
        listed += [line.split("\t", 1)[1] for line in text.split("\n")[2:] if line.count("\t") == 1]
        follow = _NEXT_RANGE.search(text.split("\n")[-1])
        if follow is None:
            break
        answer = _use(quick, command="view", path="/memories/notes",
                      view_range=[int(follow.group(1)), int(follow.group(2))])
    assert listed == names  # every entry once, in order


def test_str_replace_answers_are_capped(quick: AgentMemoryTool) -> None:
    _use(quick, command="create", path="/memories/many.txt", file_text="\n".join(f"x {n}" for n in range(60_000)))
    many = _use(quick, command="str_replace", path="/memories/many.txt", old_str="x", new_str="y")
    text = _fits(quick, many)
    assert many["is_error"] and text.endswith("in lines: " + ", ".join(map(str, range(1, 21))) + " and 59,980 more. "
                                              "Please ensure it is unique")
    absent = _use(quick, command="str_replace", path="/memories/many.txt", old_str="q" * 300_000, new_str="y")
    assert absent["is_error"] and "did not appear verbatim" in _fits(quick, absent)
    _use(quick, command="create", path="/memories/one.txt", file_text="top\nMARK\nbottom")
    grown = _use(quick, command="str_replace", path="/memories/one.txt", old_str="MARK",
                 new_str="\n".join(f"inserted {n}" for n in range(40_000)))
    text = _fits(quick, grown)
    assert text.startswith("The memory file has been edited.") and "view_range" in text.split("\n")[-1]
    item_id = quick.files()["/memories/one.txt"]
    assert quick.memory.get(item_id).content.count("\n") == 40_001  # the edit itself was made whole


def test_a_path_means_one_thing_on_every_command(quick: AgentMemoryTool) -> None:
    # A percent escape is refused at once, by every command, instead of being stored under a
    # name that no later command accepts.
    for path in ("/memories/%252e%252e/secret.txt", "/memories/my%20notes.txt"):
        answer = _use(quick, command="create", path=path, file_text="x")
        assert answer.get("is_error") is True and "percent" in answer["content"], answer
    assert quick.files() == {}
    # Whatever is created is found by every command under the name the listing shows.
    for path in ("/memories/100%.txt", "/memories/a b/c.d.md", "/memories/ünï/ok"):
        assert _use(quick, command="create", path=path, file_text="one\ntwo").get("is_error") is None, path
    listing = _use(quick, command="view", path="/memories")["content"]
    for name in quick.files():
        assert f"\t{name}" in listing
        assert _use(quick, command="view", path=name).get("is_error") is None, name
        assert _use(quick, command="insert", path=name, insert_line=0, insert_text="zero").get("is_error") is None
        assert _use(quick, command="str_replace", path=name, old_str="zero", new_str="nil").get("is_error") is None
        assert _use(quick, command="rename", old_path=name, new_path=name + ".bak").get("is_error") is None
        assert _use(quick, command="delete", path=name + ".bak").get("is_error") is None
    assert quick.files() == {}


def test_a_file_cannot_also_be_a_directory(quick: AgentMemoryTool) -> None:
    _use(quick, command="create", path="/memories/a.txt", file_text="a file")
    _use(quick, command="create", path="/memories/other.txt", file_text="another file")
    for command in ({"command": "create", "path": "/memories/a.txt/b.txt", "file_text": "under a file"},
                    {"command": "create", "path": "/memories/a.txt/deeper/c.txt", "file_text": "under a file"},
                    {"command": "rename", "old_path": "/memories/other.txt", "new_path": "/memories/a.txt/x.txt"}):
        answer = _use(quick, **command)
        assert answer.get("is_error") is True and "/memories/a.txt is a file" in answer["content"], (command, answer)
    assert set(quick.files()) == {"/memories/a.txt", "/memories/other.txt"}


@pytest.mark.parametrize(("command", "name"), [
    ({"command": "create", "path": "/memories/l.txt", "file_text": ["a", "b"]}, "file_text"),
    ({"command": "create", "path": "/memories/d.txt", "file_text": {"a": 1}}, "file_text"),
    ({"command": "create", "path": "/memories/n.txt", "file_text": 12}, "file_text"),
    ({"command": "str_replace", "path": "/memories/f.txt", "old_str": ["text"], "new_str": "x"}, "old_str"),
    ({"command": "str_replace", "path": "/memories/f.txt", "old_str": "text", "new_str": {"x": 1}}, "new_str"),
    ({"command": "insert", "path": "/memories/f.txt", "insert_line": 0, "insert_text": ["x"]}, "insert_text"),
    ({"command": "insert", "path": "/memories/f.txt", "insert_line": "one", "insert_text": "x"}, "insert_line"),
    ({"command": "view", "path": "/memories/f.txt", "view_range": ["a", 2]}, "view_range"),
])
def test_arguments_of_the_wrong_type_are_tool_errors(quick: AgentMemoryTool, command: dict[str, Any], name: str) -> None:
    _use(quick, command="create", path="/memories/f.txt", file_text="some text\n")
    answer = _use(quick, **command)
    assert answer.get("is_error") is True and f"{name} must be" in answer["content"], answer
    assert set(quick.files()) == {"/memories/f.txt"}
    assert quick.memory.get(quick.files()["/memories/f.txt"]).content == "some text\n"  # nothing changed


class _CountingLog(FileItemLog):
    """The real file item log, counting its writes."""

    writes = 0

    def write(self, change: LogChange, *, expect: str | None = None) -> str:
        type(self).writes += 1
        return super().write(change, expect=expect)


class _CountingBackend(FileBackend):
    def log(self, agent_id: str, name: str, *, on_quarantine: Any = None) -> FileItemLog:
        log = super().log(agent_id, name, on_quarantine=on_quarantine)
        if name == "items":
            log.__class__ = _CountingLog
        return log


def test_a_directory_delete_is_one_batch(tmp_path: Path) -> None:
    memory = AgentMemory("assistant", backend=_CountingBackend(tmp_path), config=NO_INDEX)
    tool = AgentMemoryTool(memory)
    for n in range(40):
        _use(tool, command="create", path=f"/memories/project/file_{n:02d}.md", file_text=f"note {n}")
    _use(tool, command="create", path="/memories/keep.md", file_text="kept")
    before = _CountingLog.writes
    assert _use(tool, command="delete", path="/memories/project")["content"] == "Successfully deleted /memories/project"
    assert _CountingLog.writes - before == 1  # one change of the item log for the 40 files
    assert list(tool.files()) == ["/memories/keep.md"]
    reopened = AgentMemoryTool(AgentMemory("assistant", tmp_path, config=NO_INDEX))  # as after a restart
    assert list(reopened.files()) == ["/memories/keep.md"] and len(reopened.memory) == 1


# -- issue 37 item 11: the async tool, and insert / str_replace as the SDK's reference tool does ----
# The reference's own tests (anthropic-sdk-python tests/lib/tools/memory_tools/test_filesystem.py),
# rewritten: each case runs on the sync and the async tool through the SDK's entry point, call().

@pytest.fixture(params=["sync", "async"])
def command(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """Runs one command on a sync or an async tool (``call``, as the SDK's tool runners do) and
    returns its text; a refused command raises the SDK's ``ToolError``. ``command.text(path)`` is
    the file's text as stored."""
    memory = AgentMemory("assistant", tmp_path, config=NO_INDEX)
    tool: Any = AgentMemoryTool(memory) if request.param == "sync" else AsyncAgentMemoryTool(memory)

    def run(**fields: Any) -> str:
        result = tool.call(fields)
        return str(asyncio.run(result) if inspect.isawaitable(result) else result)

    def text(path: str) -> str:
        return str(memory.get(AgentMemoryTool(memory).files()[path]).content)

    run.text = text  # type: ignore[attr-defined]
    return run


@pytest.mark.parametrize(("line", "inserted", "expected"), [
    (1, "Inserted Line", "Line 1\nInserted Line\nLine 2\n"),
    (0, "First Line", "First Line\nLine 1\nLine 2\n"),
    (2, "Last Line", "Line 1\nLine 2\nLast Line\n"),
    (2, "Last Line\n\n", "Line 1\nLine 2\nLast Line\n"),  # the text's final newlines are dropped
    (1, "two\nlines", "Line 1\ntwo\nlines\nLine 2\n"),
])
def test_insert_leaves_the_file_as_the_reference_tool_does(command: Any, line: int, inserted: str, expected: str) -> None:
    command(command="create", path="/memories/insert_test.txt", file_text="Line 1\nLine 2")
    answer = command(command="insert", path="/memories/insert_test.txt", insert_line=line, insert_text=inserted)
    assert answer == "The file /memories/insert_test.txt has been edited."
    assert command.text("/memories/insert_test.txt") == expected


def test_insert_counts_the_lines_without_the_one_a_final_newline_leaves(command: Any) -> None:
    command(command="create", path="/memories/a.txt", file_text="Line 1\nLine 2\n")
    with pytest.raises(ToolError, match=r"^Invalid `insert_line` parameter: 3\. It should be within the range \[0, 2\]\.$"):
        command(command="insert", path="/memories/a.txt", insert_line=3, insert_text="text")
    command(command="insert", path="/memories/a.txt", insert_line=2, insert_text="Line 3")
    assert command.text("/memories/a.txt") == "Line 1\nLine 2\nLine 3\n"  # no empty line before it
    command(command="create", path="/memories/empty.txt", file_text="")
    command(command="insert", path="/memories/empty.txt", insert_line=0, insert_text="only")
    assert command.text("/memories/empty.txt") == "only\n"
    with pytest.raises(ToolError, match=r"range \[0, 3\]"):  # three lines now
        command(command="insert", path="/memories/a.txt", insert_line=10, insert_text="text")


def test_an_old_str_found_twice_is_refused_with_the_line_of_each_occurrence(command: Any) -> None:
    command(command="create", path="/memories/replace_test.txt", file_text="Hello\nMiddle\nHello")
    with pytest.raises(ToolError) as raised:
        command(command="str_replace", path="/memories/replace_test.txt", old_str="Hello", new_str="Hi")
    assert str(raised.value) == ("No replacement was performed. Multiple occurrences of old_str `Hello` in lines: 1, 3. "
                                 "Please ensure it is unique")
    command(command="create", path="/memories/two.txt", file_text="a a\nb")
    with pytest.raises(ToolError, match=r"in lines: 1, 1\. Please ensure it is unique$"):  # one per occurrence
        command(command="str_replace", path="/memories/two.txt", old_str="a", new_str="c")
    assert command.text("/memories/replace_test.txt") == "Hello\nMiddle\nHello"  # nothing changed


def test_claude_runs_the_async_tool_through_the_async_client(tmp_path: Path) -> None:
    """AsyncAnthropic's tool runner with AsyncAgentMemoryTool, the SDK's BetaAsyncAbstractMemoryTool:
    the same answers as the sync tool, in the same memory."""
    memory = AgentMemory("assistant", tmp_path)
    tool = AsyncAgentMemoryTool(memory)
    assert isinstance(tool, BetaAsyncAbstractMemoryTool) and tool.to_dict() == AgentMemoryTool(memory).to_dict()
    with FakeLLMServer() as server:
        server.enqueue(
            ScriptedReply(tool_calls=(ScriptedToolCall("memory", json.dumps(
                {"command": "create", "path": "/memories/prefs.md", "file_text": "Likes coffee, no sugar."})),)),
            ScriptedReply(tool_calls=(ScriptedToolCall("memory", json.dumps(
                {"command": "insert", "path": "/memories/prefs.md", "insert_line": 1, "insert_text": "Tea at four."})),)),
            ScriptedReply(tool_calls=(ScriptedToolCall("memory", json.dumps(
                {"command": "view", "path": "/memories/../../etc/passwd"})),)),
            ScriptedReply(tool_calls=(ScriptedToolCall("memory", json.dumps(
                {"command": "view", "path": "/memories/prefs.md"})),)),
            "Noted: coffee, no sugar; tea at four.",
        )

        async def chat() -> tuple[Any, dict[str, str]]:
            client = AsyncAnthropic(base_url=server.anthropic_base_url, api_key="test", max_retries=0)
            runner = client.beta.messages.tool_runner(
                model="claude-sonnet-4-6", max_tokens=512, tools=[tool],
                messages=[{"role": "user", "content": "Remember that I like coffee with no sugar, and tea at four."}])
            return await runner.until_done(), await tool.files()

        final, files = asyncio.run(chat())
        requests = server.requests
    assert final.content[0].text == "Noted: coffee, no sugar; tea at four."
    assert requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    results = [block for request in requests[1:] for block in request["messages"][-1]["content"]
               if isinstance(block, dict) and block.get("type") == "tool_result"]
    assert "File created successfully at: /memories/prefs.md" in json.dumps(results[0])
    assert results[2].get("is_error") is True and "escape" in json.dumps(results[2])
    assert "     2\tTea at four." in str(results[3]["content"])
    assert list(files) == ["/memories/prefs.md"]
    assert memory.get(files["/memories/prefs.md"]).content == "Likes coffee, no sugar.\nTea at four.\n"
    assert asyncio.run(tool.search("what does the user drink")) == ["/memories/prefs.md"]
    by_hand = asyncio.run(tool.tool_result({"type": "tool_use", "id": "toolu_9", "name": "memory",
                                            "input": {"command": "delete", "path": "/memories"}}))
    assert by_hand["is_error"] is True and "Cannot delete" in by_hand["content"]
