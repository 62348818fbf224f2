"""agent-memory in the OpenAI Agents SDK (``openai-agents``; extra ``openai-agents``).

Three lines::

    memory = OpenAIAgentsMemory(AgentMemory("researcher"), model="gpt-4o")
    agent = Agent(name="researcher", tools=[fetch, *memory.tools])
    result = await Runner.run(agent, task, run_config=memory.run_config())

- :meth:`OpenAIAgentsMemory.input_filter` is a ``call_model_input_filter``: before each model call
  it stores every new ``function_call_output`` (text outputs; outputs with images or files pass
  unchanged), shows each in full the first time and as its citation afterwards (when that pays,
  as everywhere in agent-memory), and adds the memory prompt to the instructions while the memory
  tools are enabled. Only the outputs' text changes: every other item is passed as the SDK made it.
- :attr:`OpenAIAgentsMemory.tools` are the memory tools as SDK ``FunctionTool`` objects. The SDK
  fixes an agent's tools before the filter runs, so they are enabled (``is_enabled``) from the
  call after the first stored result on, and the channel counts them as sent on every call
  (:class:`~agent_memory.presentation.offer.ToolOffer` ``mode="all"``).
- :meth:`OpenAIAgentsMemory.record` prices a run's usage (each model request's input, cached input
  and output tokens) with prompt caching as the provider bills it.
- :class:`AgentMemorySession` is an SDK ``Session`` whose items live in agent-memory's backend.
- :meth:`OpenAIAgentsMemory.sub_agent_tool` runs another agent as a tool with a memory snapshot:
  ``shared`` (this memory), ``isolated`` (a fork: this memory's items as of the call, the child's
  writes its own) or ``none``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from agents import Agent, FunctionTool, RunConfig, RunContextWrapper, Runner, RunResult
from agents.items import TResponseInputItem
from agents.memory.session import SessionABC
from agents.run_config import CallModelData, ModelInputData
from agents.tool_context import ToolContext

from agent_memory.agent.prompt import MEMORY_PROMPT
from agent_memory.errors import ConfigurationError, ConflictError
from agent_memory.integrations.channel import MemoryChannel
from agent_memory.integrations.snapshots import MemoryScope, check_scope, sub_agent_memory
from agent_memory.llm.chat import Usage
from agent_memory.memory import AgentMemory
from agent_memory.models.messages import Message, ToolCall
from agent_memory.presentation.offer import ToolOffer
from agent_memory.presentation.policy import PresentationPolicy
from agent_memory.pricing import Cost, PriceModel

__all__ = ["AgentMemorySession", "OpenAIAgentsMemory", "items_to_messages"]

DEFAULT_TOOLS = ("retrieve_memory", "query_memory")
"""The memory tools an SDK agent gets by default (``store_memory`` when asked for)."""


def _text(content: Any) -> str:
    """The text of a Responses message's ``content`` (a string, or parts with ``text``)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else json.dumps(content, default=str)


def items_to_messages(items: Sequence[TResponseInputItem]) -> tuple[list[Message], list[int]]:
    """The Responses input items the SDK sends, as agent-memory messages, and for each message
    the index of the (first) item it came from.

    An assistant turn (an assistant message item and the ``function_call`` items right after it,
    or function calls alone) → one assistant message with its text and calls, as the model made
    it; a ``function_call_output`` → a tool message (its text; an output with images or files is
    kept as an error-flagged message, so it is never stored or cited); any other message item → a
    message of its role (``developer`` as ``system``). Other items (reasoning, hosted tools'
    calls) are not part of the channel's view: they pass unchanged and are not counted.
    """
    messages: list[Message] = []
    where: list[int] = []
    names: dict[str, str] = {}
    open_turn = False  # the last message is an assistant turn that calls may still join
    for index, raw in enumerate(items):
        item: dict[str, Any] = dict(cast(Mapping[str, Any], raw))
        kind = item.get("type")
        if kind == "function_call":
            call_id = str(item.get("call_id") or "")
            names[call_id] = str(item.get("name") or "")
            call = ToolCall(id=call_id, name=names[call_id] or "tool", arguments=str(item.get("arguments") or ""))
            if open_turn:
                last = messages[-1]
                messages[-1] = last.model_copy(update={"tool_calls": (*last.tool_calls, call)})
                continue
            message = Message(role="assistant", tool_calls=(call,))
            open_turn = True
        elif kind == "function_call_output":
            call_id = str(item.get("call_id") or "")
            output = item.get("output")
            message = Message(role="tool", tool_call_id=call_id or "unknown", name=names.get(call_id),
                              content=output if isinstance(output, str) else json.dumps(output, default=str),
                              is_error=not isinstance(output, str))
            open_turn = False
        elif "role" in item and kind in (None, "message"):
            role = {"developer": "system"}.get(str(item["role"]), str(item["role"]))
            message = Message(role=role if role in ("system", "user", "assistant") else "user",  # type: ignore[arg-type]
                              content=_text(item.get("content")))
            open_turn = role == "assistant"
        else:
            continue
        messages.append(message)
        where.append(index)
    return messages, where


class OpenAIAgentsMemory:
    """agent-memory for one conversation run by the OpenAI Agents SDK (module docstring).

    Args:
        memory: where results are stored.
        conversation_id: names the conversation (results are stored under ids derived from it and
            the call ids; use the SDK session's id when there is one).
        model: the model's name, for prices (``PriceModel.lookup``); ``None``: give ``prices``,
            or usage is counted and not priced and swaps are decided by tokens.
        prices: the price model (wins over ``model``).
        policy: when results are shown in full or cited; ``None``: ``PresentationPolicy()``.
        tools: which memory tools :attr:`tools` holds (names of the default toolkit's tools).
        memory_prompt: added to the instructions while the memory tools are enabled; ``None``:
            nothing.

    Raises:
        ConfigurationError: if ``model`` has no price, or an unknown tool is named.
    """

    def __init__(
        self,
        memory: AgentMemory,
        *,
        conversation_id: str = "default",
        model: str | None = None,
        prices: PriceModel | None = None,
        policy: PresentationPolicy | None = None,
        tools: Sequence[str] = DEFAULT_TOOLS,
        memory_prompt: str | None = MEMORY_PROMPT,
    ) -> None:
        self.memory = memory
        self.channel = MemoryChannel(memory, conversation_id=conversation_id, model=model, prices=prices,
                                     policy=policy, offer=ToolOffer(mode="all"), memory_prompt=memory_prompt)
        schemas = {tool["function"]["name"]: tool["function"] for tool in self.channel.toolkit.openai_tools()}
        unknown = [name for name in tools if name not in schemas]
        if unknown:
            raise ConfigurationError(f"no memory tools {unknown}; there are {sorted(schemas)}")
        self.tools: list[FunctionTool] = [self._function_tool(schemas[name]) for name in tools]
        """The memory tools, as SDK function tools: add them to the agent's ``tools``."""
        self._recorded: set[int] = set()
        self._inherited = bool(memory.records())
        self._cites_at_once = self.channel.builder.policy.kind == "always_cite"  # cited at the first showing

    def __repr__(self) -> str:
        return f"OpenAIAgentsMemory({self.memory!r}, conversation_id={self.channel.conversation_id!r})"

    @property
    def enabled(self) -> bool:
        """Whether the memory tools go with the next call: once this conversation stored a result,
        or from the start when the memory already held items (a shared or forked snapshot) or the
        policy cites results at their first showing (``always_cite``)."""
        return self._inherited or self._cites_at_once or bool(self.channel.stored_ids)

    def _function_tool(self, schema: dict[str, Any]) -> FunctionTool:
        name = str(schema["name"])

        async def invoke(context: ToolContext[Any], arguments: str) -> str:
            result = await asyncio.to_thread(self.channel.dispatch, name, arguments)
            return result.content

        def is_enabled(context: RunContextWrapper[Any], agent: Any) -> bool:
            return self.enabled

        return FunctionTool(name=name, description=str(schema.get("description", "")),
                            params_json_schema=dict(schema.get("parameters") or {"type": "object", "properties": {}}),
                            on_invoke_tool=invoke, strict_json_schema=False, is_enabled=is_enabled)

    def input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """The SDK's ``call_model_input_filter``: the call's input with results stored, shown once
        and then cited, and the memory prompt in the instructions while the tools are enabled.

        Raises:
            StoreError: if the memory cannot be written (the run stops: nothing is lost).
        """
        own = [tool for tool in getattr(data.agent, "tools", []) if isinstance(tool, FunctionTool)
               and tool.name not in self.channel.tool_names]
        self.channel.use_tools([{"type": "function", "function": {"name": tool.name, "description": tool.description,
                                                                  "parameters": tool.params_json_schema}} for tool in own])
        items: list[Any] = list(data.model_data.input)
        enabled = self.enabled  # what the SDK decided for this call's tools, before any new result
        messages, where = items_to_messages(items)
        instructions = data.model_data.instructions
        system = [Message(role="system", content=instructions)] if instructions else []  # counted as sent
        presented = self.channel.present(system + messages)
        for index, text in presented.shown.items():
            position = where[index - len(system)]
            item = dict(items[position])
            if item.get("output") != text:
                item["output"] = text
                items[position] = item
        prompt = self.channel.memory_prompt
        if enabled and prompt:
            instructions = f"{instructions or ''}\n\n{prompt}".strip()
        return ModelInputData(input=items, instructions=instructions)

    def run_config(self, **options: Any) -> RunConfig:
        """A ``RunConfig`` with :meth:`input_filter` (``options``: the config's other fields)."""
        return RunConfig(call_model_input_filter=self.input_filter, **options)

    def record(self, result: RunResult) -> Cost | None:
        """Price a finished run's model requests (each once, however often called) and add them
        to ``channel.usage``; returns what this run's requests cost (``None``: not priced)."""
        if id(result) in self._recorded:
            return None
        self._recorded.add(id(result))
        usage = result.context_wrapper.usage
        entries: list[Any] = list(usage.request_usage_entries) or [usage]
        total: Cost | None = None
        for entry in entries:
            details = entry.input_tokens_details
            cost = self.channel.record_usage(Usage(
                prompt_tokens=entry.input_tokens, completion_tokens=entry.output_tokens,
                cached_tokens=getattr(details, "cached_tokens", None) if details is not None else None))
            if cost is not None:
                total = cost if total is None else total + cost
        return total

    def sub_agent_tool(self, agent: Agent[Any], *, name: str, description: str, scope: MemoryScope = "isolated",
                       max_turns: int = 10) -> FunctionTool:
        """``agent`` as a tool of this one, run with a memory snapshot (``scope``): ``shared``
        (this memory), ``isolated`` (a fork of it as of the call: no copy, no re-embedding; the
        child's writes its own) or ``none`` (an empty memory). The child gets its own
        :class:`OpenAIAgentsMemory` (its results stored, shown once, cited; its memory tools) and
        answers with its final output as text. The tool takes one argument, ``task``.

        Raises:
            InvalidArgumentError: for an unknown ``scope``.
        """
        check_scope(scope)
        parent = self

        async def invoke(context: ToolContext[Any], arguments: str) -> str:
            try:
                task = str(json.loads(arguments or "{}").get("task") or "")
            except (ValueError, AttributeError):
                return 'Error: the arguments must be a JSON object {"task": "..."}'
            if not task.strip():
                return "Error: give the sub-agent a task"
            child_memory, child_id = await asyncio.to_thread(sub_agent_memory, parent.memory, scope)
            try:
                child = OpenAIAgentsMemory(child_memory, conversation_id=child_id, prices=parent.channel.prices,
                                           policy=parent.channel.builder.policy,
                                           memory_prompt=parent.channel.memory_prompt)
                worker = agent.clone(tools=[*agent.tools, *child.tools])
                run = await Runner.run(worker, task, run_config=child.run_config(), max_turns=max_turns)
                child.record(run)
                parent.channel.usage.absorb(child.channel.usage)
                return str(run.final_output)
            finally:
                if child_memory is not parent.memory:
                    child_memory.close()

        return FunctionTool(name=name, description=description, strict_json_schema=False, on_invoke_tool=invoke,
                            params_json_schema={"type": "object", "properties": {"task": {"type": "string"}},
                                                "required": ["task"]})


class AgentMemorySession(SessionABC):
    """An SDK ``Session`` kept in agent-memory's backend: the conversation's items as one
    document of the agent (``session:<session_id>``), written with optimistic concurrency, so two
    processes adding to one session both land and a failed write leaves the previous items.

    Args:
        memory: whose backend keeps the session.
        session_id: the SDK's session id (letters, digits, ``_``, ``-``, ``.``).
    """

    session_settings = None

    def __init__(self, memory: AgentMemory, session_id: str) -> None:
        from agent_memory.ids import validate_agent_id

        self.memory = memory
        self.session_id = validate_agent_id(session_id)
        self._slot = memory.backend.document(memory.agent_id, f"session.{self.session_id}")

    def _read(self) -> tuple[list[TResponseInputItem], Any]:
        data, token = self._slot.get()
        return (json.loads(data) if data else []), token

    def _update(self, change: Any) -> Any:
        while True:
            items, token = self._read()
            result = change(items)
            try:
                self._slot.put(json.dumps(items, ensure_ascii=False).encode(), expect=token)
            except ConflictError:
                continue  # another writer got there first: read again and redo
            return result

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first; the last ``limit`` (``None``: all)."""
        items, _ = await asyncio.to_thread(self._read)
        return items if limit is None else items[-limit:] if limit > 0 else []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` (JSON-able, as the SDK makes them)."""
        new = json.loads(json.dumps(list(items), default=str))
        await asyncio.to_thread(self._update, lambda stored: stored.extend(new))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item (``None``: the session is empty)."""
        return await asyncio.to_thread(self._update, lambda stored: stored.pop() if stored else None)

    async def clear_session(self) -> None:
        """Remove every item."""
        await asyncio.to_thread(self._update, lambda stored: stored.clear())
