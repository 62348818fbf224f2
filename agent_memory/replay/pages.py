"""A research session built from real web pages, in the seed's "Token Savings Example" pattern.

Seed 002: "Iteration 1: Google Search (8KB) + 3 Web Pages (150KB)". Each iteration here is one
search followed by :data:`PAGES_PER_ITERATION` page fetches. The pages are real (each page's raw
``source.html``, pasted as a naive agent pastes a fetched page); the search results list those
pages (title, canonical URL, excerpt from the page's ``expected-metadata.json``). The assistant
turns (the step's reasoning and tool calls) are **scripted**, and the run is marked
``scripted=True`` so the report labels it as such: only the tool results are real.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, TypedDict

from agent_memory.models.messages import Message, ToolCall
from agent_memory.replay.loaders import ReplayRun, ResultHint

__all__ = ["DEFAULT_MAX_PAGES", "PAGES_PER_ITERATION", "TOOLS", "load_page_session"]

PAGES_PER_ITERATION = 3
"""Pages fetched after each search (the seed's first iteration: a search + 3 pages)."""

DEFAULT_MAX_PAGES = 24
"""Pages in the session by default: 8 iterations of a search + 3 pages (the seed's naive agent
exhausts its context by iteration 3; this goes on so the curves show the growth)."""

SYSTEM_PROMPT = (
    "You are a research agent. Use web_search to find sources and fetch_page to read them, "
    "then answer with a short report citing the pages you used."
)
TASK = "Survey these web articles: for each, say what it is about and who published it. (scripted task)"

TOOLS: tuple[dict[str, Any], ...] = (
    {"type": "function", "function": {
        "name": "web_search", "description": "Search the web; returns titles, URLs and snippets.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}},
    {"type": "function", "function": {
        "name": "fetch_page", "description": "Fetch a web page by URL; returns its HTML.",
        "parameters": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}}},
)
"""The research agent's own tools, sent with every call of the session (counted in every strategy)."""

_CANONICAL = re.compile(r"""<link[^>]+rel=["']canonical["'][^>]*href=["']([^"']+)["']""", re.I)
_OG_URL = re.compile(r"""<meta[^>]+property=["']og:url["'][^>]*content=["']([^"']+)["']""", re.I)


def _page_url(html: str, name: str) -> str:
    for pattern in (_CANONICAL, _OG_URL):
        found = pattern.search(html)
        if found and found.group(1).startswith("http"):
            return found.group(1)
    return f"https://example.org/readability/{name}"


def _page_dirs(pages_dir: Path) -> list[Path]:
    return sorted(p for p in Path(pages_dir).iterdir() if (p / "source.html").is_file())


class _Page(TypedDict):
    """One page folder, read: its name, raw HTML, URL, and metadata (title, excerpt, site name)."""

    name: str
    html: str
    url: str
    title: str
    excerpt: str
    site: str | None


def load_page_session(pages_dir: Path | str, *, max_pages: int = DEFAULT_MAX_PAGES,
                      per_iteration: int = PAGES_PER_ITERATION) -> ReplayRun:
    """The scripted research session over the first ``max_pages`` pages of ``pages_dir`` (name order).

    ``pages_dir`` holds one folder per page with ``source.html`` and optionally
    ``expected-metadata.json`` (the readability test pages). Messages: system, user task, then per
    iteration an assistant ``web_search`` call and its JSON results, then per page an assistant
    ``fetch_page`` call and the page's raw HTML; a final assistant answer closes the run.

    Raises:
        FileNotFoundError: if ``pages_dir`` has no page folders.
    """
    pages_dir = Path(pages_dir)
    if not pages_dir.is_dir():
        raise FileNotFoundError(f"no page directory at {pages_dir}")
    dirs = _page_dirs(pages_dir)[:max_pages]
    if not dirs:
        raise FileNotFoundError(f"no <page>/source.html under {pages_dir}")
    pages: list[_Page] = []
    for folder in dirs:
        html = (folder / "source.html").read_text(encoding="utf-8", errors="replace")
        meta_path = folder / "expected-metadata.json"
        meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
        pages.append({
            "name": folder.name,
            "html": html,
            "url": _page_url(html, folder.name),
            "title": (meta.get("title") or folder.name).strip(),
            "excerpt": (meta.get("excerpt") or "").strip(),
            "site": meta.get("siteName"),
        })
    messages: list[Message] = [Message(role="system", content=SYSTEM_PROMPT), Message(role="user", content=TASK)]
    hints: dict[int, ResultHint] = {}
    step = 0
    for start in range(0, len(pages), per_iteration):
        batch = pages[start : start + per_iteration]
        iteration = start // per_iteration + 1
        query = " ".join(page["title"] for page in batch)[:200]
        step += 1
        call = ToolCall(id=f"call_{step}", name="web_search", arguments=json.dumps({"query": query}, ensure_ascii=False))
        messages.append(Message(
            role="assistant",
            content=f"[scripted] Iteration {iteration}: search for the next articles to read.",
            tool_calls=(call,),
        ))
        results = [{"title": p["title"], "url": p["url"], "snippet": p["excerpt"]} for p in batch]
        hints[len(messages)] = ResultHint(type="search_results", media_type="application/json",
                                          title=f"web_search: {query[:80]}")
        messages.append(Message(role="tool", content=json.dumps({"results": results}, ensure_ascii=False, indent=1),
                                tool_call_id=call.id, name="web_search"))
        for page in batch:
            step += 1
            call = ToolCall(id=f"call_{step}", name="fetch_page", arguments=json.dumps({"url": page["url"]}))
            messages.append(Message(
                role="assistant",
                content=f"[scripted] Read \"{page['title'][:80]}\" to see what it covers.",
                tool_calls=(call,),
            ))
            hints[len(messages)] = ResultHint(type="web_content", media_type="text/html", source=page["url"],
                                              title=page["title"])
            messages.append(Message(role="tool", content=page["html"], tool_call_id=call.id, name="fetch_page"))
    messages.append(Message(role="assistant", content=f"[scripted] Report on {len(pages)} pages written."))
    return ReplayRun(source="pages", run_id=f"page-session-{len(pages)}", messages=tuple(messages), hints=hints,
                     scripted=True, tools=TOOLS)
