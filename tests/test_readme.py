"""Every Python block of README.md runs as written (issue 20, finding 8).

Each block runs on its own, in a fresh process whose working directory and home are a new
temporary directory (so ``AgentMemory("researcher")`` writes ``./memory`` there and
``~/agent-memory`` lands there too), with the project's venv first on ``PATH`` (the MCP block
starts ``agent-memory``). A block that calls a model reads ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``
as the ``openai`` SDK does; here they name :class:`~agent_memory.testing.FakeLLMServer` on loopback,
scripted per block below. A block the scripts do not know gets no scripted answer: if it calls a
model it fails, and its author adds a script here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent_memory.testing import FakeLLMServer, ScriptedReply, ScriptedToolCall

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
BLOCK_TIMEOUT_S = 240


@dataclass(frozen=True)
class Script:
    """What the fake model answers while a block runs, and what the block must print."""

    replies: tuple[ScriptedReply, ...] = ()
    prints: tuple[str, ...] = ()
    """Substrings its standard output must hold."""
    requests: tuple[str, ...] = field(default=())
    """Substrings that must occur in the JSON of the requests the model received."""


SCRIPTS: dict[str, Script] = {
    # "Use it": a page stored, then the model's retrieve call handed to the toolkit.
    "from agent_memory import AgentMemory, OfferState": Script(prints=("True", "The Team plan costs $12")),
    # "Results shown once, then cited": the result is named by its call, never as `agent`.
    "from agent_memory import (AgentMemory, CitationBuilder, ContextBuilder": Script(
        prints=('[search({"query": "Jonny Craig bands"})', 'retrieve_memory(id="mem_'),
    ),
    # The kernel around one call: the model asks for a search.
    "from agent_memory import AgentMemory, LLMRequestAssembler": Script(
        replies=(ScriptedReply(tool_calls=(ScriptedToolCall("search", '{"query": "context length"}'),)),),
        prints=("['search']",),
        requests=('"name": "search"', "Compare the three papers."),
    ),
    # The MemoryAgent loop: one fetch, then the answer.
    "from agent_memory import AgentConfig, MemoryAgent": Script(
        replies=(
            ScriptedReply(tool_calls=(ScriptedToolCall(
                "fetch_page", '{"url": "https://developer.mozilla.org/en-US/docs/Web/API/Fetch_API"}'),)),
            ScriptedReply(content="It replaces XMLHttpRequest."),
        ),
        prints=("It replaces XMLHttpRequest. answer",),
        requests=("more powerful and flexible replacement for XMLHttpRequest", '"name": "spawn_agent"'),
    ),
    # "Use it with your framework": each adapter in one agent run (a fetch, then the answer).
    "import asyncio\nfrom agents import Agent, Runner, function_tool": Script(
        replies=(ScriptedReply(tool_calls=(ScriptedToolCall("fetch_page", '{"url": "https://example.org/pricing"}'),)),
                 ScriptedReply(content="$12 per user per month.")),
        prints=("$12 per user per month. cost: 0.0",), requests=("The Team plan costs $12",),
    ),
    "from langchain.agents import create_agent": Script(
        replies=(ScriptedReply(tool_calls=(ScriptedToolCall("fetch_page", '{"url": "https://example.org/pricing"}'),)),
                 ScriptedReply(content="$12 per user per month.")),
        prints=("$12 per user per month. cost: 0.0",), requests=("The Team plan costs $12",),
    ),
    "from agent_memory import AgentMemory\nfrom agent_memory.integrations.langgraph_store": Script(
        prints=("Black coffee, no sugar",),
    ),
    "from pydantic_ai import Agent": Script(
        replies=(ScriptedReply(tool_calls=(ScriptedToolCall("fetch_page", '{"url": "https://example.org/pricing"}'),)),
                 ScriptedReply(content="$12 per user per month.")),
        prints=("$12 per user per month. cost: 0.0",), requests=("The Team plan costs $12",),
    ),
    "import anthropic\nfrom agent_memory import AgentMemory": Script(
        replies=(ScriptedReply(tool_calls=(ScriptedToolCall("memory", json.dumps(
                     {"command": "create", "path": "/memories/coffee.md", "file_text": "Takes coffee black.\n"})),)),
                 ScriptedReply(content="Noted.")),
        prints=("Noted. ['/memories/coffee.md']",), requests=('"type": "memory_20250818"',),
    ),
    # MCP over stdio with the SDK's client: an empty memory answers the query.
    "import asyncio\nfrom mcp import Client": Script(prints=("Q3 results", "$4.2M")),
}


def blocks() -> list[str]:
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def script_for(code: str) -> Script:
    for start, script in SCRIPTS.items():
        if code.startswith(start):
            return script
    return Script()


def test_the_readme_has_the_blocks_the_scripts_know() -> None:
    codes = blocks()
    assert len(codes) >= len(SCRIPTS)
    for start in SCRIPTS:
        assert any(code.startswith(start) for code in codes), f"no README block starts with {start!r}"


@pytest.mark.parametrize("index", range(len(blocks())), ids=lambda i: f"block{i + 1}")
def test_readme_python_block_runs_as_written(index: int, tmp_path: Path) -> None:
    code = blocks()[index]
    script = script_for(code)
    with FakeLLMServer() as server:
        server.enqueue(*script.replies)
        env = {
            **os.environ,
            "HOME": str(tmp_path),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "sk-readme",
            "ANTHROPIC_BASE_URL": server.anthropic_base_url,
            "ANTHROPIC_API_KEY": "sk-ant-readme",
            "OPENAI_AGENTS_DISABLE_TRACING": "1",  # the Agents SDK would export traces to OpenAI
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "PYTHONPATH": str(ROOT),
        }
        env.pop("AGENT_MEMORY_DIR", None)
        done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=BLOCK_TIMEOUT_S)
        assert done.returncode == 0, f"README block {index + 1} failed:\n{code}\n--- stderr:\n{done.stderr[-4000:]}"
        for expected in script.prints:
            assert expected in done.stdout, f"block {index + 1} printed:\n{done.stdout[-2000:]}"
        sent = json.dumps(server.requests, ensure_ascii=False)
        for expected in script.requests:
            assert expected in sent, f"block {index + 1}: no request held {expected!r}"
        server.assert_complete()
