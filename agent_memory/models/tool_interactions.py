"""The TOOL_INTERACTION view (AutoByteus' derived view, github.com/AutoByteus/autobyteus,
autobyteus/memory/): a tool call paired with its result, never stored.

Built from raw traces by :func:`build_tool_interactions`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, JsonValue

from agent_memory.models.traces import RawTraceItem

__all__ = ["ToolInteraction", "ToolInteractionStatus", "build_tool_interactions"]

ToolInteractionStatus = Literal["PENDING", "SUCCESS", "ERROR"]
"""``PENDING``: called, no result yet; ``SUCCESS``: a result without error; ``ERROR``: a result
with ``tool_error`` set."""


class ToolInteraction(BaseModel):
    """A tool call paired with its result by ``tool_call_id`` (AutoByteus' view): never stored."""

    model_config = ConfigDict(frozen=True)

    tool_call_id: str
    """The call id shared by the call and its result."""
    turn_id: str
    """The turn of the call (its result keeps it)."""
    seq: int
    """``seq`` of the first trace of the interaction (the call, or an orphan result)."""
    tool_name: str | None = None
    """The tool's name; ``None`` if neither trace names it."""
    arguments: dict[str, JsonValue] | None = None
    """The call's parsed arguments; ``None`` if the call trace is missing (or had none)."""
    result: JsonValue = None
    """The bounded preview of the result; ``None`` while pending or when there was none."""
    result_ref: str | None = None
    """The AgentMemory id of the full result, when stored."""
    error: str | None = None
    """The tool's error message; ``None`` unless ``status`` is ``ERROR``."""
    status: ToolInteractionStatus = "PENDING"
    """``PENDING``, ``SUCCESS`` or ``ERROR``."""


def build_tool_interactions(traces: Iterable[RawTraceItem]) -> list[ToolInteraction]:
    """Pair ``tool_call`` and ``tool_result`` traces by ``tool_call_id``.

    A call without a result is ``PENDING``; a result with ``tool_error`` is ``ERROR``, without it
    ``SUCCESS``; a result without its call (the call was archived) still gives an interaction.
    If a call has several results, the last one in ``traces`` counts. Traces of other types and
    tool traces without a call id are ignored.

    Returns:
        One interaction per call id, in the order of their first trace in ``traces``.
    """
    found: dict[str, dict[str, Any]] = {}
    for trace in traces:
        if trace.trace_type not in ("tool_call", "tool_result") or not trace.tool_call_id:
            continue
        entry = found.setdefault(
            trace.tool_call_id,
            {"tool_call_id": trace.tool_call_id, "turn_id": trace.turn_id, "seq": trace.seq},
        )
        if trace.tool_name and (trace.trace_type == "tool_call" or "tool_name" not in entry):
            entry["tool_name"] = trace.tool_name
        if trace.trace_type == "tool_call":
            entry["turn_id"], entry["arguments"] = trace.turn_id, trace.tool_args
            continue
        if trace.tool_args is not None and entry.get("arguments") is None:
            entry["arguments"] = trace.tool_args
        entry["result"], entry["result_ref"] = trace.tool_result, trace.tool_result_ref
        entry["error"] = trace.tool_error
        entry["status"] = "ERROR" if trace.tool_error else "SUCCESS"
    return [ToolInteraction(**entry) for entry in found.values()]
