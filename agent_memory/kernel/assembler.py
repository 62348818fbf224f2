"""LLMRequestAssembler: everything that happens before (and right after) each LLM call (AutoByteus'
request assembler and compaction trigger, github.com/AutoByteus/autobyteus, autobyteus/memory/).

:meth:`LLMRequestAssembler.prepare_request` runs the pending compaction (and makes sure the prompt
fits the input budget whatever happened since the last call), builds the messages from the Working
Context Snapshot (tool pairs intact, stored results in full once then cited), adds the memory
tools the prompt needs beside the agent's own tools, and renders the provider payload.
:meth:`LLMRequestAssembler.commit` records the answer: the presentation state of the request, the
assistant message, and the provider's ``prompt_tokens`` for the token budget. A request that is
not committed (the call failed) leaves no trace: preparing again shows the model the same prompt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_memory.errors import ContextOverflowError
from agent_memory.kernel.budget import BudgetCheck, Pressure
from agent_memory.kernel.compactor import CompactionRecord
from agent_memory.kernel.manager import MemoryManager
from agent_memory.llm.chat import ChatModel, ChatResult
from agent_memory.llm.renderers import PromptRenderer
from agent_memory.models.messages import Message
from agent_memory.presentation.context import BuiltContext
from agent_memory.presentation.offer import MemoryTools, OfferState, with_memory_prompt
from agent_memory.prompt_tokens import tool_tokens

__all__ = ["LLMRequestAssembler", "RequestPackage"]

MAX_FIT_ROUNDS = 3
"""Compactions tried at most before one call."""

MIN_SHOWING_TOKENS = 120
"""Smallest a fresh result's first showing is cut to when nothing else frees room (its citation
and a few lines of its head)."""


@dataclass(frozen=True)
class RequestPackage:
    """One prepared LLM call."""

    messages: list[Message]
    """The messages to send, oldest first, stored results resolved."""
    tool_definitions: list[dict[str, Any]]
    """Tool definitions to send (OpenAI format): the agent's own, then the memory tools offered."""
    payload: dict[str, Any] | None
    """The provider payload, when the assembler has a renderer; ``None`` otherwise."""
    built: BuiltContext
    """The presentation state to commit once the provider answered."""
    estimate_tokens: int
    """Our count of the prompt (messages and tools)."""
    compaction: CompactionRecord | None
    """What was compacted before this call, if anything."""
    offer: OfferState
    """What the memory tools were offered for."""


class LLMRequestAssembler:
    """Prepares and commits the LLM calls of one managed conversation.

    Args:
        manager: the agent's memory manager.
        toolkit: the memory tools (``actions.MemoryToolkit``, or :func:`~agent_memory.presentation.offer.load_toolkit`);
            ``None``: no memory tools are offered (citations then cannot be followed: only for
            tests and replays).
        tool_definitions: the agent's own tool definitions (OpenAI format), sent with every call.
        renderer: renders the payload (``None``: :attr:`RequestPackage.payload` is ``None``).
        render_options: passed to the renderer (``model``, ``max_tokens``...).
        memory_prompt: the system-prompt section that teaches the memory tools
            (:data:`~agent_memory.agent.prompt.MEMORY_PROMPT`), appended to the system prompt of
            every call that offers a memory tool, and only then: while no memory tool is offered
            (nothing to cite or search yet) it costs nothing. ``None``: no section.

    The assembler tells the manager's :class:`~agent_memory.presentation.context.ContextBuilder`
    what its choices cost per call, for the decisions of when citing starts and which swaps pay:
    ``offer_cost_tokens``, the tools list citing adds (``retrieve_memory`` as the toolkit offers
    it) and ``memory_prompt``; ``fixed_tokens``, the agent's own ``tool_definitions``.
    """

    def __init__(
        self,
        manager: MemoryManager,
        *,
        toolkit: MemoryTools | None = None,
        tool_definitions: Sequence[Mapping[str, Any]] = (),
        renderer: PromptRenderer | None = None,
        render_options: Mapping[str, Any] | None = None,
        memory_prompt: str | None = None,
    ) -> None:
        self.manager = manager
        self.memory_prompt = memory_prompt
        self.toolkit = toolkit
        self.tool_definitions = [dict(tool) for tool in tool_definitions]
        self.renderer = renderer
        self.render_options = dict(render_options or {})
        presentation, count = manager.presentation, manager.memory.tokens.count
        if toolkit is not None:
            citing = toolkit.tool_definitions(OfferState(citing=True))
            presentation.offer_cost_tokens = tool_tokens(citing, count) + (count(memory_prompt) if memory_prompt else 0)
        presentation.fixed_tokens = tool_tokens(self.tool_definitions, count)

    def _offer(self, built: BuiltContext) -> OfferState:
        """What the memory tools are offered for with ``built``.

        Without a price model the offer follows the prompt (:class:`~agent_memory.presentation.offer.ToolOffer`).
        Under one (the builder's cache-aware rates), a change of the tools list rewrites the whole
        cached prompt, so the list changes only when the prompt is rewritten anyway: the first call,
        the call after a compaction, the start of citing (which adds ``retrieve``). ``query`` (items
        the prompt no longer shows, e.g. a sub-agent's results in a shared memory) joins at the next
        such call and no tool leaves between them. The one exception is ``compact`` at soft pressure:
        a compaction, a rewrite, is near anyway, and the agent may choose its moment.
        """
        manager = self.manager
        shown = {m.tool_result_ref for m in manager.context.build_messages() if m.tool_result_ref}
        hidden = any(record.id not in shown for record in manager.memory.records())
        last = manager.context.state.last_prompt_tokens
        pressure = last is not None and manager.budget.check(last).pressure >= Pressure.SOFT
        wanted = OfferState(citing=built.citing, hidden_items=hidden, under_pressure=pressure)
        before = manager.presentation.state
        rewritten = before.prompt_messages == 0 or before.offer is None or built.citing != before.citing
        if manager.presentation.rates is not None and not rewritten and before.offer is not None:
            wanted = OfferState(citing=built.citing, hidden_items=before.offer.hidden_items,
                                under_pressure=before.offer.under_pressure or pressure)
        return wanted

    @staticmethod
    def _recorded(built: BuiltContext, offer: OfferState) -> BuiltContext:
        """``built`` with ``offer`` in its state, so that committing it records the tools sent."""
        return BuiltContext(messages=built.messages, state=built.state.model_copy(update={"offer": offer}),
                            swapped_now=built.swapped_now)

    def _definitions_for(self, offer: OfferState) -> list[dict[str, Any]]:
        memory_tool_definitions = self.toolkit.tool_definitions(offer) if self.toolkit is not None else []
        return [*self.tool_definitions, *memory_tool_definitions]

    def _taught(self, built: BuiltContext, tool_definitions: list[dict[str, Any]]) -> BuiltContext:
        """``built`` with the memory prompt in its system prompt, when memory tools go with it."""
        if not self.memory_prompt or len(tool_definitions) == len(self.tool_definitions):
            return built
        return BuiltContext(messages=with_memory_prompt(built.messages, self.memory_prompt), state=built.state,
                            swapped_now=built.swapped_now)

    def prepare_request(self) -> RequestPackage:
        """Compact if needed, build the messages, choose the tools, render. Nothing is committed.

        Raises:
            StoreError: if the memory's files cannot be written.
            InvalidArgumentError: if the renderer refuses the messages.
        """
        manager = self.manager
        compaction: CompactionRecord | None = None
        for _ in range(MAX_FIT_ROUNDS):
            built = manager.build_prompt(notes=manager.soft_notes())
            offer = self._offer(built)
            built = self._recorded(built, offer)
            tool_definitions = self._definitions_for(offer)
            built = self._taught(built, tool_definitions)
            estimate = manager.count_tokens(built.messages, tool_definitions)
            if not manager.compaction_required and estimate <= manager.budget.input_budget:
                break
            # Our count guards the budget too: a large result may have arrived since the last
            # call, whose reported size could not know of it.
            if estimate > manager.budget.input_budget:
                manager.request_compaction()
            compaction = manager.compact(tool_definitions=tool_definitions) or compaction
        cap = manager.presentation.policy.full_result_max_tokens
        while estimate > manager.budget.input_budget and cap > MIN_SHOWING_TOKENS:
            # Compaction cannot shrink the current turn's fresh results: show them shorter (their
            # citation and head; the model can read the rest), down to MIN_SHOWING_TOKENS.
            cap = max(MIN_SHOWING_TOKENS, cap - (estimate - manager.budget.input_budget) - 16)
            built = self._taught(self._recorded(manager.build_prompt(notes=manager.soft_notes(), full_cap=cap), offer),
                                 tool_definitions)
            estimate = manager.count_tokens(built.messages, tool_definitions)
        if estimate > manager.budget.input_budget:
            raise ContextOverflowError(
                f"the prompt is {estimate:,} tokens, over the input budget of {manager.budget.input_budget:,}, even "
                "after compaction: the system prompt, the tool definitions and the current user message alone do "
                "not fit. Use a model with a larger context, or shorten them."
            )
        manager.save()
        payload = self.renderer.render(built.messages, tool_definitions=tool_definitions or None, **self.render_options) if self.renderer else None
        return RequestPackage(messages=built.messages, tool_definitions=tool_definitions, payload=payload, built=built,
                              estimate_tokens=estimate, compaction=compaction, offer=offer)

    def commit(self, package: RequestPackage, result: ChatResult) -> BudgetCheck:
        """Record the provider's answer to ``package``: the presentation state, the assistant
        message (and its tool calls), and the reported prompt size (our count when none).

        Returns:
            Where the prompt stands against the thresholds.
        """
        self.manager.commit(package.built)
        self.manager.ingest_assistant_response(result.message)
        return self.manager.observe_usage(result.usage.prompt_tokens, estimate=package.estimate_tokens)

    def call(self, model: ChatModel, *, max_output_tokens: int | None = None,
             timeout_s: float | None = None) -> tuple[RequestPackage, ChatResult]:
        """Prepare, call ``model``, commit: one step of an agent loop.

        Raises:
            LLMError: if the call fails (nothing is committed; the next call shows the same prompt).
        """
        package = self.prepare_request()
        result = model.generate(package.messages, tool_definitions=package.tool_definitions or None, max_output_tokens=max_output_tokens,
                                timeout_s=timeout_s)
        self.commit(package, result)
        return package, result
