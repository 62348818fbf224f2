"""The rooms a tool result crosses: from the agent loop into storage, back out as a citation, and
back in full through a retrieve. A room is a module of the library whose code is handed the
result's content or its memory id as an argument (measured with ``sys.setprofile`` on a real
MemoryAgent run against the loopback scripted server, a real page, real files and the real
embedding model). The count is a ceiling: a change that adds a hop fails here and has to say why."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from agent_memory.agent.loop import MemoryAgent
from agent_memory.agent.tools import tool
from agent_memory.kernel.budget import ModelLimits
from agent_memory.llm.chat import OpenAIChatModel
from agent_memory.testing import FakeLLMServer, ScriptedReply, ScriptedToolCall

MEM_ID = re.compile(r"mem_[0-9a-f]{12}")
PACKAGES = ("agent_memory", "actions", "compaction_plugins")
MAX_ROOMS = 25
"""Measured on this layout: 26 before the storage layer was collapsed (moving modules added no
hop); 24 since a tool result's store arguments are decided where its record is prepared
(``records.prepare``) and an item's indexable text is chosen where it is chunked
(``index.chunking``); 25 since the size bounds of items and traces are declared once, in
``models.bounds`` (issue #39: the checks a trace's preview passes were copies in
``models.traces`` and ``models.items``, which still hold the models): a module more on the same
path, no hop more (``models.events`` took ``agent.payloads``' place)."""


def _call(tool_name: str, /, **arguments: object) -> ScriptedReply:
    return ScriptedReply(tool_calls=(ScriptedToolCall(tool_name, json.dumps(arguments)),))


def rooms_of_a_tool_result(page: str, memory_dir: Path) -> dict[str, set[str]]:
    """Module -> the functions of it that were handed the page's text (or bytes) or its memory id."""
    head = page[:200]

    def carries(value: Any) -> bool:
        if isinstance(value, str):
            return (len(value) > 1_000 and head in value) or MEM_ID.fullmatch(value) is not None
        return isinstance(value, bytes | bytearray) and len(value) > 1_000 and head.encode() in value

    rooms: dict[str, set[str]] = {}

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        module = frame.f_globals.get("__name__", "")
        if event != "call" or module.split(".")[0] not in PACKAGES or module.startswith("agent_memory.testing"):
            return
        code = frame.f_code
        handed = [name for name in code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
                  if carries(frame.f_locals.get(name))]
        if handed:
            rooms.setdefault(module, set()).add(f"{code.co_name}({', '.join(handed)})")

    @tool
    def fetch_page(name: str) -> str:
        """Fetch a web page.

        Args:
            name: the page's name.
        """
        return page

    def retrieve_the_cited(body: dict[str, Any]) -> ScriptedReply:
        (cited, *_) = MEM_ID.findall(json.dumps([m for m in body["messages"] if m["role"] == "tool"]))
        return _call("retrieve_memory", id=cited, pattern="fetch")

    with FakeLLMServer() as server:
        server.enqueue(_call("fetch_page", name="a"), _call("fetch_page", name="b"), retrieve_the_cited, "done")
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key="x", max_retries=0)
        limits = ModelLimits(max_context_tokens=200_000, max_output_tokens=4_096)
        with MemoryAgent(model, tools=[fetch_page], memory_dir=memory_dir, agent_id="a", limits=limits) as agent:
            agent.memory.store("warm-up: the embedding model loads outside the measurement")
            sys.setprofile(profile)
            try:
                run = agent.run("What does the Fetch API replace?")
            finally:
                sys.setprofile(None)
        server.assert_complete()
    assert [step.tool_calls for step in run.steps] == [("fetch_page",), ("fetch_page",), ("retrieve_memory",), ()]
    return rooms


def test_a_tool_result_crosses_at_most_the_measured_rooms(data_dir: Path, tmp_path: Path) -> None:
    page = (data_dir / "webpages" / "readability" / "002" / "source.html").read_text(encoding="utf-8")
    rooms = rooms_of_a_tool_result(page, tmp_path)
    listing = "\n".join(f"{module}: {sorted(functions)}" for module, functions in sorted(rooms.items()))
    # the path really was measured: the loop, storage, the citation and the retrieve are in it
    for module in ("agent_memory.agent.events", "agent_memory.memory", "agent_memory.records.items",
                   "agent_memory.presentation.context", "actions.retrieve"):
        assert module in rooms, listing
    assert len(rooms) <= MAX_ROOMS, f"{len(rooms)} rooms (at most {MAX_ROOMS}):\n{listing}"
