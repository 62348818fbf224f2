"""A turn as text: the one way raw traces are written out for a reader (a summarizer, the
compaction snapshot's recent turns, a conversation search hit, ``retrieve_memory`` of a turn id).

AutoByteus' compaction snapshot (github.com/AutoByteus/autobyteus) formats recent turns as::

    Turn 12:
      User: ...
      Assistant: ...
      Tool call: list_directory({"path": "src"})
      Tool result: ["app.ts", "parser.ts"]

Tool results appear as their bounded preview and, when the full result is in memory, the id that
brings it back (``[mem_…]``); a failed tool shows its error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import TypedDict

from agent_memory.models.messages import Media, Message, ToolCall
from agent_memory.models.traces import RawTraceItem, trace_sort_key, turn_number

__all__ = ["group_turns", "messages_from_traces", "render_turn", "render_turns", "rerender_results", "trace_line"]

_RESULT_HEAD = re.compile(r"  Tool result \[([^\]\s]+)\]")
"""The start of a stored tool result's line in a rendered turn; group 1 is its memory id."""


def _json(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def trace_line(item: RawTraceItem) -> str:
    """One raw trace as one labelled line (``User: …``, ``Assistant: …``, ``Tool call: …``,
    ``Tool result: …``); multi-line content keeps its line breaks, indented."""
    match item.trace_type:
        case "user":
            text = f"User: {item.content}"
            if item.media and item.media.images:
                text += f" [{len(item.media.images)} image(s)]"
        case "assistant":
            text = f"Assistant: {item.content}"
        case "tool_call":
            args = _json(item.tool_args) if item.tool_args is not None else ""
            text = f"Tool call: {item.tool_name or 'tool'}({args})"
        case _:
            head = f"Tool result [{item.tool_result_ref}]" if item.tool_result_ref else "Tool result"
            if item.tool_error:
                text = f"{head} ({item.tool_name or 'tool'}, error): {item.tool_error}"
            else:
                body = item.content or (_json(item.tool_result) if item.tool_result is not None else "")
                text = f"{head} ({item.tool_name or 'tool'}): {body}"
    return text.replace("\n", "\n    ")


def rerender_results(text: str, traces: Sequence[RawTraceItem]) -> str:
    """``text`` (a turn rendered by :func:`render_turn`) with the line of each tool result of
    ``traces`` rendered again from the trace as it is now, e.g. after ``forget`` redacted its
    preview: the line that starts ``Tool result [<ref>]`` and its indented continuation lines."""
    fresh = {item.tool_result_ref: "  " + trace_line(item) for item in traces if item.tool_result_ref}
    out: list[str] = []
    replacing = False
    for line in text.split("\n"):
        if replacing and line.startswith("    "):
            continue
        match = _RESULT_HEAD.match(line)
        replacing = match is not None and match.group(1) in fresh
        out.append(fresh[match.group(1)] if replacing and match is not None else line)
    return "\n".join(out)


def group_turns(items: Iterable[RawTraceItem]) -> dict[str, list[RawTraceItem]]:
    """Raw traces grouped by turn, turns in order, each turn's traces in ``seq`` order."""
    turns: dict[str, list[RawTraceItem]] = {}
    for item in sorted(items, key=trace_sort_key):
        turns.setdefault(item.turn_id, []).append(item)
    return turns


def render_turn(turn_id: str, items: Sequence[RawTraceItem]) -> str:
    """``Turn N:`` and one indented line per trace (AutoByteus' format)."""
    lines = [f"Turn {turn_number(turn_id)}:"]
    lines += ["  " + trace_line(item) for item in items]
    return "\n".join(lines)


def render_turns(items: Iterable[RawTraceItem]) -> str:
    """Every turn of ``items``, in order, separated by blank lines."""
    return "\n\n".join(render_turn(turn_id, group) for turn_id, group in group_turns(items).items())


class _TraceFields(TypedDict):
    """The :class:`Message` fields every message rebuilt from a trace copies from it."""

    id: str
    ts: float
    turn_id: str
    seq: int


def messages_from_traces(items: Iterable[RawTraceItem]) -> list[Message]:
    """The conversation messages raw traces stand for, chronological: a user message each; an
    assistant message per answer, with the tool calls recorded right after it (or alone); a tool
    message per result (its memory reference, or its error). Used to rebuild turns the working
    context no longer holds."""
    out: list[Message] = []
    for turn_id, turn in group_turns(items).items():
        for item in turn:
            common: _TraceFields = {"id": item.id, "ts": item.ts, "turn_id": turn_id, "seq": item.seq}
            if item.trace_type == "user":
                images = tuple(item.media.images) if item.media and item.media.images else ()
                out.append(Message(role="user", content=item.content, media=Media(images=images), **common))
            elif item.trace_type == "assistant":
                out.append(Message(role="assistant", content=item.content or None, reasoning=item.reasoning, **common))
            elif item.trace_type == "tool_call":
                call = ToolCall(id=item.tool_call_id or item.id, name=item.tool_name or "tool",
                                input=item.tool_args if item.tool_args is not None else {})
                last = out[-1] if out else None
                if last is not None and last.role == "assistant" and last.turn_id == turn_id:
                    out[-1] = last.model_copy(update={"tool_calls": (*last.tool_calls, call)})
                else:
                    out.append(Message(role="assistant", tool_calls=(call,), **common))
            elif item.tool_error:
                out.append(Message(role="tool", tool_call_id=item.tool_call_id or item.id, name=item.tool_name,
                                   content=item.tool_error, is_error=True, **common))
            elif item.tool_result_ref:
                out.append(Message(role="tool", tool_call_id=item.tool_call_id or item.id, name=item.tool_name,
                                   tool_result_ref=item.tool_result_ref, **common))
            else:
                body = item.content or (_json(item.tool_result) if item.tool_result is not None else "")
                out.append(Message(role="tool", tool_call_id=item.tool_call_id or item.id, name=item.tool_name,
                                   content=body, **common))
    return out
