"""Every Python block of README.md and of the pages of docs/ runs as written (issue 20, finding 8),
with no key (issue 30).

Each block runs on its own, in a fresh process whose working directory and home are a new
temporary directory (two blocks at a time: each is a fresh interpreter importing torch and loading
the embedding model, CPU-bound, and the machine has 2 cores) (so ``AgentMemory("researcher")`` writes ``./memory`` there and
``~/agent-memory`` lands there too), with the project's venv first on ``PATH`` (the MCP block
starts ``agent-memory``). A block that calls a model reads ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``
(``ANTHROPIC_…`` for Anthropic) as the SDKs do; here they name the stand-in model
(:mod:`agent_memory.testing.stand_in`), as docs/memory.md tells a user without a key to do: it
calls each tool it is offered once, then answers with the start of each result, so what a block
prints and what it sent are checked below.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agent_memory.testing.stand_in import stand_in_server

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
BLOCK_TIMEOUT_S = 240


@dataclass(frozen=True)
class Expected:
    """What a block must print, and what the stand-in model must have been sent while it ran."""

    prints: tuple[str, ...] = ()
    """Substrings its standard output must hold."""
    requests: tuple[str, ...] = field(default=())
    """Substrings that must occur in the JSON of the requests the model received."""


PRICING = "The Team plan costs $12"
"""The framework blocks' tool result: the stand-in's answer repeats it, and the adapters send it."""

EXPECTED: dict[str, Expected] = {
    # "Use it": a page stored, then the model's retrieve call handed to the toolkit.
    "from agent_memory import AgentMemory, OfferState": Expected(prints=("True", PRICING)),
    # "Results shown once, then cited": the result is named by its call, never as `agent`.
    "from agent_memory import AgentMemory, ContextBuilder": Expected(
        prints=('[search({"query": "Jonny Craig bands"})', 'retrieve_memory(id="mem_'),
    ),
    # The kernel around one call: the model asks for a search, with the user's words.
    "from agent_memory import AgentMemory, LLMRequestAssembler": Expected(
        prints=("['search']",), requests=('"name": "search"', "Compare the three papers."),
    ),
    # The MemoryAgent loop: the page fetched from the address in the question, then the answer.
    "from agent_memory import AgentConfig, MemoryAgent": Expected(
        prints=("fetch_page returned: The Fetch API provides an interface", "answer"),
        requests=("more powerful and flexible replacement for XMLHttpRequest", '"name": "spawn_agent"'),
    ),
    # "Use it with your framework": each adapter in one agent run (a fetch, then the answer), priced.
    "import asyncio\nfrom agents import Agent, Runner, function_tool": Expected(
        prints=(f"fetch_page returned: Plans and pricing. {PRICING}", "cost: 0.0"), requests=(PRICING,),
    ),
    "from langchain.agents import create_agent": Expected(
        prints=(f"fetch_page returned: Plans and pricing. {PRICING}", "cost: 0.0"), requests=(PRICING,),
    ),
    "from agent_memory import AgentMemory\nfrom agent_memory.integrations.langgraph_store": Expected(
        prints=("Black coffee, no sugar",),
    ),
    "from pydantic_ai import Agent": Expected(
        prints=(f"fetch_page returned: Plans and pricing. {PRICING}", "cost: 0.0"), requests=(PRICING,),
    ),
    # Claude's memory tool: the stand-in views /memories through the adapter, then answers.
    "import anthropic\nfrom agent_memory import AgentMemory": Expected(
        prints=("memory returned: Here're the files and directories", "/memories"),
        requests=('"type": "memory_20250818"', '"tool_use_id": "toolu_memory_'),
    ),
    # The same with AsyncAnthropic and the async tool.
    "import asyncio\nimport anthropic\nfrom agent_memory import AgentMemory": Expected(
        prints=("memory returned: Here're the files and directories", "/memories"),
        requests=('"type": "memory_20250818"', '"tool_use_id": "toolu_memory_'),
    ),
    # MCP over stdio with the SDK's client: an empty memory answers the query.
    "import asyncio\nfrom mcp import Client": Expected(prints=("Q3 results", "$4.2M")),
}


PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
"""The README and every page of ``docs/``: their Python blocks all run here."""

MAX_README_LINES = 400


def labelled_blocks() -> list[tuple[str, str]]:
    """``(page-n, code)`` of every Python block, page by page (README first), in order."""
    return [(f"{page.stem}-{n}", code) for page in PAGES
            for n, code in enumerate(BLOCK.findall(page.read_text(encoding="utf-8")), 1)]


def blocks() -> list[str]:
    return [code for _, code in labelled_blocks()]


def quickstart() -> str:
    """examples/quickstart.py from its first import: the README's quickstart block, which
    tests/test_light_core.py (no extra installed) and tests/test_wheel.py (from the built wheel)
    run, so it is not run a third time here."""
    text = (ROOT / "examples" / "quickstart.py").read_text(encoding="utf-8")
    return text[text.index("import json"):]


def test_the_readme_quickstart_is_the_example_the_core_tests_run() -> None:
    assert blocks()[0] == quickstart()


def test_the_readme_is_short_and_links_every_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_README_LINES
    for page in PAGES[1:]:
        assert f"(docs/{page.name})" in text, f"the README does not link docs/{page.name}"
    for name in ("memory", "kernel", "agents", "storage", "frameworks", "mcp", "cli", "replay", "benchmarks"):
        assert (ROOT / "docs" / f"{name}.md").is_file(), name


def expected_of(code: str) -> Expected:
    for start, expected in EXPECTED.items():
        if code.startswith(start):
            return expected
    return Expected()


def test_the_pages_have_the_blocks_the_checks_know() -> None:
    codes = blocks()
    assert len(codes) >= len(EXPECTED)
    for start in EXPECTED:
        assert any(code.startswith(start) for code in codes), f"no README block starts with {start!r}"


@dataclass(frozen=True)
class BlockRun:
    """What one block's process did, and what the stand-in model was sent."""

    returncode: int
    stdout: str
    stderr: str
    sent: str
    """The JSON of every request the stand-in received."""


def run_block(index: int, workdir: Path) -> BlockRun:
    """Run block ``index`` in a fresh interpreter in ``workdir`` (also its home), against its own
    stand-in model on loopback, with no real key."""
    return run_code(blocks()[index], workdir)


def run_code(code: str, workdir: Path) -> BlockRun:
    """:func:`run_block` for any code."""
    with stand_in_server(record=True) as server:
        env = {
            **os.environ,
            "HOME": str(workdir),
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "none",
            "ANTHROPIC_BASE_URL": server.anthropic_base_url,
            "ANTHROPIC_API_KEY": "none",
            "OPENAI_AGENTS_DISABLE_TRACING": "1",  # the Agents SDK would export traces to OpenAI
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "PYTHONPATH": str(ROOT),
        }
        env.pop("AGENT_MEMORY_DIR", None)
        done = subprocess.run([sys.executable, "-c", code], cwd=workdir, env=env, capture_output=True,
                              text=True, timeout=BLOCK_TIMEOUT_S)
        return BlockRun(done.returncode, done.stdout, done.stderr, json.dumps(server.requests, ensure_ascii=False))


@pytest.fixture(scope="module")
def block_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Future[BlockRun]]]:
    """Every block, started as the module's tests begin, two at a time."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        yield {index: pool.submit(run_block, index, tmp_path_factory.mktemp(f"block{index + 1}"))
               for index, code in enumerate(blocks()) if code != quickstart()}


@pytest.mark.parametrize("index", range(len(blocks())), ids=lambda i: labelled_blocks()[i][0])
def test_readme_python_block_runs_as_written(index: int, block_runs: dict[int, Future[BlockRun]]) -> None:
    code = blocks()[index]
    if code == quickstart():
        return  # run by tests/test_light_core.py and tests/test_wheel.py (see quickstart())
    expected = expected_of(code)
    run = block_runs[index].result()
    assert run.returncode == 0, f"block {labelled_blocks()[index][0]} failed:\n{code}\n--- stderr:\n{run.stderr[-4000:]}"
    for text in expected.prints:
        assert text in run.stdout, f"block {index + 1} printed:\n{run.stdout[-2000:]}"
    for text in expected.requests:
        assert text in run.sent, f"block {index + 1}: no request held {text!r}"


LOCAL_MODEL = "qwen2.5-7b-instruct"
"""A model served locally (vLLM, Ollama), which the bundled price table does not hold."""

ADAPTERS = {
    "import asyncio\nfrom agents import Agent, Runner, function_tool": 'OpenAIAgentsMemory(AgentMemory("researcher"), model=',
    "from langchain.agents import create_agent": 'LangChainMemory(AgentMemory("researcher"), model=',
    "from pydantic_ai import Agent": 'PydanticAIMemory(AgentMemory("researcher"), model=',
}
"""The framework blocks, and where each gives its adapter the model's name."""


def test_an_adapter_given_a_local_models_name_runs_its_block_unpriced(tmp_path: Path) -> None:
    # as MemoryAgent does: the run goes on, cost is None, the reason names the model, one warning
    # (the Agents SDK's block; the three adapters share the channel that decides it, and
    # tests/test_integration_channel.py constructs each of them with the name)
    start = next(iter(ADAPTERS))
    (code,) = [code for code in blocks() if code.startswith(start)]
    given = ADAPTERS[start] + '"gpt-4o"'
    assert given in code
    code = code.replace(given, ADAPTERS[start] + repr(LOCAL_MODEL))
    ledger = "middleware" if "LangChainMemory" in given else "memory"
    code += f"print('reason:', {ledger}.usage.unpriced_reason)\n"
    run = run_code("import warnings\nwarnings.simplefilter('default')\n" + code, tmp_path)
    assert run.returncode == 0, run.stderr[-4000:]
    assert f"fetch_page returned: Plans and pricing. {PRICING}" in run.stdout and "cost: None USD" in run.stdout
    assert f"reason: no price for model '{LOCAL_MODEL}'" in run.stdout
    assert run.stderr.count("UnknownModelWarning") == 1, run.stderr[-3000:]
