"""What an agent step does with a large result on its own thread (issue #38: a step with a 1 MB
result must wait on memory no longer than on writing it plus 100 ms): the raw page is never
tokenized whole on the agent's thread, the page is extracted once for the agent and the indexing
thread together, and what the model is shown stays exact.

Observed through the real components the step uses: tiktoken's ``Encoding.encode`` and
trafilatura's ``extract``, each wrapped to record its calls and then run as is."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import lxml.html
import tiktoken.core
import trafilatura

from agent_memory import AgentMemory, MemoryAgent, MemoryConfig, ModelLimits, OpenAIChatModel, tool
from agent_memory.html import extract_page, forget_extractions
from agent_memory.models.messages import Message, ToolCall
from agent_memory.presentation.context import ContextBuilder
from agent_memory.testing import FakeLLMServer, ScriptedReply, ScriptedToolCall
from agent_memory.transforms import readable_text


@pytest.fixture
def large_page(data_dir: Path) -> str:
    """The largest real page of the data (1.6 MB of HTML, a few hundred tokens of main text)."""
    root = data_dir / "webpages" / "readability"
    path = max(root.glob("*/source.html"), key=lambda p: (p.stat().st_size, p.name))
    return path.read_text(encoding="utf-8", errors="replace")


class Encodes:
    """Every ``Encoding.encode`` of tiktoken in the test: (thread ident, characters)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[int, int]] = []
        real = tiktoken.core.Encoding.encode

        def encode(encoding: Any, text: str, *args: Any, **kwargs: Any) -> Any:
            self.calls.append((threading.get_ident(), len(text)))
            return real(encoding, text, *args, **kwargs)

        monkeypatch.setattr(tiktoken.core.Encoding, "encode", encode)

    def longest_on(self, thread: int) -> int:
        return max((chars for ident, chars in self.calls if ident == thread), default=0)


class Parses:
    """Every parse of an HTML text by lxml in the test (``lxml.html.fromstring``, which trafilatura
    and htmldate parse with, calls ``document_fromstring``): the length of each text parsed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sizes: list[int] = []
        self.threads: list[str] = []
        real = lxml.html.document_fromstring

        def document_fromstring(html: Any, *args: Any, **kwargs: Any) -> Any:
            self.sizes.append(len(html))
            self.threads.append(threading.current_thread().name)
            return real(html, *args, **kwargs)

        monkeypatch.setattr(lxml.html, "document_fromstring", document_fromstring)


def run_agent_on(page: str, memory_dir: Path, config: MemoryConfig, *,
                 after_run: Callable[[MemoryAgent], object] = lambda agent: None) -> list[dict[str, Any]]:
    """A MemoryAgent against the loopback scripted server fetches ``page`` once, then answers:
    the messages of its second LLM call (the first that holds the page). ``after_run`` is called
    with the agent once it answered, before its index is flushed (on this thread) and it closes."""

    @tool
    def fetch_page(name: str) -> str:
        """Fetch a web page.

        Args:
            name: the page's name.
        """
        return page

    with FakeLLMServer() as server:
        server.enqueue(ScriptedReply(tool_calls=(ScriptedToolCall("fetch_page", json.dumps({"name": "big"})),)),
                       "Read it.")
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key="x", max_retries=0)
        limits = ModelLimits(max_context_tokens=200_000, max_output_tokens=4_096)
        with MemoryAgent(model, tools=[fetch_page], memory_dir=memory_dir, agent_id="steps", limits=limits,
                         memory_config=config) as agent:
            run = agent.run("Read the page.")
            after_run(agent)
            agent.memory.flush_index()
            counted = agent.memory.get(agent.memory.records()[0].id).metadata.tokens
        requests = server.requests
    assert run.stopped == "answer" and len(requests) == 2 and counted is not None
    return requests[1]["messages"]


def test_an_agent_step_never_tokenizes_the_whole_raw_page_on_its_thread(
        large_page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    forget_extractions()
    encodes = Encodes(monkeypatch)
    longest: list[int] = []
    messages = run_agent_on(large_page, tmp_path, MemoryConfig(),
                            after_run=lambda agent: longest.append(encodes.longest_on(threading.get_ident())))
    shown = next(m["content"] for m in messages if m["role"] == "tool")
    assert shown.startswith("Title: ") and len(shown) < len(large_page) // 100  # shown once, as its main text
    # while the agent ran, its thread counted what it shows and samples of the raw page, never the
    # page whole (the page's own count is the indexing thread's, for its metadata)
    assert longest[0] < len(large_page) // 10, f"the agent's thread tokenized {longest[0]:,} characters at once"


def test_a_page_is_parsed_once_in_an_agent_step_and_its_byline_never(
        large_page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # one extraction for the agent's view and the indexing thread's chunks, one parse in it for the
    # main text, title, URL and what the citation shows (site, date, description); the byline,
    # which only a summary shows, is not read at all
    forget_extractions()
    parses = Parses(monkeypatch)
    messages = run_agent_on(large_page, tmp_path, MemoryConfig())
    assert parses.sizes == [len(large_page)], (parses.sizes, parses.threads)
    assert any(m["role"] == "tool" for m in messages)


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_a_page_parsed_once_is_extracted_as_trafilatura_extracts_its_text(
        data_dir: Path, rank: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # main text and metadata from the one parsed tree equal trafilatura's own, each given the text
    root = data_dir / "webpages" / "readability"
    path = sorted(root.glob("*/source.html"), key=lambda p: (-p.stat().st_size, p.name))[rank]
    html = path.read_text(encoding="utf-8", errors="replace")
    text = trafilatura.extract(html, output_format="txt", include_comments=False, include_tables=True,
                               favor_recall=True)
    meta = trafilatura.extract_metadata(html, extensive=False, date_config={"extensive_search": False})
    forget_extractions()
    parses = Parses(monkeypatch)
    page = extract_page(html)
    assert parses.sizes == [len(html)]  # the text, title and URL: from one parse
    assert text and page.text == text.strip()
    assert (page.title, page.url) == (meta.title, meta.url)  # by trafilatura's own steps
    assert (page.site_name, page.date, page.description) == (meta.sitename, meta.date, meta.description)
    assert parses.sizes == [len(html)]  # what a citation shows: from the same parse
    assert page.author == meta.author
    assert parses.sizes == [len(html)] * 2  # the byline, read when asked for, from a parse of its own
    assert page.title  # the pages state one: the comparison is not of two Nones alone


def test_what_a_page_states_is_read_as_trafilatura_reads_it_on_every_page_of_the_data(data_dir: Path) -> None:
    # the first view and its citation read the title, URL, site, date and description by
    # trafilatura's own metadata steps, without its author and category searches; a citation
    # compares them with the item's: they must be extract_metadata's own, page for page
    from agent_memory import html as html_module

    pages = sorted((data_dir / "webpages").rglob("*.html"))
    differ = []
    for path in pages:
        tree = trafilatura.load_html(path.read_text(encoding="utf-8", errors="replace"))
        if tree is None:
            continue
        meta = trafilatura.extract_metadata(tree, extensive=False, date_config={"extensive_search": False})
        stated = html_module._stated(tree)
        if tuple(stated) != (meta.title, meta.url, meta.sitename, meta.date, meta.description):
            differ.append((path.name, stated, (meta.title, meta.url, meta.sitename, meta.date, meta.description)))
    assert len(pages) > 100 and not differ, differ


def test_a_json_tool_result_is_serialised_once_on_the_agents_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # its id is derived from its bytes before it is stored: the store reuses those bytes
    import agent_memory.models.items as items_module

    rows = [{"id": n, "name": f"row {n}", "price": n / 10} for n in range(5_000)]
    dumped: list[str] = []
    real_dumps, real_json_bytes = items_module.json.dumps, items_module.json_bytes

    def dumps(value: Any, *args: Any, **kwargs: Any) -> str:
        if value is rows:
            dumped.append(threading.current_thread().name)
        return real_dumps(value, *args, **kwargs)

    def json_bytes(value: Any, **kwargs: Any) -> bytes | None:  # orjson's writer, where it writes json's text
        if value is rows:
            dumped.append(threading.current_thread().name)
        return real_json_bytes(value, **kwargs)

    monkeypatch.setattr(items_module.json, "dumps", dumps)
    monkeypatch.setattr(items_module, "json_bytes", json_bytes)

    @tool
    def run_query(sql: str) -> list[dict[str, Any]]:
        """Run a query.

        Args:
            sql: the query.
        """
        return rows

    with FakeLLMServer() as server:
        server.enqueue(ScriptedReply(tool_calls=(ScriptedToolCall("run_query", json.dumps({"sql": "SELECT"})),)),
                       "Done.")
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key="x", max_retries=0)
        with MemoryAgent(model, tools=[run_query], memory_dir=tmp_path, agent_id="rows",
                         memory_config=MemoryConfig(index_on_store=False)) as agent:
            assert agent.run("Query it.").stopped == "answer"
            stored = agent.memory.records()
            content = agent.memory.get(stored[0].id).content
    assert len(stored) == 1 and content == rows
    assert dumped == [threading.current_thread().name], dumped


def test_a_large_json_result_is_shown_and_cited_without_tokenizing_it_whole_on_the_agents_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 8,000 rows: ~1 MB of indented JSON, ~330k tokens; the first showing is its head, cut to the
    # cap, and its citation says its size as an estimate until the indexing thread counted it
    rows = [{"track_id": n, "name": f"Track number {n}", "composer": "Angus Young", "price": 0.99}
            for n in range(8_000)]
    encodes = Encodes(monkeypatch)

    @tool
    def run_query(sql: str) -> list[dict[str, Any]]:
        """Run a query.

        Args:
            sql: the query.
        """
        return rows

    longest: list[int] = []
    with FakeLLMServer() as server:
        server.enqueue(ScriptedReply(tool_calls=(ScriptedToolCall("run_query", json.dumps({"sql": "SELECT"})),)),
                       "Done.")
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key="x", max_retries=0)
        limits = ModelLimits(max_context_tokens=200_000, max_output_tokens=4_096)
        with MemoryAgent(model, tools=[run_query], memory_dir=tmp_path, agent_id="rows", limits=limits,
                         memory_config=MemoryConfig(index_on_store=False)) as agent:
            assert agent.run("Query it.").stopped == "answer"
            longest.append(encodes.longest_on(threading.get_ident()))
            text = readable_text(agent.memory.get(agent.memory.records()[0].id))[0]
        shown = next(m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool")
    assert len(text) > 900_000 and longest[0] < len(text) // 10, f"{longest[0]:,} characters tokenized at once"
    assert re.search(r"· ~[0-9,]+ tokens ·", shown), shown[:300]  # an estimate, marked
    assert "Beginning of the content:" in shown and '"track_id": 0,' in shown and '"track_id": 7999' not in shown


def test_a_large_page_is_cited_with_the_exact_tokens_of_what_the_model_reads(large_page: str, tmp_path: Path) -> None:
    memory = AgentMemory("cite", tmp_path / "memory", config=MemoryConfig(index_on_store=False))
    try:
        item_id = memory.store(large_page, type="web_content", media_type="text/html", source="https://example.org/a")
        history = [Message(role="user", content="Read it."),
                   Message(role="assistant", tool_calls=(ToolCall(id="c1", name="fetch"),)),
                   Message(role="tool", tool_call_id="c1", name="fetch", tool_result_ref=item_id)]
        builder = ContextBuilder(memory)
        builder.build(history)
        view = builder.view(item_id)
        counter = memory.tokens
        readable, _ = readable_text(memory.get(item_id))
        assert memory.get(item_id).metadata.tokens is None  # not counted yet: the view did not count it
        # the raw page's size is an estimate for the decisions, marked so, never shown
        assert view.raw_estimated
        exact_raw = counter.count(large_page)
        assert abs(view.raw_tokens - exact_raw) < 0.2 * exact_raw
        assert f"{view.raw_tokens:,}" not in view.cited and f"{view.raw_tokens:,}" not in view.full
        # what is shown is counted exactly: the citation names the readable text's tokens
        assert f"· {counter.count(readable):,} tokens ·" in view.cited
        assert view.full_tokens == counter.count(view.full) and view.cited_tokens == counter.count(view.cited)
        assert view.full == readable  # a page's main text is far shorter than its markup: shown whole
    finally:
        memory.close()


def test_a_memory_agent_imports_the_extractor_when_it_starts(tmp_path: Path) -> None:
    """trafilatura's import (~0.2 s of Python) is begun when a MemoryAgent starts, in a thread of
    its own, not by the first step that shows a page (a fresh process: this one imported it)."""
    code = "\n".join([
        "import sys",
        "from agent_memory import MemoryAgent, MemoryConfig, ModelLimits, OpenAIChatModel, html",
        "assert 'trafilatura' not in sys.modules",
        "model = OpenAIChatModel('fake-model', base_url='http://127.0.0.1:9/v1', api_key='x', max_retries=0)",
        "agent = MemoryAgent(model, memory_dir=sys.argv[1], memory_config=MemoryConfig(index_on_store=False),",
        "                    limits=ModelLimits(max_context_tokens=200_000, max_output_tokens=4_096))",
        "loader = html._loader",
        "assert loader is not None and loader.name == 'agent-memory-load-extractor', loader",
        "loader.join(120)",
        "print('trafilatura' in sys.modules, html._trafilatura() is sys.modules['trafilatura'])",
        "agent.close()",
    ])
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True"]
