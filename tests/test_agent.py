"""MemoryAgent end to end: the loop through the real openai SDK against the loopback server, scripted
to make real tool calls (fetch real stored pages, retrieve an excerpt by the id a citation shows,
query, spawn an isolated sub-agent and merge its finding, compact under pressure), on real files.
The scripted server stands for the remote model only; everything else is the real library."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.agent.config import AgentConfig
from agent_memory.agent.prompt import MEMORY_PROMPT
from agent_memory.agent.loop import MemoryAgent
from agent_memory.agent.tools import FunctionTool, tool
from agent_memory.errors import ConfigurationError, InvalidArgumentError
from agent_memory.kernel.budget import ModelLimits
from agent_memory.llm.chat import OpenAIChatModel
from agent_memory.observers import Compacted, NoticeRecorder
from agent_memory.testing import FakeLLMServer, ScriptedReply, ScriptedToolCall, ScriptedUsage

MEM_ID = re.compile(r"mem_[0-9a-f]{12}")


@pytest.fixture
def server() -> FakeLLMServer:
    with FakeLLMServer() as srv:
        yield srv


def chat(server: FakeLLMServer) -> OpenAIChatModel:
    return OpenAIChatModel("fake-model", base_url=server.base_url, api_key="x", max_retries=0)


def call(name: str, **arguments: object) -> ScriptedReply:
    return ScriptedReply(tool_calls=(ScriptedToolCall(name, json.dumps(arguments)),))


def page_tool(data_dir: Path) -> FunctionTool:
    pages = data_dir / "webpages" / "readability"

    @tool
    def fetch_page(page: str) -> str:
        """Fetch one web page by name.

        Args:
            page: the page's name.
        """
        return (pages / page / "source.html").read_text(encoding="utf-8")

    return fetch_page


def cited_id(body: dict) -> str:
    """The first memory id a citation in the prompt shows (what a model would copy)."""
    found = MEM_ID.findall(json.dumps([m for m in body["messages"] if m["role"] == "tool"]))
    assert found, "no citation in the prompt"
    return found[0]


def test_research_loop_fetches_retrieves_queries_and_merges_a_sub_agent(server: FakeLLMServer, data_dir: Path,
                                                                       tmp_path: Path) -> None:
    answers: dict[str, str] = {}

    def retrieve_cited(body: dict) -> ScriptedReply:
        answers["cited"] = cited_id(body)
        return call("retrieve_memory", id=answers["cited"], pattern="fetch")

    server.enqueue(
        call("fetch_page", page="002"),
        call("fetch_page", page="003-metadata-preferred"),
        retrieve_cited,
        call("query_memory", query="Fetch API"),
        call("spawn_agent", task="Fetch page 004 and say its title.", memory="isolated"),
        call("fetch_page", page="004-metadata-space-separated-properties"),  # the child
        "Its title is Test document title.",  # the child's answer
        call("fetch_page", page="no-such-page"),  # a tool that raises
        call("no_such_tool", x=1),
        ScriptedReply(tool_calls=(ScriptedToolCall("fetch_page", "{not json"),)),
        "The Fetch API replaces XHR.",
    )
    config = AgentConfig(allow_sub_agents=True)
    with MemoryAgent(chat(server), tools=[page_tool(data_dir)], system_prompt="You research.", memory_dir=tmp_path,
                     config=config, agent_id="researcher") as agent:
        run = agent.run("What does the Fetch API replace?")
        server.assert_complete()
        assert run.stopped == "answer" and run.answer == "The Fetch API replaces XHR."
        assert [s.tool_calls for s in run.steps] == [
            ("fetch_page",), ("fetch_page",), ("retrieve_memory",), ("query_memory",), ("spawn_agent",),
            ("fetch_page",), ("no_such_tool",), ("fetch_page",), (),
        ]
        tool_messages = [m for m in server.requests[-1]["messages"] if m["role"] == "tool"]
        # the first page is cited by now; the retrieve answer holds the lines of it that match
        assert answers["cited"] in tool_messages[0]["content"] and len(tool_messages[0]["content"]) < 1_500
        assert "fetch" in tool_messages[2]["content"].lower()
        assert answers["cited"] in tool_messages[3]["content"]  # the query found the page
        assert "Test document title" in tool_messages[4]["content"]
        merged = MEM_ID.findall(tool_messages[4]["content"])
        assert merged and all(m in agent.memory for m in merged)
        assert "Test document title" in agent.memory.get(merged[0]).content
        assert "FileNotFoundError" in tool_messages[5]["content"]
        assert "There is no tool 'no_such_tool'" in tool_messages[6]["content"]
        assert "not valid JSON" in tool_messages[7]["content"]
        # the system prompt teaches the memory; the memory tools go with calls once usable
        # until a result is cited neither the memory tools nor the section teaching them are sent
        assert server.requests[0]["messages"][0]["content"] == "You research."
        assert "retrieve_memory" not in {t["function"]["name"] for t in server.requests[0]["tools"]}
        assert "retrieve_memory" in {t["function"]["name"] for t in server.requests[2]["tools"]}
        assert server.requests[2]["messages"][0]["content"] == f"You research.\n\n{MEMORY_PROMPT}"
        # the child's transcript is in its own trace files, its write in its own layer
        child = agent.children[0]
        child_dir = tmp_path / "agents" / child.agent_id
        assert child.memory_mode == "isolated" and (child_dir / "raw_traces.jsonl").exists()
        child_call = "004-metadata-space-separated-properties"  # only the child made this call
        assert child_call in (child_dir / "raw_traces.jsonl").read_text(encoding="utf-8")
        assert child_call not in (tmp_path / "agents" / "researcher" / "raw_traces.jsonl").read_text(encoding="utf-8")
        assert set(child.item_ids).isdisjoint({r.id for r in agent.memory.records()})


def test_isolated_sub_agent_refuses_reads_outside_its_snapshot_and_writes_into_the_parent(
        server: FakeLLMServer, tmp_path: Path) -> None:
    from agent_memory.fork import MemoryFork
    from agent_memory.presentation.offer import ToolOffer

    parent = AgentMemory("parent", tmp_path, config=MemoryConfig(index_on_store=False))
    before = parent.store("Known before the spawn: the bridge opens at 9.", title="before")
    assert parent.backend.claim("parent.sub01")
    MemoryFork.of(parent).save_for(parent.backend, "parent.sub01")  # what spawn(memory="isolated") writes
    late = parent.store("Stored after the spawn.", title="late")
    server.enqueue(
        call("retrieve_memory", id=late),  # a parent item stored after the fork
        call("forget_memory", id=before),  # a write into the parent's memory
        call("retrieve_memory", id=before),  # a read inside the snapshot
        "done",
    )
    child_memory = AgentMemory("parent.sub01", tmp_path, config=MemoryConfig(index_on_store=False))
    config = AgentConfig(tool_offer=ToolOffer(always=frozenset({"forget"})))
    MemoryAgent(chat(server), memory=child_memory, config=config).run("check the memory")
    results = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert "No memory item" in results[0]  # the refused read
    assert "cannot forget" in results[1]  # the refused write
    assert "bridge opens at 9" in results[2]
    assert before in parent and late in parent
    assert late not in child_memory and before in child_memory


def test_isolated_fork_works_from_another_process(tmp_path: Path) -> None:
    import subprocess
    import sys

    from agent_memory.fork import MemoryFork

    parent = AgentMemory("p", tmp_path, config=MemoryConfig(index_on_store=False))
    shared = parent.store("Parent fact: the code word is heron.", title="fact")
    assert parent.backend.claim("p.sub01")
    MemoryFork.of(parent).save_for(parent.backend, "p.sub01")
    late = parent.store("Stored later.", title="late")
    script = (
        "import sys, json\n"
        "from agent_memory import AgentMemory, MemoryConfig\n"
        "from agent_memory.errors import IsolationError, ItemNotFoundError\n"
        "m = AgentMemory('p.sub01', sys.argv[1], config=MemoryConfig(index_on_store=False))\n"
        "out = {'read': m.get(sys.argv[2]).content}\n"
        "try:\n    m.get(sys.argv[3]); out['late'] = 'read'\nexcept ItemNotFoundError: out['late'] = 'refused'\n"
        "try:\n    m.forget(sys.argv[2]); out['forget'] = 'done'\nexcept IsolationError: out['forget'] = 'refused'\n"
        "out['own'] = m.store('Child finding: herons nest in March.')\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path), shared, late], capture_output=True, text=True,
                          timeout=120, check=True)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["read"] == "Parent fact: the code word is heron."
    assert out["late"] == "refused" and out["forget"] == "refused"
    assert out["own"] not in parent and shared in parent
    # the child's write is in its own layer, found by a fresh open in this process
    child = AgentMemory("p.sub01", tmp_path, config=MemoryConfig(index_on_store=False))
    assert [r.id for r in child.own_records()] == [out["own"]]
    assert {r.id for r in child.records()} == {shared, out["own"]}


def test_shared_and_none_sub_agents(server: FakeLLMServer, data_dir: Path, tmp_path: Path) -> None:
    parent = MemoryAgent(chat(server), tools=[page_tool(data_dir)], memory_dir=tmp_path, agent_id="lead",
                         memory_config=MemoryConfig(index_on_store=False))
    parent.memory.store("Lead's note.", title="note")
    server.enqueue(call("fetch_page", page="002"), "shared child done",
                   lambda body: call("retrieve_memory", id=parent.memory.records()[0].id), "none child done")
    shared = parent.spawn("fetch 002", memory="shared", pinned_facts=["Cite every page."])
    assert shared.answer == "shared child done" and len(shared.item_ids) == 1
    assert shared.item_ids[0] in parent.memory  # its write is the parent's
    assert parent.merge(shared) == []
    system = server.requests[0]["messages"][0]["content"]
    assert "You research" not in system  # no system prompt given: the memory section only
    none = parent.spawn("look for the lead's note", memory="none")
    assert none.answer == "none child done" and none.item_ids == ()
    assert "No memory item" in [m for m in server.requests[-1]["messages"] if m["role"] == "tool"][0]["content"]
    assert (tmp_path / "agents" / shared.agent_id / "raw_traces.jsonl").exists()
    assert not (tmp_path / "agents" / shared.agent_id / "items.jsonl").exists()  # shared: no memory of its own


def test_a_sub_agent_gets_only_the_tools_named(server: FakeLLMServer, tmp_path: Path) -> None:
    def lookup(term: str) -> str:
        """Look a term up."""
        return term

    def translate(text: str) -> str:
        """Translate a text."""
        return text

    parent = MemoryAgent(chat(server), tools=[lookup, translate], memory_dir=tmp_path, agent_id="lead",
                         memory_config=MemoryConfig(index_on_store=False))
    with pytest.raises(InvalidArgumentError, match="no tools"):
        parent.spawn("translate it", tool_names=["summarise"])
    server.enqueue("child done")
    child = parent.spawn("translate it", memory="none", tool_names=["translate"])
    assert child.answer == "child done"
    sent = [t["function"]["name"] for t in server.requests[-1]["tools"]]
    assert "translate" in sent and "lookup" not in sent
    server.enqueue("parent done")
    (step,) = parent.run("look it up").steps
    assert {"lookup", "translate"} <= set(step.offered_tool_names)  # names of the tools sent with the call
    assert set(step.offered_tool_names) == {t["function"]["name"] for t in server.requests[-1]["tools"]}


def test_soft_threshold_compact_memory_and_compaction_before_the_next_call(server: FakeLLMServer, tmp_path: Path) -> None:
    limits = ModelLimits(max_context_tokens=6_000, max_output_tokens=500, safety_margin_tokens=0)
    recorder = NoticeRecorder()
    agent = MemoryAgent(chat(server), memory_dir=tmp_path, limits=limits, observers=[recorder],
                        memory_config=MemoryConfig(index_on_store=False))
    soft = int(limits.soft_ratio * limits.input_budget) + 10
    for n in range(5):  # five finished turns, each reported at the soft threshold
        server.enqueue(ScriptedReply(content=f"answer {n} " + "detail " * 60, usage=ScriptedUsage(soft, 50)))
        agent.run(f"question {n}: " + "context " * 80)
    server.enqueue(call("compact_memory"), "compacted and done")
    run = agent.run("please tidy up")
    names = [t["function"]["name"] for t in server.requests[-2]["tools"]]
    assert "compact_memory" in names  # offered under pressure
    assert "Memory note" in server.requests[-2]["messages"][-1]["content"]
    assert run.steps[1].compacted_turns and run.compactions == 1
    compactions = [e for e in recorder.notices if isinstance(e, Compacted)]
    assert compactions and compactions[-1].turn_ids
    last = server.requests[-1]["messages"]
    assert last[-1]["role"] == "tool" and "please tidy up" in json.dumps(last)  # the latest request is kept


def test_async_twin_runs_async_tools_on_the_callers_loop(server: FakeLLMServer, tmp_path: Path) -> None:
    seen: list[asyncio.AbstractEventLoop] = []

    async def lookup(term: str) -> dict:
        """Look a term up."""
        seen.append(asyncio.get_running_loop())
        return {"term": term, "rows": [{"n": i} for i in range(3)]}

    server.enqueue(call("lookup", term="heron"), "ok")
    agent = MemoryAgent(chat(server), tools=[lookup], memory_dir=tmp_path, memory_config=MemoryConfig(index_on_store=False))

    async def main() -> None:
        run = await agent.arun("look up heron")
        assert run.answer == "ok"
        assert seen == [asyncio.get_running_loop()]

    asyncio.run(main())
    stored = agent.memory.records()
    assert len(stored) == 1 and agent.memory.get(stored[0].id).content["term"] == "heron"


def test_tools_must_be_typed_and_names_unique(tmp_path: Path, server: FakeLLMServer) -> None:
    def untyped(x):  # noqa: ANN001, ANN202
        return x

    with pytest.raises(ConfigurationError):
        MemoryAgent(chat(server), tools=[untyped], memory_dir=tmp_path)

    def retrieve_memory(id: str) -> str:  # noqa: A002
        return id

    with pytest.raises(ConfigurationError):
        MemoryAgent(chat(server), tools=[retrieve_memory], memory_dir=tmp_path)
    with pytest.raises(ConfigurationError):
        MemoryAgent(chat(server), memory_dir=tmp_path, config=AgentConfig(use_compaction_llm=True))


def test_step_limit_stops_a_looping_model(server: FakeLLMServer, tmp_path: Path) -> None:
    @tool(store_result=False)
    def ping() -> str:
        """Ping."""
        return "pong"

    server.enqueue(*[call("ping") for _ in range(3)])
    agent = MemoryAgent(chat(server), tools=[ping], memory_dir=tmp_path, memory_config=MemoryConfig(index_on_store=False))
    run = agent.run("loop", max_steps=3)
    assert run.stopped == "max_steps" and run.answer is None and len(run.steps) == 3
    assert len(agent.memory) == 0  # store_result=False keeps answers inline
    assert [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"] == ["pong", "pong"]


def test_the_loop_runs_on_anthropic_messages_too(server: FakeLLMServer, data_dir: Path, tmp_path: Path) -> None:
    """The same loop through the anthropic SDK: native tool_use / tool_result blocks, the memory
    section in the top-level system prompt once a result is cited."""
    from agent_memory.llm.chat import AnthropicChatModel

    server.enqueue(call("fetch_page", page="002"), call("fetch_page", page="003-metadata-preferred"),
                   lambda body: call("retrieve_memory", id=cited_id_anthropic(body), lines=":3"), "done")
    model = AnthropicChatModel("claude-test", base_url=server.anthropic_base_url, api_key="x", max_retries=0)
    agent = MemoryAgent(model, tools=[page_tool(data_dir)], system_prompt="You research.", memory_dir=tmp_path,
                        memory_config=MemoryConfig(index_on_store=False))
    run = agent.run("read two pages")
    assert run.stopped == "answer" and run.answer == "done"
    last = server.requests[-1]
    assert last["system"] == f"You research.\n\n{MEMORY_PROMPT}" or last["system"][0]["text"].endswith(MEMORY_PROMPT)
    blocks = [b for m in last["messages"] for b in (m["content"] if isinstance(m["content"], list) else [])]
    assert [b["name"] for b in blocks if b["type"] == "tool_use"] == ["fetch_page", "fetch_page", "retrieve_memory"]
    assert sum(1 for b in blocks if b["type"] == "tool_result") == 3


def cited_id_anthropic(body: dict) -> str:
    found = MEM_ID.findall(json.dumps(body["messages"]))
    assert found, "no citation in the prompt"
    return found[0]
