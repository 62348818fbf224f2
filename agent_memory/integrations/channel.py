"""The memory channel of a conversation a framework runs: what every adapter puts in its hook.

A framework (the OpenAI Agents SDK, LangChain, pydantic-ai) owns the conversation and hands its
history to a hook before each model call. The adapter turns that history into
:class:`~agent_memory.models.messages.Message` objects and calls :meth:`MemoryChannel.present`,
which

1. stores every tool result it has not stored yet, under an id derived from the conversation, the
   tool call's id and the result's text (:func:`result_id`), so that presenting the same history
   again, from this process or another, stores nothing twice and a crash between two calls loses
   nothing, and a call id used twice keeps both its results;
2. resolves the results with a :class:`~agent_memory.presentation.context.ContextBuilder`: in full
   the first time, as a citation with its memory id afterwards, when that pays (the policy and
   price model as everywhere in agent-memory);
3. says which memory tools go with the call (:class:`~agent_memory.presentation.offer.ToolOffer`)
   and whether the memory prompt goes into the system prompt (only while a memory tool does).

The adapter then writes the shown text back into the framework's own messages (only a tool
result's text ever changes) and sends them. The prompt is the one the replay counts for the same
policy (:func:`agent_memory.replay.engine.replay_run`): ``benchmarks/bench_adapters.py`` checks that
token for token.

The results of the memory tools themselves are never stored (their answers are copies of memory),
nor are error results. The channel is one conversation's: one :class:`MemoryChannel` per
conversation (``conversation_id``), any number per memory.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from agent_memory.agent.prompt import MEMORY_PROMPT
from agent_memory.diagnostics import UnknownModelWarning, warn_once
from agent_memory.errors import ConfigurationError, InvalidArgumentError
from agent_memory.ids import derived_memory_id, memory_ids_in, validate_agent_id
from agent_memory.llm.chat import Usage
from agent_memory.memory import AgentMemory
from agent_memory.models.messages import Message, calls_answered
from agent_memory.plugins import PluginRegistry
from agent_memory.presentation.citations import CitationBuilder
from agent_memory.presentation.context import FORGOTTEN_NOTE, ContextBuilder
from agent_memory.presentation.offer import (
    MemoryTools,
    OfferState,
    ToolOffer,
    ToolResult,
    load_toolkit,
    offer_cost_tokens,
    with_memory_prompt,
)
from agent_memory.presentation.policy import PresentationPolicy
from agent_memory.pricing import BilledTokens, Cost, PriceModel
from agent_memory.prompt_tokens import tool_tokens
from agent_memory.records.prepare import result_store_arguments

__all__ = ["DEFAULT_ADAPTER_TOOL_NAMES", "FixedToolsAdapter", "MemoryChannel", "Presented", "UsageLedger", "channel_prices", "result_id"]


def result_id(agent_id: str, conversation_id: str, tool_call_id: str, content: str) -> str:
    """The memory id a channel stores a tool result under: :func:`~agent_memory.ids.derived_memory_id`
    of ``channel:<agent>/<conversation>/<call id>/<sha256 of the result's text>``.

    A result is known by its call's id and its text together:

    - the same result presented again (a framework re-sends the whole history with every call),
      by this process or another, gets the same id and is stored once;
    - a call id the conversation used before, now answering with other text, is another result
      with an id of its own: models and servers reuse call ids (45 of the 140 tau-bench runs do,
      LangChain and pydantic-ai pass them on as given), and keyed by the call id alone the second
      result was shown, and cited, as the first;
    - the same text under the same call id (a call repeated with the same answer) is one item, that
      both messages refer to: its showing and its citation are true of either;
    - the same text under two call ids stays two items: each names its own call (tool and
      arguments) as its source and title, and a citation says which call it stands for (the
      content store keeps the text once either way).

    Keyed by the text rather than by the result's position among those of its call id: a
    framework that trims or compacts its history (the Agents SDK session's compaction, a trimming
    middleware) shifts positions, and a position would then name an earlier result. A text the
    channel itself put in the framework's history (pydantic-ai keeps what it was sent) is known
    as the result it shows (:meth:`MemoryChannel.present`). ``tool_call_id`` may be empty (a server
    that names no call): such results differ by their text alone.
    """
    digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()
    return derived_memory_id(f"channel:{agent_id}/{conversation_id}/{tool_call_id}/{digest}")


def _text_key(tool_call_id: str | None, text: str) -> tuple[str, str]:
    """(call id, sha256 of ``text``): how a channel looks up a tool message's text it saw before."""
    return tool_call_id or "", hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Presented:
    """What one model call is sent, as :meth:`MemoryChannel.present` decided it."""

    messages: list[Message]
    """The messages to send, oldest first: tool results resolved (full, capped or cited), the
    memory prompt appended to the system message when :attr:`memory_prompt` is set."""
    shown: dict[int, str]
    """Index in the given history → the text to show for that tool message (every tool message
    whose result is stored; an adapter writes these back into its own message objects)."""
    memory_tool_definitions: list[dict[str, Any]]
    """The memory tools to offer with this call, as OpenAI function definitions (empty: none)."""
    memory_prompt: str | None
    """The system-prompt section to add to this call (``None``: no memory tool goes, none)."""
    offer: OfferState
    """What the memory tools were offered for."""
    stored: tuple[str, ...] = ()
    """Memory ids stored by this call (results memory did not hold yet)."""

    @property
    def memory_tool_names(self) -> list[str]:
        """Names of :attr:`memory_tool_definitions`."""
        return [tool["function"]["name"] for tool in self.memory_tool_definitions]


@dataclass
class UsageLedger:
    """The reported usage of a conversation's model calls and what they cost.

    ``prices`` prices each call (prompt caching as the provider bills it); ``None``: usage is
    counted, not priced (:attr:`unpriced_calls` says how many, :attr:`unpriced_reason` why).
    """

    prices: PriceModel | None = None
    unpriced_reason: str | None = None
    """Why calls are not priced (``None``: they are, when their tokens are reported)."""
    calls: int = 0
    """Model calls recorded."""
    billed: BilledTokens = field(default_factory=BilledTokens)
    """Every call's tokens as billed, summed (uncached input, cache writes, cache reads, output)."""
    cost: Cost | None = None
    """What the priced calls cost in all (USD); ``None`` before the first priced call."""
    unpriced_calls: int = 0
    """Calls that could not be priced: no price model, or no token counts reported."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record(self, usage: Usage) -> Cost | None:
        """Add one call's reported usage; returns its cost (``None``: not priced)."""
        billed = usage.billed_tokens()
        with self._lock:
            self.calls += 1
            if billed is None:
                self.unpriced_calls += 1
                return None
            self.billed = self.billed + billed
            if self.prices is None:
                self.unpriced_calls += 1
                return None
            cost = self.prices.price(billed)
            self.cost = cost if self.cost is None else self.cost + cost
            return cost

    def absorb(self, other: UsageLedger) -> None:
        """Add ``other``'s calls (a sub-agent's) to this ledger; ``other`` is unchanged."""
        with self._lock:
            self.calls += other.calls
            self.unpriced_calls += other.unpriced_calls
            self.billed = self.billed + other.billed
            if other.cost is not None:
                self.cost = other.cost if self.cost is None else self.cost + other.cost

    @property
    def total_usd(self) -> Decimal | None:
        """What the priced calls cost, in USD (``None``: nothing priced)."""
        return None if self.cost is None else self.cost.total_usd


def channel_prices(model: str | None, prices: PriceModel | None) -> tuple[PriceModel | None, str | None]:
    """The price model a channel bills with (``prices``, else ``model``'s in the bundled table), and
    why there is none; a model the table lacks is warned of once per name and runs unpriced."""
    if prices is not None:
        return prices, None
    if model is None:
        return None, "no price model: give the adapter model= (a name of the bundled price table) or prices="
    found, reason = PriceModel.lookup_or_reason(model)
    if reason is not None:
        reason = f"{reason}; or give prices=PriceModel(...)"
        warn_once(UnknownModelWarning, ("price", model), f"{reason}. Usage is counted, not priced (cost None), "
                  "and results are cited when that saves tokens", stacklevel=4)
    return found, reason


class MemoryChannel:
    """One conversation's memory channel: results stored, shown once, cited, and the memory tools.

    Args:
        memory: where results are stored (shared by any number of channels and agents).
        conversation_id: names the conversation (a framework's session or thread id); results are
            stored under ids derived from it, the tool call ids and the results' text
            (:func:`result_id`).
        model: the model's name, to look its price model up (:meth:`PriceModel.lookup`) for the
            cache-aware decisions and :attr:`usage`; ``None``: give ``prices`` or decide by tokens.
            A name the bundled price table lacks (a local model) runs unpriced, as ``MemoryAgent``
            does: an ``UnknownModelWarning`` once per name, swaps decided by tokens, usage counted
            with ``usage.unpriced_reason`` saying why.
        prices: the price model the prompts are billed under (wins over ``model``); ``None`` and
            no ``model``: swaps are decided by tokens, usage is counted but not priced.
        policy: when results are shown in full or cited; ``None``: ``PresentationPolicy()``.
        offer: when each memory tool is offered; ``None``: ``ToolOffer()`` (``retrieve_memory``
            once a result is cited, ``query_memory`` once memory holds results the prompt does not
            show). A framework that cannot change its tools list per call uses
            ``ToolOffer(mode="all")``: the tools then go with every call and cost nothing to start
            citing.
        form: the memory tools as ``separate`` tools or one ``single`` ``memory`` tool.
        memory_prompt: the system-prompt section that teaches the memory tools, sent with the calls
            that offer one; ``None``: none.
        own_tool_definitions: the agent's own tool definitions (OpenAI function format), sent with every call:
            they count towards the cached prefix and the tools' share of a prompt.
        registry: compaction plugins for citations; ``None``: the installed ones.
        tool_names_ahead: for a framework that fixes a call's tools before its hook runs (with
            ``ToolOffer(mode="all")``): the names of the memory tools it sends, decided a call ahead
            (:attr:`tools_due`, :meth:`ContextBuilder.build_ahead
            <agent_memory.presentation.context.ContextBuilder.build_ahead>`); ``None``: the tools
            are chosen per call.

    Raises:
        InvalidArgumentError: if ``conversation_id`` is not a valid id (letters, digits, ``_``,
            ``-``, ``.``; at most 64 characters).
        ConfigurationError: if no memory toolkit is installed.
    """

    def __init__(
        self,
        memory: AgentMemory,
        *,
        conversation_id: str = "default",
        model: str | None = None,
        prices: PriceModel | None = None,
        policy: PresentationPolicy | None = None,
        offer: ToolOffer | None = None,
        form: str = "separate",
        memory_prompt: str | None = MEMORY_PROMPT,
        own_tool_definitions: Sequence[Mapping[str, Any]] = (),
        registry: PluginRegistry | None = None,
        tool_names_ahead: Sequence[str] | None = None,
    ) -> None:
        self.memory = memory
        self.conversation_id = validate_agent_id(conversation_id)
        prices, unpriced = channel_prices(model, prices)
        self.prices = prices
        self.toolkit: MemoryTools = load_toolkit(memory, offer=offer or ToolOffer(), form=form)
        self.tool_names = frozenset(tool["function"]["name"] for tool in self.toolkit.tool_definitions())
        self.memory_prompt = memory_prompt
        retrieve_call = "memory" if form == "single" else "retrieve_memory"
        self.builder = ContextBuilder(
            memory, policy=policy or PresentationPolicy(), prices=prices,
            citations=CitationBuilder(registry if registry is not None else PluginRegistry.from_entry_points(),
                                      memory.tokens, retrieve_call=retrieve_call),
        )
        self.own_tool_definitions: list[dict[str, Any]] | None = None
        """The agent's own tool definitions as last told (:meth:`use_tool_definitions`)."""
        self._ahead = None if tool_names_ahead is None else [
            {"type": "function", "function": definition} for definition in self.function_definitions(tool_names_ahead)]
        self._ahead_cost = 0
        """Tokens the ``tool_names_ahead`` tools and the memory prompt add to a call (while off)."""
        self._ahead_on = False
        """The ``tool_names_ahead`` tools go with the next call."""
        self.use_tool_definitions(own_tool_definitions)
        self.usage = UsageLedger(prices=prices, unpriced_reason=unpriced)
        self._lock = threading.RLock()
        self._last: list[Message] = []
        """The history of the last call, results as references."""
        self._known: dict[tuple[str, str], str] = {}
        """(tool call id, sha256 of a text) -> memory id: every result this channel stored or found
        stored, by its own text and by each text the channel showed for it (a framework that keeps
        what it was sent, pydantic-ai, presents that text the next time)."""
        self._held_items = bool(memory.records())

    def __repr__(self) -> str:
        return f"MemoryChannel({self.memory!r}, conversation_id={self.conversation_id!r})"

    def use_tool_definitions(self, own_tool_definitions: Sequence[Mapping[str, Any]]) -> None:
        """Tell the channel the agent's own tool definitions (OpenAI function format), sent with
        every call: what the builder weighs citing and swaps against (a framework adapter calls this
        when it sees the agent's tools; a change of them is taken from the next call on)."""
        definitions = [dict(tool) for tool in own_tool_definitions]
        if definitions == self.own_tool_definitions:
            return
        count = self.memory.tokens.count
        cost, own_tokens = offer_cost_tokens(self.toolkit, definitions, count, self.memory_prompt)
        self.own_tool_definitions = definitions
        self.builder.fixed_tokens = own_tokens
        self.builder.offer_cost_tokens = cost
        if self._ahead is not None:
            self._ahead_cost = (tool_tokens(definitions + self._ahead, count) - own_tokens
                                + (count(self.memory_prompt) if self.memory_prompt else 0))

    def function_definitions(self, names: Sequence[str]) -> list[dict[str, Any]]:
        """The memory tools called ``names``, as function definitions (``name``, ``description``,
        ``parameters``), for a framework's own tool type.

        Raises:
            ConfigurationError: if a name is not one of the toolkit's tools.
        """
        schemas = {tool["function"]["name"]: tool["function"] for tool in self.toolkit.tool_definitions()}
        unknown = [name for name in names if name not in schemas]
        if unknown:
            raise ConfigurationError(f"no memory tools {unknown}; there are {sorted(schemas)}")
        return [dict(schemas[name]) for name in names]

    @property
    def tools_due(self) -> bool:
        """For a framework that fixes a call's tools before its hook runs (the Agents SDK,
        pydantic-ai): whether the memory tools go with the next call. From the start when the
        memory held items when the channel opened (a shared or forked snapshot, which the model
        may query) or the policy cites from the first call (``always_cite``, ``start="first_call"``);
        else from the call after the one where citing would first pay for them
        (:meth:`ContextBuilder.build_ahead
        <agent_memory.presentation.context.ContextBuilder.build_ahead>`). Always ``False`` for a
        channel without ``tool_names_ahead`` (its tools are chosen per call)."""
        if self._ahead is None:
            return False
        policy = self.builder.policy
        return self._held_items or policy.kind == "always_cite" or policy.start == "first_call" or self._ahead_on

    @property
    def stored_ids(self) -> list[str]:
        """Memory ids of the results this channel stored (or found stored), in order."""
        with self._lock:
            return list(dict.fromkeys(self._known.values()))

    def result_id(self, tool_call_id: str, content: str) -> str:
        """The memory id of the result ``content`` of tool call ``tool_call_id`` in this
        conversation (:func:`result_id`)."""
        return result_id(self.memory.agent_id, self.conversation_id, tool_call_id, content)

    def _store(self, message: Message, arguments: str | None, new: list[str]) -> str | None:
        """The memory id of ``message``'s result (``arguments``: those of the call it answers),
        storing it the first time (its id then goes to ``new``); ``None`` for what is never stored
        (errors, memory tools' answers)."""
        if message.is_error or message.name in self.tool_names or message.content is None:
            return None
        call_id, text = message.tool_call_id or "", message.content
        key = _text_key(call_id, text)
        known = self._known.get(key)
        if known is not None:
            return known
        item_id = self._shown_result(call_id, text)
        if item_id is None:
            item_id = self.result_id(call_id, text)
            if item_id not in self.memory:
                store = result_store_arguments(text, tool=message.name, call_arguments=arguments)
                try:
                    self.memory.store(**store, item_id=item_id)
                    new.append(item_id)
                except InvalidArgumentError:
                    if item_id not in self.memory:  # not "taken by a concurrent store of the same result"
                        raise
        self._known[key] = item_id
        return item_id

    def _shown_result(self, tool_call_id: str, text: str) -> str | None:
        """The result of which ``text`` is a showing this channel made (a citation, a capped first
        showing, the note of a forgotten result: each names its memory id), for a framework that
        hands back what it was sent (pydantic-ai keeps a history processor's output as its
        history); ``None``: ``text`` is a result of its own. Read from the text, so a restarted
        process finds it too: the item named must be this conversation's result of
        ``tool_call_id`` (its id derived from them and its content) and ``text`` one of its
        showings. (A first showing that names no id, a readable text, is known only to the
        process that showed it: :attr:`_known`.)"""
        for item_id in memory_ids_in(text):
            if item_id not in self.memory:
                if text == FORGOTTEN_NOTE.format(id=item_id):
                    return item_id  # shown as the note again: the builder finds it forgotten
                continue
            content = self.memory.get(item_id).content
            if not isinstance(content, str) or self.result_id(tool_call_id, content) != item_id:
                continue
            view = self.builder.view(item_id)
            if text in (view.full, view.cited):
                return item_id
        return None

    def present(self, history: Sequence[Message]) -> Presented:
        """Store the new results of ``history`` and decide what the next call is sent.

        ``history`` is the whole conversation as the framework would send it (the system message
        first, if any), tool messages with their results' text. It must continue the history of
        the last call (append-only, as frameworks keep it); a history that does not (a framework
        that trimmed or summarised it) is presented as a rewrite: every due swap is made.

        Raises:
            InvalidArgumentError: if a result cannot be stored (too large, too deep).
            StoreError: if the memory cannot be written.
        """
        with self._lock:
            answered = calls_answered(history)  # a reused call id: each result with its own call
            new: list[str] = []
            item_ids: dict[int, str] = {}
            for index, message in enumerate(history):
                if message.role == "tool":
                    call = answered.get(index)
                    item_id = self._store(message, call.arguments if call is not None else None, new)
                    if item_id is not None:
                        item_ids[index] = item_id
            stored = tuple(new)
            referenced = [
                m.model_copy(update={"content": None, "tool_result_ref": item_ids[i]}) if i in item_ids else m
                for i, m in enumerate(history)
            ]
            last, self._last = self._last, referenced
            same = next((n for n, (a, b) in enumerate(zip(last, referenced)) if a != b), min(len(last), len(referenced)))
            rewrite = None if same == len(last) else same  # the framework trimmed or edited its history
            if self._ahead is not None:
                tools_on = self.tools_due
                self.builder.offer_cost_tokens = 0 if tools_on else self._ahead_cost  # on: paid already
                prepared, self._ahead_on = self.builder.build_ahead(referenced, tools_on=tools_on, rewrite_from=rewrite)
            else:
                prepared = self.builder.prepare(referenced, rewrite_from=rewrite)
            self.builder.commit(prepared)
            built = prepared.messages
            offer = OfferState(citing=self.builder.citing)
            memory_tool_definitions = self.toolkit.tool_definitions(offer)
            prompt = self.memory_prompt if memory_tool_definitions else None
            messages = with_memory_prompt(built, prompt) if prompt else built
            shown = {i: built[i].content or "" for i in item_ids}
            for i, text in shown.items():  # a framework may hand this back as the result next time
                if text != history[i].content:
                    self._known.setdefault(_text_key(history[i].tool_call_id, text), item_ids[i])
            return Presented(messages=messages, shown=shown, memory_tool_definitions=memory_tool_definitions,
                             memory_prompt=prompt, offer=offer, stored=stored)

    def dispatch(self, name: str, arguments: str | Mapping[str, Any] | None) -> ToolResult:
        """Run a memory tool call of the model (never raises for the model's mistakes)."""
        return self.toolkit.dispatch(name, arguments)

    def record_usage(self, usage: Usage) -> Cost | None:
        """Add one model call's reported usage to :attr:`usage`; returns its cost."""
        return self.usage.record(usage)



DEFAULT_ADAPTER_TOOL_NAMES = ("retrieve_memory", "query_memory")
"""The memory tools an adapter gives its framework's agent by default (``store_memory`` when asked)."""


class FixedToolsAdapter:
    """The base of the adapters for frameworks that fix a call's tools before their hook runs
    (the OpenAI Agents SDK, pydantic-ai): their channel decides a call ahead whether the memory
    tools go (:attr:`MemoryChannel.tools_due`: from the call after the one where citing would
    first pay for them), and a subclass turns :attr:`tool_definitions` into the framework's tool
    type in :meth:`_make_tools`.

    Args:
        memory: where results are stored.
        conversation_id: names the conversation (results are stored under ids derived from it, the
            tool call ids and the results' text).
        model: the model's name, for prices (``PriceModel.lookup``); ``None``: give ``prices``,
            or usage is counted and not priced and swaps are decided by tokens. A name the price
            table lacks runs unpriced (see :class:`MemoryChannel`).
        prices: the price model (wins over ``model``).
        policy: when results are shown in full or cited; ``None``: ``PresentationPolicy()``.
        tool_names: which memory tools the agent gets (names of the toolkit's tools).
        memory_prompt: the system-prompt text sent while the memory tools are; ``None``: none.

    Raises:
        ConfigurationError: if an unknown tool is named.
        InvalidArgumentError: for an invalid ``conversation_id``.
    """

    def __init__(
        self,
        memory: AgentMemory,
        *,
        conversation_id: str = "default",
        model: str | None = None,
        prices: PriceModel | None = None,
        policy: PresentationPolicy | None = None,
        tool_names: Sequence[str] = DEFAULT_ADAPTER_TOOL_NAMES,
        memory_prompt: str | None = MEMORY_PROMPT,
    ) -> None:
        self.memory = memory
        self.channel = MemoryChannel(memory, conversation_id=conversation_id, model=model, prices=prices,
                                     policy=policy, offer=ToolOffer(mode="all"), memory_prompt=memory_prompt,
                                     tool_names_ahead=tool_names)
        self.tool_definitions = self.channel.function_definitions(tool_names)
        """The memory tools the agent gets, as function definitions."""
        self._make_tools()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.memory!r}, conversation_id={self.channel.conversation_id!r})"

    def _make_tools(self) -> None:
        """Build the framework's memory tools from :attr:`tool_definitions` (a subclass's part)."""

    @property
    def usage(self) -> UsageLedger:
        """The conversation's model calls as recorded (``record``) and what they cost:
        ``usage.total_usd`` (``None``: nothing priced, ``usage.unpriced_reason`` says why)."""
        return self.channel.usage

    @property
    def enabled(self) -> bool:
        """Whether the memory tools go with the next call (:attr:`MemoryChannel.tools_due`)."""
        return self.channel.tools_due
