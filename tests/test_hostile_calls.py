"""Nothing a model sends can hang, crash or corrupt memory (issue #6 §3), through ``dispatch``,
nor make the agent loop raise (issue #37 §4).

Every reproduction the issues list is a case here; a hypothesis fuzz test then throws random and
adversarial tool calls at every tool (separate and one-tool form). For every call: the answer is
a tool result (never an exception), an error result or an answer within the memory's token cap,
and a refused call leaves memory exactly as it was. Nothing here is timed: a loaded machine is not a
benchmark (``benchmarks/bench_hostile.py`` times every reproduction against the issue's 1 s, through
``dispatch`` and through the agent loop: ``--agent``); the library bounds the work (a regex's time
budget, refusals before parsing), and a call that did not would never return.
Real components: a real AgentMemory with the real embedding model and embedded Chroma; for the
agent loop, a real MemoryAgent through the real openai / anthropic SDKs against the loopback LLM
server (the one fake: it stands for the remote model).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actions import MemoryToolkit, ToolResult
from agent_memory import AgentMemory, MemoryConfig
from agent_memory.agent.config import AgentConfig
from agent_memory.agent.loop import MemoryAgent
from agent_memory.agent.tools import tool
from agent_memory.kernel.budget import ModelLimits
from agent_memory.llm.chat import AnthropicChatModel, ChatModel, OpenAIChatModel
from agent_memory.testing import FakeLLMServer, ScriptedReply, ScriptedToolCall

ERROR_CODES = {"invalid_arguments", "invalid_id", "not_found", "transform_error", "unknown_tool"}


def fingerprint(memory: AgentMemory) -> tuple[Any, ...]:
    """What must not change after a refused call: every record and every content blob."""
    blobs = sorted(p.name for p in (memory.path / "content").iterdir()) if (memory.path / "content").exists() else []
    return tuple(memory.records()), tuple(blobs)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[AgentMemory, dict[str, str]]:
    memory = AgentMemory("hostile", tmp_path_factory.mktemp("hostile"), config=MemoryConfig())
    ids = {
        "text": memory.store("line one\nline two\n" + "a" * 40 + "b\n", title="lines"),
        "json": memory.store({"rows": [{"n": 1, "name": "a"}, {"n": 2, "name": "b"}]}, type="database_result"),
        "deep": memory.store("[" * 5_000 + "]" * 5_000, title="deep JSON text"),
        "html": memory.store("<html><head><title>T</title></head><body><p>Paris is big.</p></body></html>",
                             type="web_content", media_type="text/html"),
    }
    memory.query(text="warm up the embedding model")
    return memory, ids


def check_answer(memory: AgentMemory, result: ToolResult, before: tuple[Any, ...]) -> None:
    assert isinstance(result, ToolResult)
    assert memory.tokens.count(result.content) <= memory.config.retrieve_max_tokens
    if result.ok:
        assert result.error is None
    else:
        assert result.error in ERROR_CODES and result.content.startswith("Error: ")
        assert len(result.content) < 2_000  # a short message, never the bad input echoed back
        assert fingerprint(memory) == before


@dataclass(frozen=True)
class Hostile:
    """One reproduction from issue #6 §3: what is sent and the error it must give."""

    name: str
    tool: str
    arguments: Any
    error: str | None
    """The error code, or ``None`` when the call may succeed (its answer must still be bounded)."""


CATASTROPHIC = ["(a+)+$", "(a|a)+$", "(a|aa)+$", "(a*)*b$", "(x+x+)+y", "^(a?){40}a{40}$"]

HOSTILE = [
    Hostile("10,000 tags in a query", "query_memory", {"tags": [f"t{i}" for i in range(10_000)]}, "invalid_arguments"),
    Hostile("1,000 tags in a query", "query_memory", {"tags": [f"t{i}" for i in range(1_000)]}, "invalid_arguments"),
    Hostile("6,000 tags stored", "store_memory", {"content": "x", "tags": [f"t{i}" for i in range(6_000)]},
            "invalid_arguments"),
    Hostile("10,000 tags stored", "store_memory", {"content": "x", "tags": [f"t{i}" for i in range(10_000)]},
            "invalid_arguments"),
    *[Hostile(f"catastrophic regex {p}", "retrieve_memory", {"id": "{text}", "pattern": p}, None)
      for p in CATASTROPHIC],
    Hostile("100,000 open brackets", "query_memory", "[" * 100_000, "invalid_arguments"),
    Hostile("5,000-deep valid JSON", "query_memory", '{"query": ' + "[" * 5_000 + "]" * 5_000 + "}",
            "invalid_arguments"),
    Hostile("5,000-deep JSON as a dict", "query_memory", {"query": json.loads("[" * 900 + "]" * 900)},
            "invalid_arguments"),
    Hostile("regex over deeply nested JSON text", "retrieve_memory", {"id": "{deep}", "pattern": r"\[\]"}, None),
    Hostile("nested regex groups", "retrieve_memory", {"id": "{text}", "pattern": "(" * 99 + "a" + ")" * 99}, None),
    Hostile("1,000 nested regex groups", "retrieve_memory", {"id": "{text}", "pattern": "(" * 1_000 + ")" * 1_000},
            "invalid_arguments"),
    Hostile("huge repeat count", "retrieve_memory", {"id": "{text}", "pattern": "a{99999999999}"}, "transform_error"),
    Hostile("nested repeat counts", "retrieve_memory", {"id": "{text}", "pattern": "(a{1000}){1000}"}, None),
    Hostile("lone surrogate in a title", "store_memory", '{"content": "x", "title": "\\ud800"}', "invalid_arguments"),
    Hostile("lone surrogate in content", "store_memory", '{"content": "x\\udfff"}', "invalid_arguments"),
    Hostile("lone surrogate as a query", "query_memory", '{"query": "\\ud800"}', "invalid_arguments"),
    Hostile("lone surrogate as a tag", "query_memory", '{"tags": ["\\ud800"]}', "invalid_arguments"),
    Hostile("lone surrogate as a pattern", "retrieve_memory", '{"id": "{text}", "pattern": "\\ud800"}', None),
    Hostile("lone surrogate as an id", "retrieve_memory", '{"id": "\\ud800"}', "invalid_arguments"),
    Hostile("10 MB tool name", "x" * 10_000_000, {}, "unknown_tool"),
    Hostile("10 MB id", "retrieve_memory", {"id": "m" * 10_000_000}, "invalid_arguments"),
    Hostile("10 MB unknown argument", "query_memory", {"since": "2" * 10_000_000}, "invalid_arguments"),
    Hostile("10 MB query", "query_memory", {"query": "paris " * 1_700_000}, "invalid_arguments"),
    Hostile("10 MB content", "store_memory", {"content": "z" * 10_000_000}, "invalid_arguments"),
    Hostile("100 KB title", "store_memory", {"content": "x", "title": "t" * 100_000}, "invalid_arguments"),
    Hostile("longest query allowed", "query_memory", {"query": "where is paris " * 66}, None),
    Hostile("longest content allowed", "store_memory", {"content": "The Danube flows east. " * 347}, None),
]


def _fill(arguments: Any, ids: dict[str, str]) -> Any:
    if isinstance(arguments, str):
        for key, value in ids.items():
            arguments = arguments.replace("{" + key + "}", value)
        return arguments
    if isinstance(arguments, dict):
        return {key: ids.get(value[1:-1], value) if isinstance(value, str) and value.startswith("{") else value
                for key, value in arguments.items()}
    return arguments


@pytest.mark.parametrize("case", HOSTILE, ids=lambda case: case.name)
def test_each_reproduction_answers_harmlessly(case: Hostile, hostile: tuple[AgentMemory, dict[str, str]]) -> None:
    memory, ids = hostile
    toolkit = MemoryToolkit(memory)
    before = fingerprint(memory)
    result = toolkit.dispatch(case.tool, _fill(case.arguments, ids))
    if case.error is not None:
        assert result.error == case.error, result.content
    check_answer(memory, result, before)
    # memory still works afterwards: list, query, store and read back
    assert memory.query(limit=3)
    assert memory.query(text="paris", limit=3)
    if case.error is None and result.ok and case.tool == "store_memory":
        assert memory.get(result.data["id"]).content == case.arguments["content"]


# -- fuzzing --------------------------------------------------------------------------------------

FIELDS = ["id", "around", "lines", "pattern", "summary", "page", "content", "title", "tags", "query", "limit", "op",
          "transform", "max_tokens", "since", "type"]
json_leaves = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
               | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=60))
json_values = st.recursive(json_leaves, lambda children: st.lists(children, max_size=4)
                           | st.dictionaries(st.text(max_size=8), children, max_size=4), max_leaves=12)
special = st.sampled_from([
    "{text}", "{json}", "{deep}", "{html}", "mem_000000000000", "MEM_ZZ", "../etc/passwd", "\ud800", "\udfff x",
    *CATASTROPHIC, "a{99999999999}", "(" * 60 + ")" * 60, ":5", "-3:", "2:1", "-1:-2", "1:", "", " ", "*",
    "results.*.url", "retrieve", "query", "store", "delete", 0, -1, 2**63, 10**30, 1e308, True, [], {},
    ["t"] * 11, ["x" * 41], "é" * 201, "🚀" * 50,
])
arguments = st.one_of(
    st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=12), special | json_values, max_size=5),
    st.text(max_size=120),
    st.dictionaries(st.sampled_from(FIELDS), special | json_values, max_size=4).map(json.dumps),
    st.just("[" * 3_000),
)


@settings(max_examples=250, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
@given(tool=st.sampled_from(["store_memory", "retrieve_memory", "query_memory", "memory", "unknown"]),
       raw=arguments)
def test_fuzzed_calls_never_raise_hang_or_damage(tool: str, raw: Any, hostile: tuple[AgentMemory, dict[str, str]]) -> None:
    memory, ids = hostile
    toolkit = MemoryToolkit(memory, form="single") if tool == "memory" else MemoryToolkit(memory)
    before = fingerprint(memory)
    result = toolkit.dispatch(tool, _fill(raw, ids))
    check_answer(memory, result, before)


# -- through the agent loop (issue #37 §4) --------------------------------------------------------
# The same kind of calls, sent by a model to a real MemoryAgent: its answer goes through the event
# journal, the raw traces and the working context before any tool runs, and each of those raised
# on what the tools refuse. Real openai / anthropic SDKs against the loopback LLM server.


@dataclass(frozen=True)
class ModelCall:
    """A call a model makes with raw arguments, and the tool error it must get."""

    name: str
    tool: str
    arguments: str
    says: str | tuple[str, ...]
    """A phrase of the error (or phrases, one of which it holds)."""
    anthropic: bool = True
    """``False`` when the loopback server cannot render the arguments as Anthropic's ``input``
    object (400 KB of ``[`` exhausts its own JSON parser: the arguments are sent as a JSON string)."""


SURROGATE_ADVICE = "which is not valid Unicode"
MODEL_CALLS = [
    ModelCall("NaN limit", "query_memory", '{"limit": NaN}', "'limit' is NaN, which is not a JSON number"),
    ModelCall("Infinity limit", "query_memory", '{"limit": Infinity}', "'limit' is Infinity"),
    ModelCall("-Infinity page", "query_memory", '{"page": -Infinity}', "'page' is -Infinity"),
    ModelCall("1e400 limit", "query_memory", '{"limit": 1e400}',  # Anthropic's input, parsed, holds Infinity
              ("'limit' is 1e400, beyond the range of a JSON number", "'limit' is Infinity")),
    ModelCall("lone surrogate in a query", "query_memory", '{"query": "\\ud800"}',
              f"'query' holds a lone surrogate (\\ud800), {SURROGATE_ADVICE}"),
    ModelCall("lone surrogate in a note", "store_memory", '{"content": "note \\udfff"}',
              f"'content' holds a lone surrogate (\\udfff), {SURROGATE_ADVICE}"),
    ModelCall("lone surrogate in an id", "retrieve_memory", '{"id": "\\ud800"}', "'id' holds a lone surrogate"),
    ModelCall("lone surrogate in a tag", "query_memory", '{"tags": ["ok", "\\udc00"]}',
              "'tags.1' holds a lone surrogate"),
    ModelCall("lone surrogate in a key", "query_memory", '{"\\ud800": 1}',
              "a key of the object holds a lone surrogate"),
    ModelCall("lone surrogate to the agent's own tool", "lookup", '{"term": "\\ud800"}',
              "'term' holds a lone surrogate"),
    ModelCall("lone surrogate to spawn_agent", "spawn_agent", '{"task": "\\ud800"}', "'task' holds a lone surrogate"),
    ModelCall("5,001-digit limit", "query_memory", '{"limit": ' + "9" * 5_001 + "}",
              "'limit' is a number written in 5,001 characters"),
    ModelCall("400 KB of [", "query_memory", "[" * 400_000, "are 400,000 characters long; the limit is 100,000",
              anthropic=False),
    ModelCall("limit true", "query_memory", '{"limit": true}', "'limit' = true: Input should be a valid integer"),
]


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@tool(store_result=False)
def lookup(term: str) -> str:
    """Look a term up.

    Args:
        term: the term.
    """
    return f"{term} is known"


def model_agent(llm: FakeLLMServer, provider: str, memory_dir: Path) -> MemoryAgent:
    if provider == "openai":
        model: ChatModel = OpenAIChatModel("fake-model", base_url=llm.base_url, api_key="x", max_retries=0)
    else:
        model = AnthropicChatModel("claude-test", base_url=llm.anthropic_base_url, api_key="x", max_retries=0)
    return MemoryAgent(model, tools=[lookup], memory_dir=memory_dir, memory_config=MemoryConfig(index_on_store=False),
                       config=AgentConfig(allow_sub_agents=True),
                       limits=ModelLimits(max_context_tokens=200_000, max_output_tokens=4_096))


def last_tool_answer(body: dict[str, Any]) -> str:
    """The text of the last tool result a request carries (OpenAI chat or Anthropic Messages)."""
    results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    results += [b["content"] for m in body["messages"] if isinstance(m["content"], list)
                for b in m["content"] if b["type"] == "tool_result"]
    text = results[-1]
    return text if isinstance(text, str) else "".join(part["text"] for part in text)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_hostile_arguments_through_the_agent_loop(provider: str, llm: FakeLLMServer, tmp_path: Path) -> None:
    """Each call is answered with a tool error the model can act on, and ``run()`` returns
    normally; everything written stays readable, by a new agent too."""
    calls = [call for call in MODEL_CALLS if provider == "openai" or call.anthropic]
    agent = model_agent(llm, provider, tmp_path)
    for call in calls:
        llm.enqueue(ScriptedReply(tool_calls=(ScriptedToolCall(call.tool, call.arguments),)), "done")
        run = agent.run(f"try {call.name}")

        assert run.stopped == "answer" and run.answer == "done", call.name
        answer = last_tool_answer(llm.requests[-1])
        phrases = (call.says,) if isinstance(call.says, str) else call.says
        assert any(phrase in answer for phrase in phrases), (call.name, answer)
        assert len(json.dumps(llm.requests[-1])) < 60_000  # a runaway call is not sent back whole
    assert len(agent.memory) == 0  # nothing refused was stored
    agent.close()

    state = agent.memory.path
    for path in state.rglob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():  # valid UTF-8, every line JSON
            json.loads(line)
    again = model_agent(llm, provider, tmp_path)  # reads the journal, traces and working context back
    llm.enqueue(ScriptedReply(tool_calls=(ScriptedToolCall("lookup", '{"term": "Danube"}'),)), "done")
    assert again.run("and now a good call").answer == "done"
    assert last_tool_answer(llm.requests[-1]) == "Danube is known"
    again.close()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_lone_surrogate_in_the_models_text_is_kept_as_u_fffd(provider: str, llm: FakeLLMServer,
                                                              tmp_path: Path) -> None:
    """Not a tool call, nothing to refuse: the answer's text is kept, its lone surrogate replaced."""
    llm.enqueue(ScriptedReply(content="broken \ud800 text", reasoning="and \udfff here"))
    agent = model_agent(llm, provider, tmp_path)
    assert agent.run("say something").answer == "broken \ufffd text"
    agent.close()
