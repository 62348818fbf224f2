"""MemoryAgent: a tool-calling loop whose conversation and results live in memory.

Each step is one stateless LLM call whose messages the
:class:`~agent_memory.kernel.assembler.LLMRequestAssembler` builds from the Working Context Snapshot
(compacting first when the budget asks for it); the provider's usage feeds the token budget and
is reported per call (:class:`AgentStep`: prompt, cache reads and writes, output, and the cost in
USD from :mod:`agent_memory.pricing`), to observers too (:class:`~agent_memory.observers.LLMCalled`). The
model's tool calls run in order: the agent's own tools (plain typed functions,
:mod:`agent_memory.agent.tools`), whose results are stored in memory and shown in full once then
cited; the memory tools (``actions``, found through the ``agent_memory.toolkit`` entry point), whose
answers stay inline; and ``spawn_agent`` when sub-agents are allowed
(:mod:`agent_memory.agent.sub_agents`). Every memory event (user message, answer, tool intent,
tool result) goes through the agent's durable event journal (:mod:`agent_memory.agent.events`)
before it is applied. A model's mistake (unknown tool, bad arguments, a tool that raises) becomes
an error result the model reads; it never stops the loop.

Sync API; :meth:`MemoryAgent.arun` is the async twin (the loop in a worker thread; ``async`` tools
run on the caller's event loop).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterable, Sequence
from contextlib import ExitStack
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agent_memory.agent.config import AgentConfig, MemoryMode
from agent_memory.agent.events import EventProcessor
from agent_memory.agent.sub_agents import SPAWN_TOOL_NAME, SubAgentResult, merge, run_spawn_call, spawn, spawn_tool_schema
from agent_memory.agent.tools import FunctionTool, ToolFailure, as_tool
from agent_memory.config import MemoryConfig
from agent_memory.errors import ConfigurationError
from agent_memory.html import load_extractor_soon
from agent_memory.ids import validate_agent_id
from agent_memory.kernel.assembler import LLMRequestAssembler
from agent_memory.kernel.budget import ModelLimits, model_limits
from agent_memory.kernel.manager import MemoryManager
from agent_memory.kernel.summarizer import ExtractiveSummarizer, LLMSummarizer, Summarizer
from agent_memory.limits import shorten
from agent_memory.llm.chat import ChatModel, Usage
from agent_memory.llm.client import LLMClient
from agent_memory.memory import AgentMemory
from agent_memory.models.messages import Message, ToolCall
from agent_memory.observers import Compacted, LLMCalled, MemoryNotice, MemoryObserver, Truncated
from agent_memory.presentation.offer import MemoryTools, load_toolkit
from agent_memory.pricing import Cost, PriceModel
from agent_memory.storage import Backend
from agent_memory.tokens import offsets_soon

__all__ = ["AgentRun", "AgentStep", "MemoryAgent"]

MAX_INLINE_RESULT_CHARS = 16_000
"""Longest inline tool answer (memory tools, tools with ``store_result=False``), in characters;
memory tool answers are already capped at 4,000 tokens."""


class AgentStep(BaseModel):
    """One LLM call of a run."""

    model_config = ConfigDict(frozen=True)

    index: int
    """1-based position in the run."""
    prompt_tokens: int | None
    """The prompt's size as the provider reported it (``None``: not reported)."""
    estimate_tokens: int
    """Our count of the prompt (messages and tool definitions, o200k)."""
    completion_tokens: int | None
    """The answer's size as the provider reported it (``None``: not reported)."""
    cached_tokens: int | None
    """Cache reads: the part of ``prompt_tokens`` read from the provider's prompt cache
    (``None``: not reported)."""
    offered_tool_names: tuple[str, ...]
    """Names of the tools sent with the call (the agent's and the memory tools offered)."""
    tool_calls: tuple[str, ...]
    """Names of the tools the model called, in order."""
    compacted_turns: tuple[str, ...]
    """Turns compacted (or truncated) before this call; ``()``: none."""
    cache_write_tokens: int | None = None
    """Cache writes: the part of ``prompt_tokens`` written to the provider's prompt cache
    (Anthropic's ``cache_creation_input_tokens``; ``None``: not reported, as OpenAI never does)."""
    cost: Cost | None = None
    """What the call cost, in USD by part (uncached input, cache writes, cache reads, output): the
    reported usage priced by the agent's :class:`~agent_memory.pricing.PriceModel`, as reported,
    with no modelling; ``None``: not priced, ``unpriced_reason`` says why."""
    unpriced_reason: str | None = None
    """Why ``cost`` is ``None`` (no price known for the model, no usage reported); ``None`` when
    priced."""


class AgentRun(BaseModel):
    """What :meth:`MemoryAgent.run` did."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    turn_id: str
    """The turn the task started."""
    answer: str | None
    """The model's final text; ``None`` when the run stopped before one."""
    stopped: Literal["answer", "max_steps"]
    """``answer``: the model answered without calling tools; ``max_steps``: the step limit."""
    steps: tuple[AgentStep, ...]

    @property
    def compactions(self) -> int:
        """Steps preceded by a compaction."""
        return sum(1 for step in self.steps if step.compacted_turns)

    @property
    def prompt_tokens(self) -> list[int | None]:
        """The reported prompt size of each call, in order."""
        return [step.prompt_tokens for step in self.steps]

    @property
    def cache_read_tokens(self) -> int:
        """Prompt tokens read from the provider's cache, over every call (unreported: 0)."""
        return sum(step.cached_tokens or 0 for step in self.steps)

    @property
    def cache_write_tokens(self) -> int:
        """Prompt tokens written to the provider's cache, over every call (unreported: 0)."""
        return sum(step.cache_write_tokens or 0 for step in self.steps)

    @property
    def cost(self) -> Cost | None:
        """What the run's calls cost, in USD by part (the sum of each step's ``cost``); ``None``
        when a call was not priced (its ``unpriced_reason`` says why)."""
        if any(step.cost is None for step in self.steps):
            return None
        return sum((step.cost for step in self.steps if step.cost is not None), Cost())


class MemoryAgent:
    """An LLM agent with memory.

    Args:
        model: the chat model (:class:`~agent_memory.llm.chat.OpenAIChatModel` for any
            OpenAI-compatible endpoint, ``OpenAIResponsesModel``, ``AnthropicChatModel``).
        tools: the agent's own tools: typed functions or :class:`FunctionTool` s.
        system_prompt: the agent's instructions (the memory section is appended when memory is
            enabled).
        memory: the memory to use; ``None``: ``AgentMemory(agent_id, memory_dir, backend=backend,
            config=memory_config)``.
        agent_id, memory_dir, backend, memory_config: for the memory made when ``memory`` is
            ``None`` (``backend``: a ``postgresql://`` URL, see :class:`~agent_memory.memory.AgentMemory`).
        config: the agent configuration; ``None``: ``AgentConfig()``.
        limits: the model's context limits; ``None``: looked up by the model's name.
        compaction_llm: the client of the LLM summarizer (needed when ``config.use_compaction_llm``).
        conversation_id: the agent id the conversation (traces, working context, event journal,
            locks) is kept under in the memory's backend; ``None``: the memory's agent id.
            Sub-agents sharing a memory get their own.
        observers: hear notices of ingest, compaction, truncation, retrieval and applied events, and one
            :class:`~agent_memory.observers.LLMCalled` per LLM call (tokens, cache reads and
            writes, cost).
        name: the agent's name in results and notices; ``None``: ``conversation_id``, else the
            memory's agent id.
        price_model: prices each call's reported usage (:attr:`AgentStep.cost`); ``None``:
            ``PriceModel.lookup`` of the chat model's name (``model.model``, in the table of its
            ``price_provider``) when the price table has it, else calls are not priced and
            :attr:`AgentStep.unpriced_reason` says why. The presentation decides with it too: a
            stored result is swapped for its citation (and citing starts) only when that pays with
            the model's prompt caching (:mod:`agent_memory.presentation.rewrites`); unpriced, by tokens.

    Raises:
        ConfigurationError: if ``use_compaction_llm`` is set without ``compaction_llm``, or a
            tool's name is taken twice.
        InvalidIdError: if ``conversation_id`` is not a valid agent id.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        tools: Iterable[FunctionTool | Any] = (),
        system_prompt: str | None = None,
        memory: AgentMemory | None = None,
        agent_id: str = "agent",
        memory_dir: str | os.PathLike[str] | None = None,
        backend: str | Backend | None = None,
        memory_config: MemoryConfig | None = None,
        config: AgentConfig | None = None,
        limits: ModelLimits | None = None,
        compaction_llm: LLMClient | None = None,
        conversation_id: str | None = None,
        observers: Sequence[MemoryObserver] = (),
        name: str | None = None,
        price_model: PriceModel | None = None,
    ) -> None:
        self.model = model
        self.price_model, self._unpriced = (price_model, None) if price_model is not None else _price_model_of(model)
        self.config = config if config is not None else AgentConfig()
        self.system_prompt = system_prompt
        wrapped = [as_tool(t) for t in tools]
        self.tools = {t.name: t for t in wrapped}
        if len(self.tools) != len(wrapped):
            raise ConfigurationError(f"two tools share a name: {sorted(t.name for t in wrapped)}")
        self._owns_memory = memory is None
        self.memory = memory if memory is not None else AgentMemory(agent_id, memory_dir, backend=backend,
                                                                    config=memory_config)
        load_extractor_soon()  # the first page's main text is extracted without importing trafilatura then
        offsets_soon(self.memory.tokens)  # and the first large result is cut without building the offsets table
        if self.memory.config.index_on_store:  # open while the rest is set up and the model first answers
            self.memory.open_index_soon()
        conversation = validate_agent_id(conversation_id) if conversation_id is not None else None
        self.agent_id = name or conversation or self.memory.agent_id
        self.compaction_llm = compaction_llm
        self.manager = MemoryManager(
            self.memory,
            system_prompt=system_prompt,
            limits=limits if limits is not None else model_limits(getattr(model, "model", None)),
            summarizer=self._summarizer(), tail_turns=self.config.tail_turns, observers=observers,
            agent_id=conversation,  # a sub-agent's own conversation in a shared memory
            prices=self.price_model,  # swaps of results for citations are made when they pay, cached
        )
        self.toolkit: MemoryTools | None = None
        if self.config.enable_memory:
            self.toolkit = load_toolkit(self.memory, manager=self.manager, offer=self.config.tool_offer,
                                        form=self.config.tool_form)
        clash = set(self.tools) & set(getattr(self.toolkit, "names", []))
        if clash:
            raise ConfigurationError(f"tool names taken by the memory tools: {sorted(clash)}")
        self._spawn_schema = spawn_tool_schema() if self.config.allow_sub_agents else None
        self._spawn_name = SPAWN_TOOL_NAME
        own = [t.openai_schema() for t in self.tools.values()]  # their tool definitions
        if self._spawn_schema is not None:
            own.append(self._spawn_schema)
        self.assembler = LLMRequestAssembler(self.manager, toolkit=self.toolkit, tool_definitions=own,
                                             memory_prompt=self.config.memory_prompt if self.config.enable_memory else None)
        every_definition = [*own, *(self.toolkit.tool_definitions() if self.toolkit is not None else [])]
        self.events = EventProcessor(self.manager, tool_definitions=every_definition)
        self._compacted: list[str] = []
        self.manager.on(self._heard)
        self.children: list[SubAgentResult] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"MemoryAgent(agent_id={self.agent_id!r}, model={self.model!r}, tools={list(self.tools)})"

    def _heard(self, notice: MemoryNotice) -> None:
        if isinstance(notice, Compacted | Truncated):
            self._compacted.extend(t for t in notice.turn_ids if t not in self._compacted)

    def _summarizer(self) -> Summarizer | None:
        if not self.config.use_compaction_llm:
            return None
        if self.compaction_llm is None:
            raise ConfigurationError("config.use_compaction_llm needs compaction_llm (an LLMClient)")
        fallback = ExtractiveSummarizer(counter=self.memory.tokens)
        options: dict[str, Any] = {"prompt": self.config.compaction_prompt} if self.config.compaction_prompt else {}
        return LLMSummarizer(self.compaction_llm, fallback=fallback, counter=self.memory.tokens, **options)

    # -- running --------------------------------------------------------------------------------
    def run(self, task: str, *, max_steps: int | None = None) -> AgentRun:
        """Give the agent ``task`` (a user message) and loop until it answers without calling a
        tool, or ``max_steps`` LLM calls (``None``: ``config.max_steps``).

        Raises:
            LLMError: if an LLM call fails after the SDK's retries (the conversation is intact:
                calling :meth:`resume` retries the same prompt).
            ContextOverflowError: if even a compacted prompt cannot fit the model's window.
            StoreError: if the memory's files cannot be written.
        """
        turn_id = self.events.user_message(task)
        return self.resume(turn_id=turn_id, max_steps=max_steps)

    def resume(self, *, turn_id: str | None = None, max_steps: int | None = None) -> AgentRun:
        """Go on with the current turn (after a failed call, a restart, or results added by hand)."""
        turn = turn_id or self.manager.tracker.current_turn_id or self.manager.start_turn()
        limit = max_steps if max_steps is not None else self.config.max_steps
        steps: list[AgentStep] = []
        with ExitStack() as step:
            # step: the memory's work from a tool's result to the next LLM request, a stretch of
            # AgentMemory.foreground (the indexing thread steps back for it; it works during the call)
            for index in range(1, limit + 1):
                try:
                    package = self.assembler.prepare_request()
                finally:
                    step.close()  # the indexing thread works while the model answers
                result = self.model.generate(package.messages, tool_definitions=package.tool_definitions or None,
                                             max_output_tokens=self.config.max_output_tokens,
                                             timeout_s=self.config.llm_timeout_s)
                step.enter_context(self.memory.foreground())  # the answer's memory work, up to the next tool
                # What the model was shown is committed only now that it answered; the answer and the
                # usage go through the event journal (journaled, then applied). A call whose arguments no
                # tool can take is kept cut (ToolCall.kept); its tool still reads what was sent, to say why.
                self.manager.commit(package.built)
                self.events.assistant_response(_kept(result.message))
                self.events.observe_usage(result.usage.prompt_tokens, estimate=package.estimate_tokens)
                calls = result.message.tool_calls
                compacted, self._compacted = tuple(self._compacted), []
                usage = result.usage
                cost, unpriced = self._price(usage)
                steps.append(AgentStep(
                    index=index, prompt_tokens=usage.prompt_tokens, estimate_tokens=package.estimate_tokens,
                    completion_tokens=usage.completion_tokens, cached_tokens=usage.cached_tokens,
                    offered_tool_names=tuple(t["function"]["name"] for t in package.tool_definitions),
                    tool_calls=tuple(call.name for call in calls), compacted_turns=tuple(compacted),
                    cache_write_tokens=usage.cache_write_tokens, cost=cost, unpriced_reason=unpriced,
                ))
                self.manager.observers.notify(LLMCalled(
                    agent_id=self.agent_id, turn_id=turn, step=index, model=result.model,
                    prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens,
                    cache_read_tokens=usage.cached_tokens, cache_write_tokens=usage.cache_write_tokens,
                    cost_usd=None if cost is None else cost.total_usd,
                    price_model=None if self.price_model is None else self.price_model.label, unpriced_reason=unpriced,
                ))
                if not calls:
                    return AgentRun(agent_id=self.agent_id, turn_id=turn, answer=result.message.content or "",
                                    stopped="answer", steps=tuple(steps))
                for call in calls:
                    self._run_tool(call, step)
        return AgentRun(agent_id=self.agent_id, turn_id=turn, answer=None, stopped="max_steps", steps=tuple(steps))

    def _price(self, usage: Usage) -> tuple[Cost | None, str | None]:
        """One call's cost from its reported usage, or ``None`` and why not."""
        if self.price_model is None:
            return None, self._unpriced
        billed = usage.billed_tokens()
        if billed is None:
            return None, "the provider reported no prompt or output token count for this call"
        return self.price_model.price(billed), None

    async def arun(self, task: str, *, max_steps: int | None = None) -> AgentRun:
        """:meth:`run` in a worker thread; ``async`` tools run on this event loop."""
        self._loop = asyncio.get_running_loop()
        try:
            return await asyncio.to_thread(self.run, task, max_steps=max_steps)
        finally:
            self._loop = None

    # -- tools ----------------------------------------------------------------------------------
    def _answer(self, call: ToolCall, text: str, *, is_error: bool = False) -> None:
        """Record an inline answer (memory tools, errors, unstored results)."""
        self.events.tool_result(call.id, shorten(text, MAX_INLINE_RESULT_CHARS), is_error=is_error, name=call.name,
                                inline=True)

    def _run_tool(self, call: ToolCall, step: ExitStack | None = None) -> None:
        """Run one tool call of the model and record its result; never raises for the model's
        mistakes or a tool's failure. ``step``: once the tool has answered, the memory's work on
        the result is a foreground stretch held in it (until the caller closes it)."""
        arguments: Any = call.input if call.input is not None else call.arguments
        if step is not None:
            step.close()  # a tool (or a sub-agent) may run long: the indexing thread works meanwhile
        if self.toolkit is not None and call.name in getattr(self.toolkit, "names", ()):
            if step is not None:
                step.enter_context(self.memory.foreground())
            answer = self.toolkit.dispatch(call.name, arguments)
            self._answer(call, answer.content, is_error=not answer.ok)
            return
        if self._spawn_schema is not None and call.name == self._spawn_name:
            text, ok = run_spawn_call(self, arguments)
            self._answer(call, text, is_error=not ok)
            return
        tool = self.tools.get(call.name)
        if tool is None:
            names = [*self.tools, *getattr(self.toolkit, "names", ()), *([self._spawn_name] if self._spawn_schema else [])]
            self._answer(call, f"There is no tool {shorten(call.name, 60)!r}. The tools are: {', '.join(names)}.",
                         is_error=True)
            return
        try:
            value = tool.invoke(arguments, loop=self._loop)
        except ToolFailure as exc:
            self._answer(call, str(exc), is_error=True)
            return
        finally:
            if step is not None:
                step.enter_context(self.memory.foreground())
        if tool.store_result and self.config.enable_memory:
            extra: dict[str, Any] = {"type": tool.result_type} if tool.result_type else {}
            self.events.tool_result(call.id, value, name=tool.name, source=tool.name, **extra)
        else:
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
            self._answer(call, text)

    # -- sub-agents -----------------------------------------------------------------------------
    def spawn(self, task: str, *, memory: MemoryMode | None = None, **options: Any) -> SubAgentResult:
        """Run a sub-agent on ``task`` and return its one result (see
        :func:`agent_memory.agent.sub_agents.spawn`; ``memory`` ``None``: shared when
        ``config.share_memory_with_sub_agents``, else isolated)."""
        result = spawn(self, task, memory=memory, **options)
        self.children.append(result)
        return result

    def merge(self, result: SubAgentResult, item_ids: Iterable[str] | None = None) -> list[str]:
        """Copy an isolated sub-agent's items (``None``: all it stored) into this agent's memory;
        returns their new ids here (see :func:`agent_memory.agent.sub_agents.merge`)."""
        return merge(self, result, item_ids)

    def close(self) -> None:
        """Close the event journal, and the memory if the agent opened it."""
        self.events.close()
        if self._owns_memory:
            self.memory.close()

    def __enter__(self) -> MemoryAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _kept(message: Message) -> Message:
    """The model's answer as the conversation keeps it: each call as :meth:`ToolCall.kept` keeps it."""
    calls = tuple(call.kept() for call in message.tool_calls)
    if all(kept is call for kept, call in zip(calls, message.tool_calls, strict=True)):
        return message
    return message.model_copy(update={"tool_calls": calls})


def _price_model_of(model: ChatModel) -> tuple[PriceModel | None, str | None]:
    """The price model of ``model`` by its name, or ``None`` and why not."""
    name = getattr(model, "model", None)
    if not isinstance(name, str) or not name:
        return None, f"{type(model).__name__} names no model to price by: pass MemoryAgent(price_model=...)"
    found, reason = PriceModel.lookup_or_reason(name, provider=getattr(model, "price_provider", None))
    return found, None if reason is None else f"{reason}; or pass MemoryAgent(price_model=PriceModel.lookup(...))"
