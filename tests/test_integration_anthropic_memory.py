"""Claude's memory tool (memory_20250818) on agent-memory: every command of Anthropic's documented
examples, path traversal refused with a tool error, and a real run of the Anthropic SDK's tool
runner against the loopback scripted server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from anthropic import Anthropic

from agent_memory import AgentMemory
from agent_memory.integrations.anthropic_memory import MEMORY_FILE_TAG, AgentMemoryTool
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
        ({"command": "insert", "path": "/memories/a.md", "insert_line": 9, "insert_text": "y"}, "range [0, 3]"),
        ({"command": "view", "path": "/memories/none.md"}, "does not exist"),
        ({"command": "delete", "path": "/memories"}, "Cannot delete"),
        ({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/a.md"}, "already exists"),
        ({"command": "view", "path": "/memories/a.md", "view_range": [3, 1]}, "Invalid view_range"),
        ({"command": "insert", "path": "/memories/a.md"}, "Invalid memory command"),
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
