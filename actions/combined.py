"""The one-tool form: Store, Retrieve and Query as one ``memory`` tool with an ``op`` argument.

Anthropic's memory tool is one tool with a ``command`` field; one tool pays the JSON wrapper of a
tool definition once and shares arguments (``tags``) between operations. Its arguments model is
built from the separate actions' models (they stay the source of every field, bound and
description): ``op`` plus the union of their fields, all optional; after ``op`` is read, the
arguments are validated by that operation's own model and the operation runs. ``op`` defaults to
``retrieve`` when retrieving is offered, so a citation's call is simply ``memory(id="mem_…")``.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar, Literal

from pydantic import create_model

from actions.base import ActionArguments, InstanceSchemas, MemoryAction, ToolCallError, ToolJsonSchema, ToolResult, format_call
from actions.store import MAX_CONTENT_CHARS, StoreMemoryUploadAction
from agent_memory import AgentMemory
from agent_memory.presentation.offer import CAPABILITIES, Capability

__all__ = ["CombinedMemoryAction"]

OP_SUMMARIES: dict[str, str] = {
    "compact": "summarize older turns at a task break to free context (nothing is lost)",
    "retrieve": "read a stored result again (its citation gives the call): all of it, or only the part you need",
    "query": "search stored results and notes by meaning and keywords (to find an id you lost, or before fetching again)",
    "store": "save notes for later, outside your context (tool results are saved already)",
    "forget": "delete a stored item for good (wrong, outdated or sensitive)",
    "pin": "keep an item (id) or a fact word for word through every compaction",
}
"""One phrase per operation, for the tool's description."""


class CombinedMemoryAction(InstanceSchemas[Any]):
    """One ``memory`` tool for the given actions (each a different capability).

    Args:
        actions: the separate actions it stands for (copies are made; their answers name the
            ``memory`` tool in the calls they suggest).

    Raises:
        ValueError: if ``actions`` is empty or two share a capability.
    """

    name: ClassVar[str] = "memory"
    title: ClassVar[str] = "Memory"
    capability: ClassVar[Capability] = "retrieve"

    def __init__(self, actions: list[MemoryAction[Any]]) -> None:
        if not actions:
            raise ValueError("a combined memory tool needs at least one action")
        inner: dict[str, MemoryAction[Any]] = {}
        for action in actions:
            if action.capability in inner:
                raise ValueError(f"two actions for {action.capability!r}")
            clone = copy.copy(action)
            clone.retrieve_call = self.name
            inner[action.capability] = clone
        self.inner = inner
        self.ops: tuple[str, ...] = tuple(dict.fromkeys(cap for cap in ("retrieve", *CAPABILITIES) if cap in inner))
        default_op = self.ops[0]
        fields: dict[str, Any] = {}
        if len(self.ops) > 1:  # one operation needs no op argument
            fields["op"] = (Literal[self.ops], default_op)
        for op in self.ops:
            for key, info in inner[op].Arguments.model_fields.items():
                if key in fields:
                    continue
                optional = copy.copy(info)
                optional.default = None
                optional.default_factory = None
                fields[key] = (info.annotation | None, optional)  # type: ignore[operator]
        self.Arguments = create_model("MemoryArguments", __base__=ActionArguments, **fields)
        first = inner[default_op]
        self.example = dict(first.example) if default_op == "retrieve" else {"op": default_op, **first.example}
        summaries = dict(OP_SUMMARIES)
        if isinstance(inner.get("store"), StoreMemoryUploadAction):  # it takes longer text in parts
            summaries["store"] += (f"; text over {MAX_CONTENT_CHARS:,} characters goes in parts: more=true on each "
                                   "part but the last, with the upload handle the first answer gives")
        if len(self.ops) > 1:
            parts = [f'op="{op}"{" (default)" if op == default_op else ""}: {summaries[op]}.' for op in self.ops]
        else:
            parts = [summaries[default_op][0].upper() + summaries[default_op][1:] + "."]
        limits = " Answers hold at most 4,000 tokens; a cut one ends with the call for its next page." if (
            "retrieve" in inner) else ""
        self.description = (
            "Your memory outside the context. " + " ".join(parts) + limits
            + f" Example: {format_call(self.name, self.example)}"
        )

    def execute(self, memory: AgentMemory, args: Any) -> ToolResult:
        op = getattr(args, "op", self.ops[0])
        action = self.inner[op]
        given = {key: value for key, value in args.model_dump(exclude_unset=True, exclude={"op"}).items()
                 if value is not None}
        stray = [key for key in given if key not in action.Arguments.model_fields]
        if stray:
            takes = ", ".join(action.Arguments.model_fields)
            raise ToolCallError(
                f"{', '.join(repr(key) for key in stray)} {'does' if len(stray) == 1 else 'do'} not apply to "
                f'op="{op}", which takes: {takes}. Example: {format_call(self.name, self.example)}'
            )
        return action.execute(memory, action.parse_arguments(given))
