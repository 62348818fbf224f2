"""The page session: real ReAct turns whose Search results are real web pages (large results).

Until real agent runs with large tool results are in ``../shared/data`` (issue 15, item 4), the
replay's one source of large results is assembled from two real parts:

- **The turns** are those of real ReAct HotpotQA runs (a ReAct text log, read by
  :func:`~agent_memory.replay.loaders.load_react_log`): consecutive runs in file order (a run
  without a ``Search`` step is skipped, no other), concatenated into one conversation, as one
  research agent answering question after question. Per run a ``user`` message with its real
  question; per step an ``assistant`` message whose text is the step's real Thought, verbatim,
  with a tool call for its real Action (``Search[x]``: ``search`` with ``{"entity": x}``;
  ``Lookup[k]``: ``lookup`` with ``{"keyword": k}``). ``Finish[a]`` becomes a plain assistant
  message (the Thought, then ``Answer: a``), closing the question; its "Answer is CORRECT"
  observation, the log's grading, is left out.
- **The results**: each ``Search`` result is the raw ``source.html`` of the next real page of a
  page directory (name order), pasted as a naive agent pastes a fetched page, in place of the
  Wikipedia paragraph the run saw. ``Lookup`` results are the run's real observations (a sentence).

Real: the questions, every assistant turn, every page, every Lookup observation. **Not real: the
pairing of a Search with a page** (the Thought after it was written about a Wikipedia paragraph).
The run is marked ``scripted=True`` (the field's old name: assembled, not recorded as is) so the
report keeps it out of the total over real traces.

After ``max_pages`` pages the session finishes the question under way: its remaining steps keep
their real observations (a Search included), up to its ``Finish`` (or its last step, for a run
halted without one), and ends there. So the session uses exactly ``max_pages`` pages when the
directory and the log have that many, and is a well-formed conversation (every call answered).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_memory.errors import InvalidArgumentError
from agent_memory.models.messages import Message, ToolCall
from agent_memory.replay.loaders import ReplayRun, ResultHint, load_react_log

__all__ = ["DEFAULT_MAX_PAGES", "TOOL_DEFINITIONS", "find_react_log", "load_page_session"]

DEFAULT_MAX_PAGES = 24
"""Pages in the session by default: one per Search of the first ten runs of the HotpotQA log
(a naive agent's prompt passes 1M tokens; the curves show the growth)."""

SYSTEM_PROMPT = (
    "You are a research agent answering questions one after another. Use search to get the page of "
    "an entity and lookup to find a keyword in the current page, then give the answer."
)

TOOL_DEFINITIONS: tuple[dict[str, Any], ...] = (
    {"type": "function", "function": {
        "name": "search", "description": "Search the web for an entity; returns its page.",
        "parameters": {"type": "object", "properties": {"entity": {"type": "string"}}, "required": ["entity"]}}},
    {"type": "function", "function": {
        "name": "lookup", "description": "Find a keyword in the current page; returns the next sentence with it.",
        "parameters": {"type": "object", "properties": {"keyword": {"type": "string"}}, "required": ["keyword"]}}},
)
"""The research agent's own tools, sent with every call of the session (counted in every strategy)."""

_TOOL_OF_ACTION = {"Search": ("search", "entity"), "Lookup": ("lookup", "keyword")}
"""ReAct action → (tool name, argument name); ``Finish`` is the answer, no tool."""

_STEP_TEXT = re.compile(r"\AThought (\d+): (.*)\nAction \1: (.*)\Z", re.S)
"""An assistant message of :func:`load_react_log`: ``Thought n: ...\\nAction n: ...``."""
_ACTION = re.compile(r"\A(\w+)\[(.*)\]\s*\Z", re.S)

_CANONICAL = re.compile(r"""<link[^>]+rel=["']canonical["'][^>]*href=["']([^"']+)["']""", re.I)
_OG_URL = re.compile(r"""<meta[^>]+property=["']og:url["'][^>]*content=["']([^"']+)["']""", re.I)


@dataclass(frozen=True, slots=True)
class _ReactStep:
    """One step of a ReAct run: its Thought, its Action split in two, its Observation."""

    thought: str
    """The Thought's text, verbatim (without ``Thought n:``; ``""`` when the step had none)."""
    action: str
    """``Search``, ``Lookup``, ``Finish`` (or whatever the log names; ``Action`` when unparsable)."""
    argument: str
    """What is in the brackets, verbatim (the whole Action when unparsable)."""
    observation: str | None
    """The Observation's text; ``None`` when the step had none."""


def _react_steps(run: ReplayRun) -> Iterator[_ReactStep]:
    """The steps of a run that :func:`~agent_memory.replay.loaders.load_react_log` read, in order.

    Raises:
        InvalidArgumentError: if an assistant message is not in that loader's form.
    """
    messages = run.messages
    for i, message in enumerate(messages):
        if message.role != "assistant":
            continue
        found = _STEP_TEXT.match(message.content or "")
        if found is None:
            raise InvalidArgumentError(f"run {run.run_id}: {message.content!r:.80} is not a ReAct step")
        _, thought, action = found.groups()
        parsed = _ACTION.match(action.strip())
        name, argument = parsed.groups() if parsed else ("Action", action)
        following = messages[i + 1] if i + 1 < len(messages) else None
        observation = following.content if following is not None and following.role == "tool" else None
        yield _ReactStep(thought=thought, action=name, argument=argument, observation=observation)


def find_react_log(paths: Iterable[Path | str]) -> Path | None:
    """The first ReAct text log with a ``Search`` step among these trace files and directories
    (directories searched recursively for ``.txt`` files, in name order); ``None`` when there is
    none. Paths that do not exist are passed over."""
    for path in map(Path, paths):
        candidates = sorted(path.rglob("*.txt")) if path.is_dir() else [path] if path.suffix == ".txt" else []
        for candidate in candidates:
            if candidate.is_file() and any(
                step.action == "Search" for run in load_react_log(candidate) for step in _react_steps(run)
            ):
                return candidate
    return None


@dataclass(frozen=True, slots=True)
class _Page:
    """One page folder, read: its name, raw HTML, URL and title."""

    name: str
    html: str
    url: str
    title: str


def _page_url(html: str, name: str) -> str:
    for pattern in (_CANONICAL, _OG_URL):
        found = pattern.search(html)
        if found and found.group(1).startswith("http"):
            return found.group(1)
    return f"https://example.org/readability/{name}"


def _read_page(folder: Path) -> _Page:
    html = (folder / "source.html").read_bytes().decode("utf-8", errors="replace")  # newlines as they are
    meta_path = folder / "expected-metadata.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    return _Page(name=folder.name, html=html, url=_page_url(html, folder.name),
                 title=(meta.get("title") or folder.name).strip())


def load_page_session(pages_dir: Path | str, *, react_log: Path | str, max_pages: int = DEFAULT_MAX_PAGES) -> ReplayRun:
    """The page session: the runs of ``react_log`` in file order, each Search answered by the next
    page of ``pages_dir`` (name order), until ``max_pages`` pages are used (see the module).

    ``pages_dir`` holds one folder per page with ``source.html`` (its bytes decoded as UTF-8, bad
    ones replaced, newlines untouched) and optionally ``expected-metadata.json`` (its ``title``; the
    readability test pages). ``react_log`` is a ReAct text log. Messages: the system prompt, then
    per run the user's question, its steps as assistant tool calls and tool results, and its
    answer. Pages used: ``max_pages``, or fewer when the
    directory or the log's Searches run out first. Hints: every page result is ``web_content``,
    ``text/html``, with the page's URL (canonical link, ``og:url``, else an example.org one) and
    title; the real observations get none (guessed, as in the ReAct source).

    Raises:
        FileNotFoundError: if ``pages_dir`` has no page folders or ``react_log`` does not exist.
        InvalidArgumentError: if ``max_pages`` < 1, the log has no run with a Search, or a step's
            Action is not ``Search[...]``, ``Lookup[...]`` or ``Finish[...]``.
    """
    if max_pages < 1:
        raise InvalidArgumentError(f"max_pages must be at least 1, not {max_pages}")
    pages_dir, react_log = Path(pages_dir), Path(react_log)
    if not pages_dir.is_dir():
        raise FileNotFoundError(f"no page directory at {pages_dir}")
    folders = sorted(p for p in pages_dir.iterdir() if (p / "source.html").is_file())[:max_pages]
    if not folders:
        raise FileNotFoundError(f"no <page>/source.html under {pages_dir}")
    if not react_log.is_file():
        raise FileNotFoundError(f"no ReAct log at {react_log}")
    pages = iter(folders)
    messages: list[Message] = [Message(role="system", content=SYSTEM_PROMPT)]
    hints: dict[int, ResultHint] = {}
    used = 0
    for run in load_react_log(react_log):
        steps = list(_react_steps(run))
        if not any(step.action == "Search" for step in steps):
            continue
        if used == len(folders):
            break
        messages.append(run.messages[0])  # the loader's "Question: ..."
        for step in steps:
            if step.action == "Finish":
                answer = f"Answer: {step.argument}"
                text = f"{step.thought}\n\n{answer}" if step.thought else answer
                messages.append(Message(role="assistant", content=text))
                break
            if step.action not in _TOOL_OF_ACTION:
                raise InvalidArgumentError(
                    f"{react_log}: run {run.run_id}: action {step.action}[...] is not Search, Lookup or Finish"
                )
            tool, parameter = _TOOL_OF_ACTION[step.action]
            call = ToolCall(id=f"call_{len(messages)}", name=tool,
                            arguments=json.dumps({parameter: step.argument}, ensure_ascii=False))
            messages.append(Message(role="assistant", content=step.thought, tool_calls=(call,)))
            folder = next(pages, None) if step.action == "Search" else None
            if folder is not None:
                page = _read_page(folder)
                used += 1
                hints[len(messages)] = ResultHint(type="web_content", media_type="text/html", source=page.url,
                                                  title=page.title)
                content = page.html
            else:  # a Lookup, or a Search after the last page: the run's real observation
                content = step.observation or ""
            messages.append(Message(role="tool", content=content, tool_call_id=call.id, name=tool))
    if used == 0:
        raise InvalidArgumentError(f"{react_log}: no ReAct run with a Search step")
    return ReplayRun(source="pages", run_id=f"page-session-{used}", messages=tuple(messages), hints=hints,
                     scripted=True, tool_definitions=TOOL_DEFINITIONS)
