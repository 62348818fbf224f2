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
  fixes an agent's tools before the filter runs, so the filter decides a call ahead: they are
  enabled (``is_enabled``) from the call after the one where citing would first pay for them and
  the memory prompt, and stay on (:attr:`~agent_memory.integrations.channel.MemoryChannel.tools_due`);
  a conversation of small results never carries them.
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

from agent_memory.extras import require_extra

require_extra("openai-agents", "agent_memory.integrations.openai_agents")

from agents import Agent, FunctionTool, RunConfig, RunContextWrapper, Runner, RunResult
from agents.items import TResponseInputItem
from agents.memory.session import SessionABC
from agents.memory.session_settings import SessionSettings, coerce_session_settings, resolve_session_limit
from agents.run_config import CallModelData, ModelInputData
from agents.tool_context import ToolContext

from agent_memory.errors import ConflictError, InvalidArgumentError, MemoryClosedError
from agent_memory.ids import derived_memory_id, validate_agent_id
from agent_memory.integrations.channel import FixedToolsAdapter
from agent_memory.integrations.snapshots import MemoryScope, check_scope, sub_agent_memory
from agent_memory.kernel.summarizer import DEFAULT_SUMMARY_MAX_TOKENS
from agent_memory.llm.chat import Usage
from agent_memory.memory import AgentMemory
from agent_memory.models.messages import Message, ToolCall
from agent_memory.pricing import Cost
from agent_memory.transforms import extractive_summary
from agent_memory.storage import common

__all__ = ["AgentMemorySession", "OpenAIAgentsMemory", "items_to_messages"]

COMPACTED_PREFIX = "[Earlier in this conversation, compacted:"
"""How a session's summary message begins (it is not a user turn of its own)."""



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
    message of its role (``developer`` as ``system``). An empty ``call_id`` is read as ``unknown``
    (the call's and its output's). Other items (reasoning, hosted tools'
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
            call = ToolCall(id=call_id or "unknown", name=names[call_id] or "tool",
                            arguments=str(item.get("arguments") or ""))
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


class OpenAIAgentsMemory(FixedToolsAdapter):
    """agent-memory for one conversation run by the OpenAI Agents SDK (module docstring); the
    arguments are :class:`~agent_memory.integrations.channel.FixedToolsAdapter`'s.

    Attributes:
        tools: the memory tools, as SDK function tools: add them to the agent's ``tools``.
    """

    def _make_tools(self) -> None:
        self.tools: list[FunctionTool] = [self._function_tool(schema) for schema in self.tool_definitions]
        self._recorded: set[int] = set()

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
        self.channel.use_tool_definitions([
            {"type": "function", "function": {"name": tool.name, "description": tool.description,
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
    """An SDK ``Session`` kept in agent-memory's backend, compacted like the trace memory kernel
    compacts a conversation: nothing is silently lost.

    The items are one document of the agent (``session.<session_id>``), written with optimistic
    concurrency: two processes adding to one session both land, and a failed write leaves the
    previous items. With ``max_tokens``, an addition that takes the session over it compacts the
    oldest items: they are stored whole as one memory item (``conversation_turn``, JSON, under an id
    derived from them) and replaced by one message holding their extractive summary and the
    ``retrieve_memory`` call that brings them back; the last ``keep_user_turns`` user turns stay
    raw, as the kernel's raw tail does.

    It behaves as the SDK's own sessions (``SQLiteSession``, ``RedisSession``) do where they
    agree: ``get_items()`` without a ``limit`` applies ``session_settings.limit`` (an explicit
    ``limit`` wins; ``0`` or less: no items), so a ``RunConfig(session_settings=…)`` or the
    session's own settings bound the history the model gets; ``add_items`` refuses an item that is
    not JSON data with a ``TypeError`` (:class:`~agent_memory.errors.InvalidArgumentError`) before
    anything is written; and once its :class:`AgentMemory` is closed every method raises a
    ``RuntimeError`` (:class:`~agent_memory.errors.MemoryClosedError`), ``add_items([])`` too.

    Args:
        memory: whose backend keeps the session (and the compacted items).
        session_id: the SDK's session id (letters, digits, ``_``, ``-``, ``.``).
        max_tokens: the session's size that triggers a compaction, in o200k tokens of the items'
            JSON; ``None``: never compact.
        keep_user_turns: user turns (a user message and all that follows it) kept raw (>= 1).
        summary_tokens: the summary's size, in tokens.
        session_settings: the SDK's ``SessionSettings`` (or its dict); ``None``:
            ``SessionSettings()``, no limit.

    Raises:
        InvalidArgumentError: for an invalid ``session_id`` or ``keep_user_turns`` < 1.
        TypeError: for ``session_settings`` with an unknown field (the SDK's check).
    """

    session_settings: SessionSettings | None

    def __init__(self, memory: AgentMemory, session_id: str, *, max_tokens: int | None = None,
                 keep_user_turns: int = 2, summary_tokens: int = DEFAULT_SUMMARY_MAX_TOKENS,
                 session_settings: SessionSettings | dict[str, Any] | None = None) -> None:
        if keep_user_turns < 1:
            raise InvalidArgumentError("keep_user_turns must be >= 1")
        self.memory = memory
        self.session_id = validate_agent_id(session_id)
        self.max_tokens = max_tokens
        self.keep_user_turns = keep_user_turns
        self.summary_tokens = summary_tokens
        self.session_settings = (coerce_session_settings(session_settings) if session_settings is not None
                                 else SessionSettings())
        self._slot = common.document(memory.backend, memory.agent_id, f"session.{self.session_id}")

    def _check_open(self) -> None:
        """Refuse to touch the backend once the memory is closed (the SDK's sessions raise
        ``RuntimeError`` once closed; a closed memory must not be written behind its back)."""
        if self.memory.closed:
            raise MemoryClosedError(f"AgentMemorySession {self.session_id!r}: its AgentMemory "
                                    f"({self.memory.agent_id!r}) is closed; open a new one for a new session")

    def _read(self) -> tuple[list[TResponseInputItem], Any]:
        self._check_open()
        data, token = self._slot.get()
        return (json.loads(data) if data else []), token

    def _update(self, change: Any) -> Any:
        self._check_open()
        while True:
            items, token = self._read()
            result = change(items)
            if self.max_tokens is not None:
                self._compact(items)
            try:
                self._slot.put(json.dumps(items, ensure_ascii=False).encode(), expect=token)
            except ConflictError:
                continue  # another writer got there first: read again and redo
            return result

    def _compact(self, items: list[Any]) -> None:
        """Replace the oldest items by a summary message when the session is over ``max_tokens``."""
        count = self.memory.tokens.count
        if self.max_tokens is None or count(json.dumps(items, ensure_ascii=False)) <= self.max_tokens:
            return
        users = [n for n, item in enumerate(items) if isinstance(item, dict) and item.get("role") == "user"
                 and not str(item.get("content", "")).startswith(COMPACTED_PREFIX)]
        if len(users) <= self.keep_user_turns:
            return
        cut = users[-self.keep_user_turns]
        head = items[:cut]
        raw = json.dumps(head, ensure_ascii=False)
        item_id = derived_memory_id(f"session:{self.memory.agent_id}/{self.session_id}/{raw}")
        if item_id not in self.memory:
            self.memory.store(head, type="conversation_turn", source=f"session:{self.session_id}",
                              title=f"session {self.session_id}: {len(head)} earlier items", item_id=item_id,
                              tags=["session"])
        text = "\n".join(_text(item.get("content") if "content" in item else item.get("output", ""))
                          for item in head if isinstance(item, dict))
        summary = extractive_summary(text, self.summary_tokens, self.memory.tokens) or "(no text)"
        items[:cut] = [{"role": "user", "content": f'{COMPACTED_PREFIX} {len(head)} items, all of them: '
                                                   f'retrieve_memory(id="{item_id}")] {summary}'}]

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first: the last ``limit`` of them (``None``:
        ``session_settings.limit``, and all when that is ``None`` too; ``0`` or less: none).

        Raises:
            MemoryClosedError: (a ``RuntimeError``) if the memory is closed.
        """
        wanted = resolve_session_limit(limit, self.session_settings)
        items, _ = await asyncio.to_thread(self._read)
        return items if wanted is None else items[-wanted:] if wanted > 0 else []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` (JSON data, as the SDK makes them); compacts when over ``max_tokens``.

        Raises:
            MemoryClosedError: (a ``RuntimeError``) if the memory is closed, even for no items.
            InvalidArgumentError: (a ``TypeError``) if an item is not JSON data (an object JSON
                cannot hold, a circular reference); nothing is written then.
        """
        self._check_open()
        new = []
        for number, item in enumerate(items):
            try:
                new.append(json.loads(json.dumps(item)))  # a copy, as it will be read back
            except (TypeError, ValueError) as exc:
                raise InvalidArgumentError(f"session item {number} is not JSON data ({exc}); nothing was added") from exc
        await asyncio.to_thread(self._update, lambda stored: stored.extend(new))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item (``None``: the session is empty).

        Raises:
            MemoryClosedError: (a ``RuntimeError``) if the memory is closed.
        """
        return await asyncio.to_thread(self._update, lambda stored: stored.pop() if stored else None)

    async def clear_session(self) -> None:
        """Remove every item (compacted items stay in memory until forgotten).

        Raises:
            MemoryClosedError: (a ``RuntimeError``) if the memory is closed.
        """
        await asyncio.to_thread(self._update, lambda stored: stored.clear())
