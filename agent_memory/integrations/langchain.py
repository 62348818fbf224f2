"""agent-memory as LangChain v1 agent middleware (extra ``langchain``).

Three lines::

    middleware = LangChainMemory(AgentMemory("researcher"), model="gpt-4o")
    agent = create_agent(ChatOpenAI(model="gpt-4o"), tools=[fetch], middleware=[middleware])
    agent.invoke({"messages": [{"role": "user", "content": task}]}, {"configurable": {"thread_id": "t1"}})

:class:`LangChainMemory` replaces ``ContextEditingMiddleware``: where LangChain's
``ClearToolUsesEdit`` throws old tool results away (``[cleared]``), the middleware stores every
result on its way into the model call and shows it in full once, then as its citation with a memory
id the model can read back. Before each model call (``wrap_model_call`` / ``awrap_model_call``) it

- stores each new ``ToolMessage`` (text results; error results and the memory tools' own answers
  are not stored), under an id derived from the thread, the tool call id and the result's text
  (a call id the model used before keeps each of its results);
- writes the shown text (full, capped or citation) into copies of the ``ToolMessage`` objects
  (every other message is passed as is; the agent's state is not changed);
- sends the memory tools (:attr:`LangChainMemory.tools`, registered with the agent by the
  middleware) only in the calls that need them (``retrieve_memory`` once a result is cited), and
  adds the memory prompt to the system message in those calls;
- records the answer's ``usage_metadata`` (cache reads and writes included) and prices it.

Each LangGraph thread (``configurable.thread_id``) is its own conversation; without one, the
conversation is ``default``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agent_memory.extras import require_extra

require_extra("langchain", "agent_memory.integrations.langchain")

from langchain.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool

from agent_memory.agent.prompt import MEMORY_PROMPT
from agent_memory.ids import MAX_AGENT_ID_CHARS
from agent_memory.integrations.channel import MemoryChannel, UsageLedger, channel_prices
from agent_memory.llm.chat import Usage
from agent_memory.memory import AgentMemory
from agent_memory.models.messages import Message, ToolCall
from agent_memory.presentation.offer import ToolOffer
from agent_memory.presentation.policy import PresentationPolicy
from agent_memory.pricing import PriceModel

__all__ = ["LangChainMemory", "langchain_to_messages"]


def _text(content: Any) -> str:
    """The text of a LangChain message's content (a string, or blocks with ``text``)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(block if isinstance(block, str) else str(block.get("text", "")) for block in content
                       if isinstance(block, str | dict))
    return str(content)


def langchain_to_messages(messages: Sequence[BaseMessage]) -> list[Message]:
    """LangChain messages as agent-memory messages, one for one (same order, same indices).

    A ``ToolMessage`` whose content is not text (images, files) or whose ``status`` is ``error`` is
    kept as an error-flagged tool message: it is never stored or cited.
    """
    out: list[Message] = []
    names: dict[str, str] = {}
    for message in messages:
        if isinstance(message, ToolMessage):
            text_only = isinstance(message.content, str)
            out.append(Message(role="tool", tool_call_id=message.tool_call_id or "unknown",
                               name=message.name or names.get(message.tool_call_id),
                               content=_text(message.content) if text_only else json.dumps(message.content, default=str),
                               is_error=message.status == "error" or not text_only))
        elif isinstance(message, AIMessage):
            calls = []
            for call in message.tool_calls:
                call_id = call.get("id") or f"call_{len(names)}"
                names[call_id] = call["name"]
                calls.append(ToolCall(id=call_id, name=call["name"], arguments=json.dumps(call.get("args") or {})))
            out.append(Message(role="assistant", content=_text(message.content) or None, tool_calls=tuple(calls)))
        elif isinstance(message, SystemMessage):
            out.append(Message(role="system", content=_text(message.content)))
        else:
            out.append(Message(role="user", content=_text(message.content)))
    return out


def _conversation(thread_id: Any) -> str:
    """A valid conversation id for a LangGraph thread id (hashed when it is not one already)."""
    text = str(thread_id)
    if text and len(text) <= MAX_AGENT_ID_CHARS and all(c.isalnum() or c in "_-." for c in text) and text[0].isalnum():
        return text
    return "thread-" + hashlib.sha256(text.encode()).hexdigest()[:16]


class LangChainMemory(AgentMiddleware):
    """LangChain v1 agent middleware: tool results stored, shown once, cited, retrievable
    (module docstring).

    Args:
        memory: where results are stored.
        model: the chat model's name, for prices (``PriceModel.lookup``); ``None``: give
            ``prices``, or usage is counted and not priced and swaps are decided by tokens. A name
            the price table lacks runs unpriced (see :class:`~agent_memory.integrations.channel.MemoryChannel`).
        prices: the price model (wins over ``model``).
        policy: when results are shown in full or cited; ``None``: ``PresentationPolicy()``.
        offer: when each memory tool is offered; ``None``: ``ToolOffer()``.
        memory_prompt: the system-prompt section sent with the calls that offer a memory tool;
            ``None``: none.

    Attributes:
        tools: the memory tools as LangChain tools (the agent registers them; they are sent to the
            model only in the calls that need them).
    """

    def __init__(
        self,
        memory: AgentMemory,
        *,
        model: str | None = None,
        prices: PriceModel | None = None,
        policy: PresentationPolicy | None = None,
        offer: ToolOffer | None = None,
        memory_prompt: str | None = MEMORY_PROMPT,
    ) -> None:
        super().__init__()
        self.memory = memory
        found, _ = channel_prices(model, prices)  # looked up once: each conversation's channel takes it
        self._options: dict[str, Any] = {"model": model, "prices": found, "policy": policy, "offer": offer,
                                         "memory_prompt": memory_prompt}
        self._channels: dict[str, MemoryChannel] = {}
        self._lock = threading.Lock()
        first = self.channel("default")
        self.tools: list[BaseTool] = [self._tool(tool["function"]) for tool in first.toolkit.tool_definitions()]

    def __repr__(self) -> str:
        return f"LangChainMemory({self.memory!r})"

    @property
    def usage(self) -> UsageLedger:
        """Every conversation's model calls and what they cost, summed (a new ledger at each read;
        one conversation's: ``channel(id).usage``): ``usage.total_usd`` (``None``: nothing
        priced, ``usage.unpriced_reason`` says why)."""
        with self._lock:
            channels = list(self._channels.values())
        first = channels[0].usage
        total = UsageLedger(prices=first.prices, unpriced_reason=first.unpriced_reason)
        for channel in channels:
            total.absorb(channel.usage)
        return total

    def channel(self, conversation_id: str | None = None) -> MemoryChannel:
        """The channel of conversation ``conversation_id`` (``None``: the current LangGraph thread's,
        or ``default`` outside a graph run)."""
        if conversation_id is None:
            conversation_id = "default"
            try:
                from langgraph.config import get_config

                thread = get_config().get("configurable", {}).get("thread_id")
            except (ImportError, RuntimeError):
                thread = None
            if thread is not None:
                conversation_id = _conversation(thread)
        with self._lock:
            found = self._channels.get(conversation_id)
            if found is None:
                found = self._channels[conversation_id] = MemoryChannel(
                    self.memory, conversation_id=conversation_id, **self._options)
            return found

    def _tool(self, schema: dict[str, Any]) -> BaseTool:
        name = str(schema["name"])

        def run(**arguments: Any) -> str:
            return self.channel().dispatch(name, arguments).content

        async def arun(**arguments: Any) -> str:
            return await asyncio.to_thread(run, **arguments)

        return StructuredTool.from_function(func=run, coroutine=arun, name=name,
                                            description=str(schema.get("description", "")),
                                            args_schema=dict(schema.get("parameters") or {"type": "object"}))

    def _prepare(self, request: ModelRequest[Any], channel: MemoryChannel) -> ModelRequest[Any]:
        channel.use_tool_definitions([_openai_tool(tool) for tool in request.tools
                                      if _tool_name(tool) not in channel.tool_names])
        messages: list[AnyMessage] = list(request.messages)
        system = request.system_message
        # counted as sent: the system prompt is part of what a swap rewrites and a cache holds
        head = [Message(role="system", content=_text(system.content))] if system is not None else []
        presented = channel.present(head + langchain_to_messages(messages))
        for index, text in presented.shown.items():
            original = messages[index - len(head)]
            if original.content != text:
                messages[index - len(head)] = original.model_copy(update={"content": text})
        offered = set(presented.memory_tool_names)
        tools = [tool for tool in request.tools
                 if _tool_name(tool) not in channel.tool_names or _tool_name(tool) in offered]
        overrides: dict[str, Any] = {"messages": messages, "tools": tools}
        if presented.memory_prompt:
            before = _text(system.content) if system is not None else ""
            overrides["system_message"] = SystemMessage(content=f"{before}\n\n{presented.memory_prompt}".strip())
        return request.override(**overrides)

    @staticmethod
    def _record(channel: MemoryChannel, response: ModelResponse[Any] | AIMessage) -> None:
        results = response.result if isinstance(response, ModelResponse) else [response]
        for message in results:
            usage = getattr(message, "usage_metadata", None)
            if not isinstance(message, AIMessage) or not usage:
                continue
            details = usage.get("input_token_details") or {}
            channel.record_usage(Usage(prompt_tokens=usage.get("input_tokens"), completion_tokens=usage.get("output_tokens"),
                                       cached_tokens=details.get("cache_read"),
                                       cache_write_tokens=details.get("cache_creation")))

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | AIMessage:
        """Store and present the tool results, offer the memory tools it needs, call the model,
        record its usage."""
        channel = self.channel()
        response = handler(self._prepare(request, channel))
        self._record(channel, response)
        return response

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage:
        """:meth:`wrap_model_call` for async agents (storing runs in a worker thread)."""
        channel = self.channel()
        prepared = await asyncio.to_thread(self._prepare, request, channel)
        response = await handler(prepared)
        self._record(channel, response)
        return response


def _openai_tool(tool: BaseTool | dict[str, Any]) -> dict[str, Any]:
    """A tool of the request as the OpenAI function definition a chat model sends."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return dict(tool) if isinstance(tool, dict) else convert_to_openai_tool(tool)


def _tool_name(tool: BaseTool | dict[str, Any]) -> str:
    if isinstance(tool, BaseTool):
        return tool.name
    function = tool.get("function")
    return str(function.get("name") if isinstance(function, dict) else tool.get("name"))
