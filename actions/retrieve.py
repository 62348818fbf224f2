"""Retrieve from Memory (``retrieve_memory``): the model reads a stored item back, shaped and capped.

The tool's arguments are few on purpose (every token of a tool schema is paid on every
call): which part to read is said by *one* of ``around`` (an excerpt around a term),
``lines`` (a Python slice of lines), ``pattern`` (the lines a regular expression matches) or
``summary``; none of them reads the whole item. They map onto the transform models of
:mod:`agent_memory.models.items` (``excerpt``, ``first_n`` / ``last_n``, ``filtered``, ``summary``,
``full``), which the library API offers in full. The answer is a header line, optional notes, the
content, and on a cut page a last line with the exact call for the next page; all of it stays
within the memory's ``retrieve_max_tokens``.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from actions.base import ActionArguments, MemoryAction, ToolCallError, ToolResult, format_call
from agent_memory import AgentMemory
from agent_memory.errors import quoted
from agent_memory.ids import legacy_turn_memory_id, turn_memory_id, validate_agent_id, validate_memory_id
from agent_memory.limits import shorten
from agent_memory.models.items import (
    ExcerptTransform,
    FilteredTransform,
    FirstNTransform,
    FullTransform,
    LastNTransform,
    MemoryTransform,
    RetrieveResult,
    SummaryTransform,
)
from agent_memory.tokens import TokenCounter
from agent_memory.transforms import PAGE_NOTICE_TOKENS

__all__ = [
    "MAX_AROUND_CHARS",
    "MAX_PATTERN_CHARS",
    "RetrieveMemoryAction",
    "RetrieveMemoryArguments",
    "build_transform",
    "parse_line_slice",
]

MAX_AROUND_CHARS = 200
"""Longest ``around`` term a model may send, in characters (a term, not a passage)."""

MAX_PATTERN_CHARS = 200
"""Longest regular expression a model may send, in characters; the library bounds its run time."""

MAX_ID_CHARS = 40
"""Longest ``id`` accepted (ids are 16 characters; quotes and spaces around them are forgiven)."""

MAX_LINES_CHARS = 24
"""Longest ``lines`` slice accepted, in characters ("-1000000:2000000" fits)."""

MAX_PAGE = 100_000
"""Highest page number accepted (a 16k-token page of a 1 GB text is below it)."""

HEADER_TOKENS = 80
"""Most tokens of the header line (id, type, source, title, what was read, page, size)."""

TITLE_TOKENS = 24
"""Most tokens of the title in the header line; a longer title is cut."""

SOURCE_TOKENS = 12
"""Most tokens of the source in the header line; a longer source is cut."""

NOTES_TOKENS = 48
"""Most tokens of the notes line (how the answer was made); longer notes are cut."""

FRAME_SLACK_TOKENS = 8
"""Tokens kept free for the line breaks between the parts of the answer."""

SHORT_FOOTER = "Next page: the same call with page={page}"
"""The next-page line when repeating the whole call would not fit its space on the page."""

_SLICE = re.compile(r"^\s*(-?\d*)\s*:\s*(-?\d*)\s*$")
_TURN_ID = re.compile(r"turn_\d{4,}")
_PART_ARGUMENTS = ("around", "lines", "pattern", "summary")


class RetrieveMemoryArguments(ActionArguments):
    """Arguments of ``retrieve_memory``: an id and at most one way to choose a part."""

    id: str = Field(max_length=MAX_ID_CHARS)
    around: str | None = Field(default=None, max_length=MAX_AROUND_CHARS)
    """text to show in context"""
    lines: str | None = Field(default=None, max_length=MAX_LINES_CHARS)
    """slice of lines, e.g. 100:200 or -50:"""
    pattern: str | None = Field(default=None, max_length=MAX_PATTERN_CHARS)
    """regex; matching lines only"""
    summary: bool = False
    page: int | None = Field(default=None, ge=1)


def parse_line_slice(text: str) -> MemoryTransform:
    """The transform a Python slice of lines stands for (0-based, end exclusive, as ``list[a:b]``).

    ``":50"`` → the first 50 lines, ``"-50:"`` → the last 50, ``"100:200"`` → lines 101-200
    (1-based), ``"100:"`` → line 101 to the end, ``":"`` → everything.

    Raises:
        ToolCallError: if ``text`` is not a slice, or mixes a negative bound with another bound
            (the tool cannot know the line count in advance; the error says what to send instead).
    """
    found = _SLICE.match(text)
    if not found:
        raise ToolCallError(
            f"lines={quoted(text)} is not a slice of lines; use Python slice notation: "
            '":50" (first 50), "-50:" (last 50) or "100:200" (lines 101-200).'
        )
    start = int(found.group(1)) if found.group(1) not in ("", "-") else None
    stop = int(found.group(2)) if found.group(2) not in ("", "-") else None
    if start is None and stop is None:
        return FullTransform()
    if start is None and stop is not None and stop > 0:
        return FirstNTransform(n=stop, unit="lines")
    if stop is None and start is not None and start < 0:
        return LastNTransform(n=-start, unit="lines")
    if start is not None and start >= 0 and (stop is None or stop > start):
        return ExcerptTransform(start_line=start + 1, end_line=stop)
    raise ToolCallError(
        f"lines={quoted(text)} selects nothing this tool can read; use \":N\" (first N lines), "
        '"-N:" (last N lines) or "A:B" with 0 <= A < B (lines A+1 to B).'
    )


def build_transform(args: RetrieveMemoryArguments) -> MemoryTransform:
    """The transform model the flat arguments describe (``full`` when none is given).

    Raises:
        ToolCallError: if more than one of ``around``, ``lines``, ``pattern``, ``summary`` is
            given, or ``lines`` is not a usable slice (code ``invalid_arguments``).
    """
    given = [name for name in _PART_ARGUMENTS if getattr(args, name) not in (None, False)]
    if len(given) > 1:
        raise ToolCallError(
            f"give one of around, lines, pattern or summary, not {' and '.join(given)}: each reads a "
            "different part. Make one call per part you need."
        )
    if args.around is not None:
        if not args.around.strip():
            raise ToolCallError("around is empty: give the term to find, e.g. around=\"refund\".")
        return ExcerptTransform(around=args.around)
    if args.lines is not None:
        return parse_line_slice(args.lines)
    if args.pattern is not None:
        if not args.pattern:
            raise ToolCallError("pattern is empty: give a regular expression, e.g. pattern=\"error|warning\".")
        return FilteredTransform(pattern=args.pattern)
    if args.summary:
        return SummaryTransform()
    return FullTransform()


def _header(result: RetrieveResult, counter: TokenCounter) -> str:
    meta = result.item.metadata
    parts = [result.item.id, result.item.type, f"source: {shorten(meta.source, SOURCE_TOKENS, counter=counter)}"]
    if meta.title:
        parts.append(f'"{shorten(meta.title, TITLE_TOKENS, counter=counter)}"')
    parts.append(_read_as(result.transform))
    if result.pages > 1:
        parts.append(f"page {result.page} of {result.pages}")
        parts.append(f"{result.tokens:,} of {result.total_tokens:,} tokens")
    else:
        parts.append(f"{result.tokens:,} tokens")
    return "[" + " · ".join(parts) + "]"


def _read_as(spec: MemoryTransform) -> str:
    """What part was read, in the header's words."""
    match spec:
        case ExcerptTransform(around=str(term)):
            return f"around {quoted(term, 40)}"
        case ExcerptTransform():  # the slice as sent (0-based), then the line numbers (1-based)
            first = spec.start_line or 1
            stop = spec.end_line if spec.end_line is not None else ""
            end = spec.end_line if spec.end_line is not None else "end"
            return f'lines="{first - 1}:{stop}": lines {first}-{end} counted from 1'

        case FirstNTransform():
            return f"first {spec.n} lines"
        case LastNTransform():
            return f"last {spec.n} lines"
        case FilteredTransform():
            return "matching lines"
        case SummaryTransform():
            return "summary"
    return "full"


class RetrieveMemoryAction(MemoryAction[RetrieveMemoryArguments]):
    """``retrieve_memory``: one page of an item's content, or of one part of it.

    The answer (header, notes, content, next-page line) is at most the memory's
    ``MemoryConfig.retrieve_max_tokens`` tokens (4,000 by default), counted with the memory's
    token counter. ``data`` holds the item's facts, the transform applied, the page's text, the
    paging numbers and ``next_call`` (``None`` on the last page).

    A turn id (``turn_0012``) reads that compacted turn of *this agent's* conversation: the item
    :func:`~agent_memory.ids.turn_memory_id` derives from the turn id and the agent id, so a
    sub-agent sharing its parent's memory reads its own ``turn_0001``, not the parent's. A memory
    written before turn items were scoped by agent keeps them under
    :func:`~agent_memory.ids.legacy_turn_memory_id`, a key without the agent; such an item carries
    no owner (its ``extra`` holds only ``turn_ids``), and the kernel of those versions wrote it for
    whichever agent compacted the turn first. It is read only for the memory's own agent, and only
    from the memory's own layer (never from a fork's parent items): a sub-agent sharing the memory
    never gets it, and an isolated sub-agent never gets its parent's.

    Args:
        agent_id: the agent whose turns a turn id names (``MemoryManager.agent_id``; the toolkit
            passes its manager's); ``None``: the agent of the memory the call runs on.

    Raises:
        InvalidIdError: if ``agent_id`` is malformed.
    """

    name = "retrieve_memory"
    title = "Retrieve from Memory"
    capability = "retrieve"
    Arguments = RetrieveMemoryArguments
    example = {"id": "mem_3f9a0c41b2de", "around": "refund"}
    description = "Read a cited result again: all of it, or one part. Long answers come in pages."
    """Short: the tool goes with every call from the first one of a cached conversation, and the
    citations it serves show the call itself (``retrieve_memory(id="mem_...")``); an answer that is
    cut ends with the exact call for its next page."""

    def __init__(self, agent_id: str | None = None) -> None:
        self.agent_id = validate_agent_id(agent_id) if agent_id is not None else None

    def execute(self, memory: AgentMemory, args: RetrieveMemoryArguments) -> ToolResult:
        spec = build_transform(args)
        item_id = self._item_id(memory, args.id)
        page = args.page or 1
        if page > MAX_PAGE:
            raise ToolCallError(f"page {page:,} does not exist; pages are numbered from 1.")
        cap = memory.config.retrieve_max_tokens
        counter = memory.tokens
        # The next-page line repeats the call; when that would not fit the space a page keeps
        # for it (a long pattern in many-token characters), it names only the page to change.
        exact = counter.count(self._footer(self._next_call(item_id, args, MAX_PAGE))) <= PAGE_NOTICE_TOKENS
        content_cap = cap - HEADER_TOKENS - NOTES_TOKENS - FRAME_SLACK_TOKENS
        result = memory.retrieve(item_id, spec, max_tokens=content_cap, page=page)
        next_call = self._next_call(item_id, args, result.page + 1) if result.truncated else None
        lines = [shorten(_header(result, counter), HEADER_TOKENS, counter=counter)]
        if result.notes:
            lines.append(shorten("Note: " + "; ".join(result.notes) + ".", NOTES_TOKENS, counter=counter))
        lines.append(result.content if result.content else "(no content)")
        if next_call is not None:
            lines.append(self._footer(next_call) if exact else SHORT_FOOTER.format(page=result.page + 1))
        meta = result.item.metadata
        return ToolResult.success(
            "\n".join(lines),
            {
                "id": result.item.id,
                "type": result.item.type,
                "source": meta.source,
                "title": meta.title,
                "transform": result.transform.model_dump(mode="json"),
                "content": result.content,
                "tokens": result.tokens,
                "total_tokens": result.total_tokens,
                "page": result.page,
                "pages": result.pages,
                "max_tokens": cap,
                "notes": list(result.notes),
                "next_call": next_call,
            },
        )

    def _item_id(self, memory: AgentMemory, given: str) -> str:
        """The memory id to read: ``given``, or the item of this agent's compacted turn
        (``turn_0012``; see the class docstring for memories written before turn ids were scoped).

        Raises:
            ToolCallError: for a turn that was not compacted (it is still in the conversation).
            InvalidIdError: for an id that is neither.
        """
        cleaned = given.strip().strip("'\"`")
        if _TURN_ID.fullmatch(cleaned):
            owner = self.agent_id if self.agent_id is not None else memory.agent_id
            item_id = turn_memory_id(cleaned, agent_id=owner)
            if item_id in memory:
                return item_id
            legacy = legacy_turn_memory_id(cleaned)
            fork = memory.fork
            if owner == memory.agent_id and legacy in memory and (fork is None or legacy not in fork.item_ids):
                return legacy
            raise ToolCallError(
                f"{cleaned} has not been compacted: it is still in the conversation above, or does not "
                "exist. Only compacted turns are read back by id.",
                code="not_found",
            )
        return validate_memory_id(given)

    def _next_call(self, item_id: str, args: RetrieveMemoryArguments, page: int) -> dict[str, Any]:
        """``{"name": ..., "arguments": ...}`` of the call that reads ``page`` with the same arguments."""
        arguments: dict[str, Any] = {"id": item_id}
        for name in _PART_ARGUMENTS:
            value = getattr(args, name)
            if value not in (None, False):
                arguments[name] = value
        arguments["page"] = page
        return {"name": self.retrieve_call, "arguments": arguments}

    @staticmethod
    def _footer(next_call: dict[str, Any]) -> str:
        return f"Next page: {format_call(next_call['name'], next_call['arguments'])}"
