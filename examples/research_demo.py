"""Research demo: a research agent's memory on real data, used through the memory tools.

Stores 95 real web pages (mozilla/readability test pages) and every distinct paragraph of the
HotpotQA questions in an AgentMemory, then, for 3 HotpotQA questions and 2 questions about the
web pages, calls the tools exactly as an agent would (``MemoryToolkit.dispatch`` with JSON
argument strings): ``query_memory`` with the question, then ``retrieve_memory`` of the top hit.
It prints what the agent would read, and how many tokens that was against what memory holds.

    python examples/research_demo.py [--data DIR] [--memory-dir DIR]

``--data`` defaults to ``$AGENT_MEMORY_DATA`` or ``../shared/data`` beside the project.
``--memory-dir`` defaults to a temporary directory removed at the end; a directory that already
holds the demo's memory is reused without storing again. Nothing touches the network.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rich.console import Console  # noqa: E402
from rich.panel import Panel  # noqa: E402
from rich.progress import (  # noqa: E402
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text  # noqa: E402

from actions import MemoryToolkit, ToolResult  # noqa: E402
from agent_memory import AgentMemory, MemoryConfig  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
AGENT_ID = "research-demo"
HOTPOT_FILE = "hotpotqa/hotpot_dev_distractor_60.json"


@dataclass(frozen=True)
class Question:
    """A question the demo agent researches, and how it reads the top hit."""

    text: str
    """What the agent asks query_memory."""
    retrieve: dict[str, Any]
    """retrieve_memory arguments besides the id (the transform and its parameters)."""
    answer: str | None = None
    """The gold answer, when known (HotpotQA)."""
    supporting: tuple[str, ...] = ()
    """Titles of the paragraphs that hold the answer (HotpotQA supporting facts)."""


HOTPOT_PICKS = (3, 5, 6)
"""Indices of the HotpotQA questions asked (Wallace and Gromit, Rome Protocols, Jaclyn Stapp)."""

WEB_QUESTIONS = (
    Question("Who is fighting over the Arduino trademark, and why?",
             {"around": "trademark"}),
    Question("How can people who are not on Facebook stop it from tracking them?",
             {"around": "protect"}),
)


def default_data_dir() -> Path:
    env = os.environ.get("AGENT_MEMORY_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


def progress(console: Console) -> Progress:
    return Progress(
        SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), console=console,
    )


def load_memory(memory: AgentMemory, data: Path, console: Console) -> None:
    """Store the web pages and the HotpotQA paragraphs (deferred indexing), then index them."""
    pages = sorted(p for p in (data / "webpages" / "readability").glob("*/source.html"))
    questions = json.loads((data / HOTPOT_FILE).read_text(encoding="utf-8"))
    paragraphs = dict.fromkeys(
        (title, "".join(sentences)) for question in questions for title, sentences in question["context"]
    )
    started = time.perf_counter()
    with progress(console) as bar:
        task = bar.add_task("Storing web pages", total=len(pages))
        for page in pages:
            meta_file = page.parent / "expected-metadata.json"
            meta = json.loads(meta_file.read_text(encoding="utf-8")) if meta_file.exists() else {}
            memory.store(
                page.read_text(encoding="utf-8", errors="replace"),
                type="web_content", source=page.parent.name, media_type="text/html",
                title=(meta.get("title") or "").strip() or None,
            )
            bar.advance(task)
        task = bar.add_task("Storing HotpotQA paragraphs", total=len(paragraphs))
        for title, text in paragraphs:
            memory.store(f"{title}\n{text}", type="custom", source="hotpotqa", title=title)
            bar.advance(task)
        stored = time.perf_counter()
        task = bar.add_task(f"Embedding {len(memory)} items", total=None)
        indexed = memory.flush_index()
        bar.update(task, total=indexed, completed=indexed)
    console.print(f"Stored in {stored - started:.0f} s, embedded in {time.perf_counter() - stored:.0f} s.")


def show(console: Console, name: str, arguments: dict[str, Any], result: ToolResult) -> None:
    """Print one tool call and the answer the model reads (as plain text: no rich markup)."""
    call = Text(f"{name}({json.dumps(arguments, ensure_ascii=False)})", style="bold")
    style = "green" if result.ok else "red"
    console.print(Panel(Text(result.content), title=call, title_align="left", border_style=style))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=default_data_dir(), help="the shared data directory")
    parser.add_argument("--memory-dir", type=Path, default=None, help="where the memory lives (default: temporary)")
    options = parser.parse_args(argv)
    console = Console()
    data: Path = options.data
    if not (data / HOTPOT_FILE).is_file() or not (data / "webpages" / "readability").is_dir():
        console.print(f"[red]Real data not found under {data}; pass --data or set AGENT_MEMORY_DATA.")
        return 2

    temporary = options.memory_dir is None
    memory_dir = Path(tempfile.mkdtemp(prefix="agent-memory-demo-")) if temporary else options.memory_dir
    try:
        memory = AgentMemory(AGENT_ID, memory_dir, config=MemoryConfig(index_on_store=False))
        started = time.perf_counter()
        if len(memory):
            console.print(f"Reusing the {len(memory)} items already in {memory.path}")
        else:
            load_memory(memory, data, console)
        held = sum(record.metadata.tokens for record in memory.records())
        console.print(
            f"Memory holds {len(memory)} items, {held:,} tokens in all "
            f"(ready in {time.perf_counter() - started:.0f} s).\n"
        )
        return research(memory, data, console, held)
    finally:
        if temporary:
            shutil.rmtree(memory_dir, ignore_errors=True)


def research(memory: AgentMemory, data: Path, console: Console, held: int) -> int:
    """Ask every question through the tools; print what the agent reads."""
    toolkit = MemoryToolkit(memory)
    hotpot = json.loads((data / HOTPOT_FILE).read_text(encoding="utf-8"))
    questions = [
        Question(
            hotpot[i]["question"].strip(),
            {},  # a paragraph is short: read it whole
            answer=hotpot[i]["answer"],
            supporting=tuple(dict.fromkeys(title for title, _ in hotpot[i]["supporting_facts"])),
        )
        for i in HOTPOT_PICKS
    ] + list(WEB_QUESTIONS)
    read_tokens = 0
    for number, question in enumerate(questions, 1):
        console.rule(f"[bold]Question {number}: {question.text}")
        query_args = {"query": question.text, "limit": 5}
        found = toolkit.dispatch("query_memory", json.dumps(query_args))
        show(console, "query_memory", query_args, found)
        read_tokens += memory.tokens.count(found.content)
        hits = (found.data or {}).get("hits", [])
        if not hits:
            continue
        if question.supporting:
            ranks = {hit["title"]: rank for rank, hit in enumerate(hits, 1)}
            found_at = ", ".join(f"{title!r} at rank {ranks[title]}" if title in ranks else f"{title!r} not in top 5"
                                 for title in question.supporting)
            console.print(f"Supporting paragraphs: {found_at}. Gold answer: [bold]{question.answer}")
        retrieve_args = {"id": hits[0]["id"], **question.retrieve}
        answer = toolkit.dispatch("retrieve_memory", json.dumps(retrieve_args))
        show(console, "retrieve_memory", retrieve_args, answer)
        read_tokens += memory.tokens.count(answer.content)
    console.rule()
    console.print(
        f"The agent read {read_tokens:,} tokens of tool answers for {len(questions)} questions; "
        f"memory holds {held:,} tokens ({read_tokens / held:.2%} of it entered the context)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
