"""Retrieve from Memory (``retrieve_memory``): the model reads a stored item back, shaped and capped.

The flat arguments of the tool (``around``, ``n``, ``pattern``, ...) are mapped onto the transform
models of :mod:`agent_memory.models.items`; an argument that does not belong to the chosen
transform is an error the model can act on. The answer is a header line, optional notes, the
content, and on a cut page a last line with the exact call for the next page; all of it stays
within ``max_tokens``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from actions.base import ActionArguments, MemoryAction, ToolCallError, ToolResult, format_call
from agent_memory import AgentMemory
from agent_memory.config import DEFAULT_RETRIEVE_MAX_TOKENS, MAX_RETRIEVE_MAX_TOKENS
from agent_memory.ids import validate_memory_id
from agent_memory.models.items import MemoryTransform, RetrieveResult
from agent_memory.tokens import TokenCounter
from agent_memory.transforms import PAGE_NOTICE_TOKENS, parse_transform

__all__ = ["TRANSFORM_PARAMETERS", "RetrieveMemoryAction", "RetrieveMemoryArguments", "TransformName"]

TransformName = Literal["full", "excerpt", "first_n", "last_n", "filtered", "summary"]
"""The transforms ``retrieve_memory`` offers."""

TRANSFORM_PARAMETERS: dict[str, tuple[str, ...]] = {
    "full": (),
    "excerpt": ("start_char", "end_char", "start_line", "end_line", "around", "context_chars"),
    "first_n": ("n", "unit"),
    "last_n": ("n", "unit"),
    "filtered": ("pattern", "keywords", "context_lines", "json_path", "column", "value"),
    "summary": (),
}
"""The tool arguments each transform takes; every other transform argument is refused."""

MIN_ANSWER_TOKENS = 300
"""Smallest ``max_tokens`` the tool accepts: room for the header, notes and some content."""

HEADER_TOKENS = 80
"""Most tokens of the header line (id, type, source, title, transform, page, size)."""

TITLE_TOKENS = 24
"""Most tokens of the title in the header line; a longer title is cut."""

SOURCE_TOKENS = 12
"""Most tokens of the source in the header line; a longer source is cut."""

NOTES_TOKENS = 48
"""Most tokens of the notes line (how the answer was made); longer notes are cut."""

FRAME_SLACK_TOKENS = 8
"""Tokens kept free for the line breaks between the parts of the answer."""

WORST_PAGE = 99_999
"""A page number at least as long in tokens as any real one; sizes the next-call line."""

_TRANSFORM_FIELDS = tuple(dict.fromkeys(name for names in TRANSFORM_PARAMETERS.values() for name in names))


class RetrieveMemoryArguments(ActionArguments):
    """Arguments of ``retrieve_memory``; a transform argument left out (or ``null``) is unset."""

    id: str
    """The memory id to read, like "mem_3f9a0c41b2de" (from a citation, store_memory or query_memory)."""
    transform: TransformName = "full"
    """How to shape the content: full, excerpt, first_n, last_n, filtered or summary."""
    start_char: int | None = Field(default=None, ge=0)
    """excerpt: first character, 0-based."""
    end_char: int | None = Field(default=None, ge=0)
    """excerpt: one past the last character (default: the end)."""
    start_line: int | None = Field(default=None, ge=1)
    """excerpt: first line, 1-based."""
    end_line: int | None = Field(default=None, ge=1)
    """excerpt: last line, 1-based, inclusive (default: the last line)."""
    around: str | None = Field(default=None, min_length=1)
    """excerpt: a string to find (case-insensitive); each match is shown with context_chars around it."""
    context_chars: int | None = Field(default=None, ge=0, le=20_000)
    """excerpt with around: characters shown before and after each match (default 400)."""
    n: int | None = Field(default=None, ge=1)
    """first_n / last_n: how many lines or tokens (default 50)."""
    unit: Literal["lines", "tokens"] | None = None
    """first_n / last_n: count n in "lines" (default) or "tokens"."""
    pattern: str | None = Field(default=None, min_length=1)
    """filtered: a regular expression (case-insensitive); lines that match are kept."""
    keywords: list[str] = []
    """filtered: lines containing any of these words (case-insensitive) are kept."""
    context_lines: int | None = Field(default=None, ge=0, le=50)
    """filtered with pattern/keywords: lines shown before and after each matching line (default 0)."""
    json_path: str | None = Field(default=None, min_length=1)
    """filtered, JSON content: dotted path, e.g. "results.0.url"; "*" maps over a list ("results.*.url")."""
    column: str | None = Field(default=None, min_length=1)
    """filtered, tabular JSON: keep the rows whose column equals value."""
    value: str | int | float | bool | None = None
    """filtered with column: the value to match (compared as text, so 3 matches "3")."""
    max_tokens: int | None = Field(default=None, ge=MIN_ANSWER_TOKENS, le=MAX_RETRIEVE_MAX_TOKENS)
    """Most tokens in this answer (default 4,000); longer content is split into pages."""
    page: int = Field(default=1, ge=1)
    """Which page of a long answer, 1-based."""
    raw: bool = False
    """true shows a web page as its HTML markup; false (default) as its main text."""


def _given_transform_args(args: RetrieveMemoryArguments) -> dict[str, Any]:
    """The transform arguments the model set (``None`` and ``[]`` count as unset)."""
    values = {name: getattr(args, name) for name in _TRANSFORM_FIELDS}
    return {name: value for name, value in values.items() if value is not None and value != []}


def build_transform(args: RetrieveMemoryArguments) -> MemoryTransform:
    """The transform model the flat arguments describe.

    Raises:
        ToolCallError: if an argument belongs to another transform, or ``column`` / ``value``
            comes without the other (code ``invalid_arguments``).
        TransformError: if the transform model rejects the values.
    """
    given = _given_transform_args(args)
    allowed = TRANSFORM_PARAMETERS[args.transform]
    stray = [name for name in given if name not in allowed]
    if stray:
        problems = []
        for name in stray:
            owners = " or ".join(f'"{t}"' for t, names in TRANSFORM_PARAMETERS.items() if name in names)
            problems.append(f"'{name}' only applies to transform={owners}")
        takes = ", ".join(allowed) if allowed else "no transform arguments"
        raise ToolCallError(
            f"{'; '.join(problems)}, not to transform=\"{args.transform}\" (which takes {takes}). "
            "Remove the argument, or choose the transform it belongs to."
        )
    if ("column" in given) != ("value" in given):
        raise ToolCallError(
            "'column' and 'value' go together (the rows whose column equals value are kept); give both, "
            'e.g. column="status", value="open".'
        )
    return parse_transform({"type": args.transform, **given})


def _clip(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """``text`` cut to at most ``max_tokens`` tokens (ending in "…" when cut)."""
    if counter.count(text) <= max_tokens:
        return text
    offsets = counter.token_char_offsets(text)
    return text[: offsets[max_tokens - 1]] + "…"


def _header(result: RetrieveResult, counter: TokenCounter) -> str:
    meta = result.item.metadata
    parts = [result.item.id, result.item.type, f"source: {_clip(meta.source, SOURCE_TOKENS, counter)}"]
    if meta.title:
        parts.append(f'"{_clip(meta.title, TITLE_TOKENS, counter)}"')
    parts.append(f"transform={result.transform.type}")
    if result.pages > 1:
        parts.append(f"page {result.page} of {result.pages}")
        parts.append(f"{result.tokens:,} of {result.total_tokens:,} tokens")
    else:
        parts.append(f"{result.tokens:,} tokens")
    return "[" + " · ".join(parts) + "]"


class RetrieveMemoryAction(MemoryAction[RetrieveMemoryArguments]):
    """``retrieve_memory``: one page of an item's content, shaped by a transform.

    The answer (header, notes, content, next-page line) is at most ``max_tokens`` tokens, counted
    with the memory's token counter; ``max_tokens`` left out means the memory's configured cap
    (``MemoryConfig.retrieve_max_tokens``, 4,000 by default). ``data`` holds the item's facts, the
    page's text, the paging numbers and ``next_call`` (``None`` on the last page).
    """

    name = "retrieve_memory"
    title = "Retrieve from Memory"
    Arguments = RetrieveMemoryArguments
    example = {"id": "mem_3f9a0c41b2de", "transform": "excerpt", "around": "revenue"}
    description = (
        "Read a stored memory item by its id (like mem_3f9a0c41b2de: from a citation in the "
        "conversation, from store_memory, or from query_memory). Use it when a citation or a search "
        "hit is not enough and you need the content itself; read only the part you need.\n"
        "Transforms (each takes only its own arguments):\n"
        '- "full" (default): the whole content.\n'
        '- "excerpt": a part: around="term" (each match with context_chars, default 400, on both '
        "sides), or start_line/end_line (1-based, inclusive), or start_char/end_char (0-based, end "
        "exclusive). Exactly one of these three ways.\n"
        '- "first_n" / "last_n": the first or last n lines (default 50; unit="tokens" counts tokens).\n'
        '- "filtered": lines matching pattern (a regular expression) or containing any of keywords, '
        "with context_lines around them; for JSON content json_path (\"results.*.url\") and rows "
        "whose column equals value.\n"
        '- "summary": a short extractive summary (about 400 tokens).\n'
        f"Example: {format_call('retrieve_memory', example)}\n"
        f"Limits: an answer holds at most max_tokens tokens (default {DEFAULT_RETRIEVE_MAX_TOKENS:,}, "
        f"at most {MAX_RETRIEVE_MAX_TOKENS:,}). Longer content comes in pages: the last line of a page "
        "gives the exact call for the next one (same arguments, page=N+1). Web pages are shown as "
        "their main text; raw=true gives the HTML markup."
    )

    def execute(self, memory: AgentMemory, args: RetrieveMemoryArguments) -> ToolResult:
        spec = build_transform(args)
        item_id = validate_memory_id(args.id)
        cap = args.max_tokens if args.max_tokens is not None else memory.config.retrieve_max_tokens
        counter = memory.tokens
        worst_next = self._next_call(item_id, args, WORST_PAGE)
        footer_extra = max(0, counter.count(self._footer(worst_next)) - PAGE_NOTICE_TOKENS)
        content_cap = cap - HEADER_TOKENS - NOTES_TOKENS - FRAME_SLACK_TOKENS - footer_extra
        if content_cap < 2 * PAGE_NOTICE_TOKENS:
            need = cap + 2 * PAGE_NOTICE_TOKENS - content_cap
            raise ToolCallError(
                f"max_tokens={cap} leaves no room for content with these arguments; use max_tokens={need} or more."
            )
        result = memory.retrieve(item_id, spec, max_tokens=content_cap, page=args.page, raw=args.raw)
        next_call = self._next_call(item_id, args, result.page + 1) if result.truncated else None
        lines = [_clip(_header(result, counter), HEADER_TOKENS, counter)]
        if result.notes:
            lines.append(_clip("Note: " + "; ".join(result.notes) + ".", NOTES_TOKENS, counter))
        lines.append(result.content if result.content else "(no content)")
        if next_call is not None:
            lines.append(self._footer(next_call))
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

    def _next_call(self, item_id: str, args: RetrieveMemoryArguments, page: int) -> dict[str, Any]:
        """``{"name": ..., "arguments": ...}`` of the call that reads ``page`` with the same arguments."""
        given = args.model_dump(include=args.model_fields_set, exclude={"id", "transform", "page"})
        arguments = {"id": item_id, "transform": args.transform}
        arguments.update({key: value for key, value in given.items() if value is not None and value != []})
        arguments["page"] = page
        return {"name": self.name, "arguments": arguments}

    @staticmethod
    def _footer(next_call: dict[str, Any]) -> str:
        return f"Next page: {format_call(next_call['name'], next_call['arguments'])}"
