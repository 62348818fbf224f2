"""examples/research_agent.py end to end against the scripted loopback server (CI's stand-in for
OpenAI): real pages and HotpotQA articles, the real embedding model, real files."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from agent_memory.testing import FakeLLMServer, ScriptedReply, ScriptedToolCall, ScriptedUsage

ROOT = Path(__file__).resolve().parent.parent


def load_example():
    spec = importlib.util.spec_from_file_location("research_agent", ROOT / "examples" / "research_agent.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def call(name: str, **arguments: object) -> ScriptedReply:
    return ScriptedReply(tool_calls=(ScriptedToolCall(name, json.dumps(arguments)),), usage=ScriptedUsage(900, 20))


def test_research_agent_example_runs_end_to_end(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = load_example()
    assert example.Library(data_dir).search("Jonny Craig bands")[0]["page"] == "wiki:Jonny Craig"

    def answer_from_what_it_sees(body: dict) -> ScriptedReply:
        # results this small (a search page, two Wikipedia articles of a few hundred tokens) stay
        # in full: a citation would save less than the retrieve it forces, so no memory tool is sent
        assert not re.findall(r"mem_[0-9a-f]{12}", json.dumps(body["messages"]))
        assert [tool["function"]["name"] for tool in body["tools"]] == ["search", "fetch_page"]
        return ScriptedReply(content="Jonny Craig has been in more bands (Dance Gavin Dance, Emarosa, Slaves...).",
                             usage=ScriptedUsage(1_200, 20))

    with FakeLLMServer() as server:
        server.enqueue(
            call("search", query="Jonny Craig Pete Doherty bands"),
            call("fetch_page", page="wiki:Jonny Craig"),
            call("fetch_page", page="wiki:Pete Doherty"),
            answer_from_what_it_sees,
        )
        code = example.main(["--base-url", server.base_url, "--model", "gpt-4o-mini", "--api-key", "x",
                             "--data", str(data_dir), "--memory-dir", str(tmp_path)])
        server.assert_complete()
        printed = capsys.readouterr().out
        assert code == 0
        assert "step  1: prompt     900 tokens" in printed and "search" in printed
        assert "step  4: prompt   1,200 tokens" in printed and "(answer)" in printed
        assert "answer: Jonny Craig has been in more bands" in printed
        assert "stored items: 3" in printed
        # what the model read: every result in full, the search hits among them
        fetched = [m["content"] for m in server.requests[2]["messages"] if m["role"] == "tool"][-1]
        assert "Jonny Craig" in fetched and "Dance Gavin Dance" in fetched
        answer = [m["content"] for m in server.requests[3]["messages"] if m["role"] == "tool"][0]
        assert "wiki:Pete Doherty" in answer
