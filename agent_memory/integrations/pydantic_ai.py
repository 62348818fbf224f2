"""agent-memory in pydantic-ai (``pydantic-ai-slim``; extra ``pydantic-ai``).

Three lines::

    memory = PydanticAIMemory(AgentMemory("researcher"), model="gpt-4o")
    agent = Agent(model, tools=[fetch], capabilities=[memory.capability], toolsets=[memory.toolset])
    result = agent.run_sync(task); memory.record(result)

- :meth:`PydanticAIMemory.history_processor` is a pydantic-ai history processor
  (:attr:`PydanticAIMemory.capability` wraps it in pydantic-ai's ``ProcessHistory``, the form
  pydantic-ai 2 takes it in: ``history_processors=`` was removed): before each model
  request it stores every new ``ToolReturnPart`` (text returns; others pass unchanged), shows it in
  full once and as its citation afterwards (when that pays), and adds the memory prompt as a system
  part while the memory tools are offered. pydantic-ai keeps a processor's output as the run's
  history, so a cited result stays cited in ``result.all_messages()``; its full content is in
  memory under the id the citation names.
- :attr:`PydanticAIMemory.toolset` holds the memory tools. pydantic-ai prepares a request's tools
  before its history is processed, so they are offered from the request after the one where
  citing would first pay for them and the memory prompt (or from the start when the memory already
  holds items, or the policy cites at once), and stay on
  (:attr:`~agent_memory.integrations.channel.MemoryChannel.tools_due`).
- :meth:`PydanticAIMemory.record` prices a finished run's requests (cache reads and writes as
  reported) with prompt caching as the provider bills it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Sequence
from typing import Any, cast

from agent_memory.extras import require_extra

require_extra("pydantic-ai", "agent_memory.integrations.pydantic_ai")

from pydantic_ai import messages as pai  # noqa: E402
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.tools import Tool
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset

from agent_memory.integrations.channel import FixedToolsAdapter
from agent_memory.llm.chat import Usage
from agent_memory.models.messages import Message, ToolCall
from agent_memory.pricing import Cost

__all__ = ["PydanticAIMemory", "pydantic_ai_to_messages"]


Where = tuple[int, int]
"""(index of the pydantic-ai message, index of its part) a converted message came from."""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(part if isinstance(part, str) else "" for part in content)
    return json.dumps(content, default=str)


def pydantic_ai_to_messages(history: Sequence[pai.ModelMessage]) -> tuple[list[Message], list[Where]]:
    """pydantic-ai messages as agent-memory messages, and where each came from.

    A request's parts become one message each (system, user, tool; a retry prompt a user message);
    a response becomes one assistant message (its text and tool calls). A ``ToolReturnPart`` whose
    content is not text is kept as an error-flagged tool message (never stored or cited).
    """
    out: list[Message] = []
    where: list[Where] = []
    for n, message in enumerate(history):
        if isinstance(message, pai.ModelResponse):
            text = "".join(part.content for part in message.parts if isinstance(part, pai.TextPart))
            calls = tuple(ToolCall(id=part.tool_call_id, name=part.tool_name, arguments=part.args_as_json_str())
                          for part in message.parts if isinstance(part, pai.ToolCallPart))
            out.append(Message(role="assistant", content=text or None, tool_calls=calls))
            where.append((n, -1))
            continue
        for p, part in enumerate(message.parts):
            if isinstance(part, pai.ToolReturnPart):
                content: Any = part.content
                text_only = isinstance(content, str) and type(part) is pai.ToolReturnPart
                out.append(Message(role="tool", tool_call_id=part.tool_call_id, name=part.tool_name,
                                   content=content if text_only else json.dumps(content, default=str),
                                   is_error=not text_only))
            elif isinstance(part, pai.SystemPromptPart):
                out.append(Message(role="system", content=part.content))
            elif isinstance(part, pai.UserPromptPart):
                out.append(Message(role="user", content=_text(part.content)))
            elif isinstance(part, pai.RetryPromptPart):
                if part.tool_name and part.tool_call_id:
                    out.append(Message(role="tool", tool_call_id=part.tool_call_id, name=part.tool_name,
                                       content=part.model_response(), is_error=True))
                else:
                    out.append(Message(role="user", content=part.model_response()))
            else:
                continue
            where.append((n, p))
    return out, where


class PydanticAIMemory(FixedToolsAdapter):
    """agent-memory for one pydantic-ai conversation (module docstring); the arguments are
    :class:`~agent_memory.integrations.channel.FixedToolsAdapter`'s.

    Attributes:
        toolset: the memory tools as a pydantic-ai toolset (offered while :attr:`enabled`).
        capability: :meth:`history_processor` as the pydantic-ai capability for ``capabilities``.
    """

    def _make_tools(self) -> None:
        functions = FunctionToolset([self._tool(schema) for schema in self.tool_definitions])
        self.toolset: AbstractToolset[Any] = functions.filtered(lambda ctx, tool: self.enabled)
        self.capability: ProcessHistory[Any] = ProcessHistory(self.history_processor)
        self._recorded: set[int] = set()

    def _tool(self, schema: dict[str, Any]) -> Tool[Any]:
        name = str(schema["name"])

        async def call(**arguments: Any) -> str:
            result = await asyncio.to_thread(self.channel.dispatch, name, arguments)
            return result.content

        return Tool.from_schema(call, name=name, description=str(schema.get("description", "")),
                                json_schema=dict(schema.get("parameters") or {"type": "object", "properties": {}}))

    def history_processor(self, history: list[pai.ModelMessage]) -> list[pai.ModelMessage]:
        """The history to send: results stored, shown once, then cited; the memory prompt as a
        system part of the first request while the memory tools are offered.

        Raises:
            StoreError: if the memory cannot be written (the run stops: nothing is lost).
        """
        enabled = self.enabled  # what the toolset was prepared with for this request
        messages, where = pydantic_ai_to_messages(history)
        presented = self.channel.present(messages)
        out = list(history)
        for index, text in presented.shown.items():
            n, p = where[index]
            request = out[n]
            assert isinstance(request, pai.ModelRequest)
            part = request.parts[p]
            if type(part) is pai.ToolReturnPart and part.content != text:
                parts = list(request.parts)
                parts[p] = dataclasses.replace(cast(Any, part), content=text)
                out[n] = dataclasses.replace(request, parts=parts)
        prompt = self.channel.memory_prompt
        if enabled and prompt and out and isinstance(out[0], pai.ModelRequest):
            first = out[0]
            if not any(isinstance(part, pai.SystemPromptPart) and part.content == prompt for part in first.parts):
                out[0] = dataclasses.replace(first, parts=[*first.parts, pai.SystemPromptPart(content=prompt)])
        return out

    def record(self, result: Any) -> Cost | None:
        """Price a finished run's requests (``result.new_messages()``' responses, each once) and
        add them to ``channel.usage``; returns their cost (``None``: not priced)."""
        total: Cost | None = None
        for message in result.new_messages():
            if not isinstance(message, pai.ModelResponse) or id(message) in self._recorded:
                continue
            self._recorded.add(id(message))
            usage = message.usage
            cost = self.channel.record_usage(Usage(
                prompt_tokens=usage.input_tokens, completion_tokens=usage.output_tokens,
                cached_tokens=usage.cache_read_tokens, cache_write_tokens=usage.cache_write_tokens))
            if cost is not None:
                total = cost if total is None else total + cost
        return total
