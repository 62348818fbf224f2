"""Building the messages of each LLM call: stored results resolved to full content or citation.

The conversation history keeps tool results as references (``Message.tool_result_ref``); the
:class:`ContextBuilder` resolves them each time messages are built, following a
:class:`~agent_memory.presentation.policy.PresentationPolicy`. History is never rewritten, a tool
call and its result always stay together (only the result's text changes), and a result is
swapped to its citation only when the citation is shorter than what it replaces.

A citation names where its result came from. A result stored without a source (``source`` the
default ``"agent"``: ``memory.store(result)`` by hand, as docs/memory.md's example does) is cited by the
tool message that refers to it: its ``name`` as the source and ``name(arguments)`` of the call as
the title (a ``url`` argument as the source when the arguments are too long to show), the way
:meth:`~agent_memory.kernel.manager.MemoryManager.ingest_tool_result` stores them. The item itself
is not changed.

Until citing starts (``PresentationPolicy.start``), every result is shown exactly as the tool
returned it, and :attr:`ContextBuilder.citing` is ``False``: the caller offers no memory tool and
the prompt is the one an agent without memory would send.

Under a price model (``ContextBuilder(prices=...)``) and a cache-aware policy (the default), the
swaps due by the policy, and the start of citing, are made in rewrites that pay with prompt caching
(:mod:`agent_memory.presentation.rewrites`): the builder prices the previous prompt as the cache
holds it (the history is append-only between rewrites: the last prompt's messages are the first
:attr:`PresentationState.prompt_messages` of the history) and the read-back a citation may cost (a
retrieve ``around`` the first key value the new showing lacks) against the saving over the calls
expected after this one. A caller that rewrites the history anyway (the kernel's compaction) calls
:meth:`ContextBuilder.rewritten`: every due swap is then made with the next prompt, for free.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.errors import TransformError
from agent_memory.limits import MAX_AROUND_CHARS, shorten
from agent_memory.memory import AgentMemory
from agent_memory.models.items import ExcerptTransform, ItemMetadata, MemoryItem
from agent_memory.models.messages import Message
from agent_memory.presentation.citations import Citation, CitationBuilder
from agent_memory.presentation.key_values import values_in
from agent_memory.presentation.rewrites import (
    CacheRates,
    PromptLayout,
    ReadBack,
    Swap,
    decide_rewrite,
    offer_from_first_call,
    remaining_calls,
)
from agent_memory.presentation.llm_citations import CitationOutcome, LLMCitationWriter
from agent_memory.presentation.offer import OfferState
from agent_memory.presentation.policy import PresentationPolicy
from agent_memory.pricing import PriceModel
from agent_memory.tokens import EXACT_ESTIMATE_CHARS, estimate_tokens
from agent_memory.prompt_tokens import FRAMING_TOKENS, message_tokens
from agent_memory.records.prepare import result_store_arguments
from agent_memory.transforms import apply_transform, raw_text, readable_text

__all__ = ["FORGOTTEN_NOTE", "BuiltContext", "ContextBuilder", "ContextStats", "PresentationState", "ResultView"]

FORGOTTEN_NOTE = "[Result {id} was forgotten: it was removed from memory and cannot be retrieved.]"
"""What a tool message shows in place of a result that was forgotten (``AgentMemory.forget``)."""

HEAD_LABEL_TOKENS = 8
"""Tokens of the "Beginning of the content:" label of a capped showing."""

DEFAULT_SOURCE: str = ItemMetadata.model_fields["source"].default
"""The source of an item stored without one (``"agent"``): cited by its tool call instead."""

READ_BACK_HEADER_TOKENS = 80
"""Tokens of the header line of a retrieve's answer, at most (id, type, source, title, what was read:
``HEADER_TOKENS`` of ``actions/retrieve.py``), counted in each :class:`ReadBack` at that cap."""

Showing = Literal["raw", "full", "cited"]
"""How a result appears in a prompt: as stored (before citing starts), its first showing once
citing (readable, possibly cut at the cap), or its citation (:class:`ResultView`)."""

COUNT_CACHE_SIZE = 4_096
"""Message texts whose token count a builder remembers (each prompt repeats the last one's)."""


@dataclass(frozen=True, slots=True)
class ResultView:
    """The ways one stored result can appear, computed once per result."""

    raw: str
    """The content exactly as stored (what an agent without memory shows), before citing starts."""
    raw_tokens: int
    full: str
    """The first showing once citing: the readable content, or ``raw`` when that is not shorter
    (capped; beyond the cap, the citation and the head)."""
    full_tokens: int
    cited: str
    """The citation's text."""
    cited_tokens: int
    capped: bool = False
    """``True`` when ``full`` is cut to the policy's cap (the citation and the head): the model
    never sees the rest in a prompt."""
    raw_estimated: bool = False
    """``True`` when ``raw_tokens`` is an estimate (:func:`~agent_memory.tokens.estimate_tokens`:
    a long raw text the model is shown another form of, an HTML page's main text): it weighs the
    decisions (whether to cite, what starting to cite saves) and is never shown."""


ESTIMATE_SURELY_OVER = 2
"""A result whose estimated tokens are over this many times the cap of its first showing is cut
without being counted whole (:func:`~agent_memory.tokens.estimate_tokens` was within 13% of the
exact count on real pages); one nearer the cap is counted exactly first."""


@dataclass(frozen=True, slots=True)
class _Texts:
    """What one result's view is made of: each text with its tokens (counted once)."""

    raw: str
    raw_tokens: int
    raw_estimated: bool
    readable: str
    readable_tokens: int
    cited: str
    cited_tokens: int
    readable_estimated: bool = False
    """``readable_tokens`` is an estimate (a long result read as stored, JSON or text): it is
    counted exactly only when it may be shown whole."""


@dataclass
class ContextStats:
    """What a builder did so far (for reports), counted over committed calls."""

    builds: int = 0
    """LLM calls built and committed."""
    swaps: int = 0
    """Results swapped from full to citation."""
    citation_tokens: list[int] = field(default_factory=list)
    """Size of each distinct citation made, in tokens."""
    capped_first_showings: int = 0
    """First showings cut at ``full_result_max_tokens``."""
    citing_since: int | None = None
    """The call (1-based build number) from which results are cited, or ``None`` while the
    prompt is still the naive one."""


class PresentationState(BaseModel):
    """What the model has been shown of stored results: data, so that it survives a retry and a
    restart, never inferred from an in-process cache. A builder *prepares* the next state with each
    prompt; the caller *commits* it once the provider answered, so a retried call shows the model
    exactly the same thing. Serialisable (``model_dump_json``) into a working context snapshot."""

    model_config = ConfigDict(frozen=True)

    calls: int = 0
    """LLM calls committed."""
    first_call: dict[str, int] = Field(default_factory=dict)
    """Memory id → the call (1-based) in which the result was first part of the prompt."""
    swapped: frozenset[str] = frozenset()
    """Results shown as their citation from now on."""
    citing_since: int | None = None
    """The call from which results are cited (memory tools offered); ``None``: not yet."""
    prompt_messages: int = Field(default=0, ge=0)
    """How many leading messages of the history the last committed prompt showed (the history is
    append-only between rewrites, so the next prompt repeats them unless a swap changes one). 0:
    nothing of the last prompt can be counted on (no call yet, or the history was rewritten: a
    compaction), and every due swap goes with the next prompt."""
    offer: OfferState | None = None
    """What the memory tools were offered for with the last committed call (the caller that
    chooses the tools records it: :class:`~agent_memory.kernel.assembler.LLMRequestAssembler`);
    ``None``: not recorded. Under a price model the tools list changes only when the prompt is
    rewritten anyway, so the next call starts from this one."""

    @property
    def citing(self) -> bool:
        """Whether results are cited (so the memory tools go with the next call)."""
        return self.citing_since is not None


@dataclass(frozen=True, slots=True)
class BuiltContext:
    """The messages of one LLM call and the presentation state they imply (not yet committed)."""

    messages: list[Message]
    """The messages to send, oldest first."""
    state: PresentationState
    """The state to commit once the provider answered."""
    swapped_now: tuple[str, ...] = ()
    """Results this call shows as citations for the first time."""

    @property
    def citing(self) -> bool:
        """Whether this call cites results (the memory tools must go with it)."""
        return self.state.citing


class ContextBuilder:
    """Resolves stored tool results in a history into the messages of the next LLM call.

    Args:
        memory: where the results are stored.
        policy: when results are shown in full, and when citing starts; ``None``:
            ``PresentationPolicy()`` (``full_once``, citing when it pays).
        citations: makes the citations: a :class:`CitationBuilder` (compaction plugins), or an
            :class:`~agent_memory.presentation.llm_citations.LLMCitationWriter` (goal-aware citations
            written by a model, the plugin's citation as fallback); ``None``: a
            :class:`CitationBuilder` over the memory's compaction plugins (``memory.plugins``: the
            built-in ones, registered through the ``agent_memory.compaction_plugins`` entry points,
            unless the memory was given others) and its token counter.
        offer_cost_tokens: what citing adds to every call, in tokens: the definitions of the
            memory tools a citation needs (and any system-prompt text that teaches them), as the
            caller sends them. With ``policy.start == "when_it_pays"``, citing starts only once it
            saves more than this. 0: citing is free (it then starts with the first result it
            shortens).
        state: the presentation state to start from (a restored snapshot's); ``None``: nothing
            shown yet.
        prices: the price model the prompts are billed under; with a cache-aware policy (the
            default) swaps and the start of citing are made only when they pay with its prompt
            caching (module docstring). ``None``: tokens alone decide.
        fixed_tokens: tokens sent with every call before the messages besides the memory tools:
            the caller's own tool definitions (they count towards a provider's minimum cacheable
            prompt, and starting to cite rewrites them).

    Raises:
        ValueError: if ``offer_cost_tokens`` or ``fixed_tokens`` is negative.

    One builder per conversation. :meth:`build` (also named :meth:`prepare`) gives the next
    call's messages and the state they imply, and changes nothing: it is a function of the
    history, the committed :attr:`state` and the memory's items, so building twice gives the same;
    :meth:`commit` records what was shown, once the provider answered (a retried call must show
    the model the same prompt), and only then does the next build move on (a result shown in
    full once is cited from the next call)::

        builder = ContextBuilder(memory)
        built = builder.build(history)          # built.messages: what to send
        reply = llm(built.messages)             # a failed call: build again, the same prompt
        builder.commit(built)                   # answered: what the model was shown is recorded

    Consecutive prompts share the longest possible prefix: a result, once cited, stays cited.
    """

    def __init__(
        self,
        memory: AgentMemory,
        *,
        policy: PresentationPolicy | None = None,
        citations: CitationBuilder | LLMCitationWriter | None = None,
        offer_cost_tokens: int = 0,
        state: PresentationState | None = None,
        prices: PriceModel | None = None,
        fixed_tokens: int = 0,
    ) -> None:
        if offer_cost_tokens < 0 or fixed_tokens < 0:
            raise ValueError("offer_cost_tokens and fixed_tokens must be >= 0")
        self.memory = memory
        self.policy = policy if policy is not None else PresentationPolicy()
        self.citations = citations if citations is not None else CitationBuilder(memory.plugins, memory.tokens)
        self.offer_cost_tokens = offer_cost_tokens
        self.fixed_tokens = fixed_tokens
        self.prices = prices
        self._count = functools.lru_cache(maxsize=COUNT_CACHE_SIZE)(memory.tokens.count)
        self.stats = ContextStats()
        self._views: dict[str, ResultView] = {}
        self._texts: dict[str, _Texts] = {}
        """Memory id -> the texts (and counts) its view was made of (a capped showing is cut from them)."""
        self._origins: dict[str, tuple[str, str | None]] = {}
        """Memory id -> (tool name, call arguments) of the tool message that refers to it."""
        self._read_backs: dict[tuple[str, Showing, Showing], ReadBack | None] = {}
        """(memory id, old showing, new showing) -> the read-back that change may cost."""
        self.state = state if state is not None else PresentationState()

    @property
    def citing(self) -> bool:
        """Whether results are cited as of the last committed call (or from the first call, for
        ``start="first_call"``)."""
        return self.state.citing or self.policy.start == "first_call"

    @property
    def prices(self) -> PriceModel | None:
        """The price model the prompts are billed under (``None``: unknown, tokens decide)."""
        return self._prices

    @prices.setter
    def prices(self, model: PriceModel | None) -> None:
        self._prices = model
        self._rates = CacheRates.of(model) if model is not None else None

    @property
    def rates(self) -> CacheRates | None:
        """The cache rates swaps are decided with: the price model's when the policy is
        cache-aware; ``None``: tokens only."""
        return self._rates if self.policy.cache_aware else None

    def view(self, item_id: str) -> ResultView:
        """Raw, full and cited text of a stored result (cached).

        Each text is counted once. A result read as something else than its raw text (an HTML page
        read as its main text) whose raw text is long is never counted whole here: its
        ``raw_tokens`` is an estimate (:func:`~agent_memory.tokens.estimate_tokens`, marked
        ``raw_estimated``), for the decisions only; the model is shown its readable text, counted
        exactly, and the raw text only when that is not longer (then it is counted)."""
        cached = self._views.get(item_id)
        if cached is not None:
            return cached
        item = self._with_origin(self.memory.get(item_id))
        counter = self.memory.tokens
        raw = raw_text(item.content, item.metadata.content_encoding)
        readable = raw if item.metadata.content_encoding == "json" else readable_text(item)[0]
        readable_estimated = False
        if readable == raw:  # text, JSON: read as stored, counted once (and the citation reuses it)
            readable = raw
            raw_tokens = readable_tokens = estimate_tokens(raw, counter)
            raw_estimated = readable_estimated = len(raw) > EXACT_ESTIMATE_CHARS
            counts = {} if raw_estimated else {"tokens": raw_tokens, "text_tokens": None}
        else:
            readable_tokens = counter.count(readable)
            raw_tokens, raw_estimated = estimate_tokens(raw, counter), len(raw) > EXACT_ESTIMATE_CHARS
            counts = {} if raw_estimated else {"tokens": raw_tokens, "text_tokens": readable_tokens}
        if item.metadata.tokens is None and counts:
            item = item.model_copy(update={"metadata": item.metadata.model_copy(update=counts)})
        made: Citation | CitationOutcome
        if isinstance(self.citations, CitationBuilder):
            made = self.citations.cite(item, tokens=(readable_tokens, readable_estimated),
                                       json_text=raw if item.metadata.content_encoding == "json" else None)
        else:  # an LLM citation writer reads the whole result anyway
            made = self.citations.cite(item)
        cited = (made.citation if isinstance(made, CitationOutcome) else made).render()
        cited_tokens = counter.count(cited)
        capped_before = self.stats.capped_first_showings
        shown = _Texts(raw, raw_tokens, raw_estimated, readable, readable_tokens, cited, cited_tokens,
                       readable_estimated)
        full, full_tokens = self._full(shown)
        view = ResultView(raw=raw, raw_tokens=raw_tokens, full=full, full_tokens=full_tokens, cited=cited,
                          cited_tokens=cited_tokens, capped=self.stats.capped_first_showings > capped_before,
                          raw_estimated=raw_estimated)
        self._views[item_id] = view
        self._texts[item_id] = shown
        self.stats.citation_tokens.append(cited_tokens)
        return view

    def _note_origins(self, history: Sequence[Message]) -> None:
        """Remember which tool call produced each referenced result (for :meth:`_with_origin`)."""
        calls = {call.id: call for m in history if m.role == "assistant" for call in m.tool_calls}
        for message in history:
            if message.role != "tool" or not message.tool_result_ref or message.tool_result_ref in self._origins:
                continue
            call = calls.get(message.tool_call_id or "")
            name = message.name or (call.name if call is not None else None)
            if name:
                self._origins[message.tool_result_ref] = (name, call.arguments if call is not None else None)

    def _with_origin(self, item: MemoryItem) -> MemoryItem:
        """``item`` as its citation should name it: stored without a source, it gets its tool
        call's name as source and ``name(arguments)`` as title (a copy; memory is unchanged)."""
        origin = self._origins.get(item.id)
        meta = item.metadata
        if origin is None or meta.source != DEFAULT_SOURCE:
            return item
        name, arguments = origin
        derived = result_store_arguments(item.content, tool=name, call_arguments=arguments, type=item.type,
                                         media_type=meta.media_type or "text/plain", title=meta.title)
        source = derived["source"]
        url = _url_argument(arguments)
        if url is not None and url not in (derived["title"] or ""):
            source = url  # the call is shown as name(…): the URL says where it came from
        return item.model_copy(update={"metadata": meta.model_copy(update={"source": source,
                                                                           "title": derived["title"]})})

    def _full(self, shown: _Texts, *, cap: int | None = None) -> tuple[str, int]:
        """The first showing of a result, at most ``cap`` tokens (``None``: the policy's cap, and
        a cut one is counted in :attr:`stats`): its readable text, or its raw text when that is not
        longer (counted exactly then, if its count was an estimate)."""
        counter = self.memory.tokens
        text, tokens = shown.readable, shown.readable_tokens
        if shown.readable is not shown.raw and tokens >= shown.raw_tokens:
            raw_tokens = counter.count(shown.raw) if shown.raw_estimated else shown.raw_tokens
            if tokens >= raw_tokens:
                text, tokens = shown.raw, raw_tokens
        first = cap is None
        if cap is None:
            cap = self.policy.full_result_max_tokens
        if shown.readable_estimated and tokens <= ESTIMATE_SURELY_OVER * cap:
            tokens = counter.count(text)  # it may be shown whole: counted exactly
        if first and tokens > cap:
            self.stats.capped_first_showings += 1  # once per result: its view is made once
        if tokens <= cap:
            return text, tokens  # the id reaches the model with the citation that replaces this showing
        cited, cited_tokens = shown.cited, shown.cited_tokens
        room = cap - cited_tokens - HEAD_LABEL_TOKENS
        while True:  # token counts of joined pieces can differ by a few from their sum
            full = f"{cited}\nBeginning of the content:\n{shorten(text, room, counter=counter)}"
            tokens = counter.count(full)
            if tokens <= cap or room <= 0:
                return full, tokens
            room -= tokens - cap

    def build(self, history: Sequence[Message], *, full_cap: int | None = None,
              rewrite_from: int | None = None, may_start: bool = True) -> BuiltContext:
        """The messages for the next LLM call, oldest first, and the state they imply
        (``BuiltContext.messages``, ``BuiltContext.state``). Nothing is recorded: the same
        ``history`` gives the same result until :meth:`commit` (or :meth:`rewritten`,
        :meth:`reset`) changes the builder's :attr:`state`, or the memory's items change (a
        forgotten result).

        Tool messages with ``tool_result_ref`` get their content from memory: as stored while
        not citing, else full or citation per policy; every other message is passed through
        unchanged. ``full_cap`` (tokens) caps the full showings of this call below the policy's
        cap (their citation and head, as any capped showing): what a caller does when even a
        compaction leaves no room for a large fresh result (citing starts then, if it had not:
        a capped showing needs the memory tools); ``None``: the policy's cap.
        ``rewrite_from`` (a message index) says the prompt is rewritten from that message on
        anyway, whatever the builder does (0: all of it; a history that is not the continuation of
        the last prompt's, e.g. a compaction sizing its tail): every swap due there is made, as
        after :meth:`rewritten`; ``None``: the history continues the last prompt's.

        ``may_start=False`` keeps a builder that is not citing from starting with this call (the
        memory tools cannot go with it: :meth:`build_ahead`).

        A ``tool_result_ref`` that names no stored item (forgotten) is shown as
        :data:`FORGOTTEN_NOTE`.
        """
        state = self.state
        call = state.calls + 1
        self._note_origins(history)
        item_ids = [
            item_id for item_id in dict.fromkeys(m.tool_result_ref for m in history if m.role == "tool" and m.tool_result_ref)
            if item_id in self.memory
        ]  # a forgotten result (by this process or another) is shown as FORGOTTEN_NOTE
        first_call = dict(state.first_call)
        for shown_id in item_ids:
            first_call.setdefault(shown_id, call)
        shared = min(state.prompt_messages, len(history), len(history) if rewrite_from is None else max(0, rewrite_from))
        citing_since = state.citing_since
        if citing_since is None and self.policy.start == "first_call" and may_start:
            citing_since = call  # the memory tools go from the first call: nothing to weigh
        swapped = set(state.swapped)
        newly: list[str] = []
        if (citing_since is None and may_start and full_cap is not None
                and any(self.view(r).raw_tokens > full_cap for r in item_ids)):
            citing_since = call  # the prompt must fit: capped showings need the tools that read the rest
        if citing_since is None and may_start:
            started = self._start(history, item_ids, call, first_call, shared)
            if started is not None:
                citing_since, newly = call, started
        else:
            newly = self._rewrite(history, item_ids, call, first_call, swapped, shared)
        swapped.update(newly)
        out: list[Message] = []
        for message in history:
            item_id = message.tool_result_ref if message.role == "tool" else None
            if not item_id:
                out.append(message)
                continue
            if item_id not in item_ids:
                self._views.pop(item_id, None)
                self._texts.pop(item_id, None)
                self._read_backs = {key: found for key, found in self._read_backs.items() if key[0] != item_id}
                out.append(message.model_copy(update={"content": FORGOTTEN_NOTE.format(id=item_id)}))
                continue
            view = self.view(item_id)
            if citing_since is None:
                shown = view.raw
            elif item_id in swapped:
                shown = view.cited
            else:
                shown = self._capped(item_id, full_cap) if full_cap is not None and view.full_tokens > full_cap else view.full
            out.append(message.model_copy(update={"content": shown}))
        next_state = PresentationState(calls=call, first_call=first_call, swapped=frozenset(swapped),
                                       citing_since=citing_since, prompt_messages=len(history))
        return BuiltContext(messages=out, state=next_state, swapped_now=tuple(newly))

    def _capped(self, item_id: str, cap: int) -> str:
        """The full showing of ``item_id`` cut to ``cap`` tokens (citation, then the head); changes
        nothing (not the policy, not the stats)."""
        view = self.view(item_id)
        text, _ = self._full(self._texts[item_id], cap=max(cap, view.cited_tokens + HEAD_LABEL_TOKENS + 1))
        return text

    prepare = build
    """The same as :meth:`build` (the name the kernel and the integrations use)."""

    def build_ahead(self, history: Sequence[Message], *, tools_on: bool,
                    rewrite_from: int | None = None) -> tuple[BuiltContext, bool]:
        """:meth:`build` for a framework that fixes a call's tools before its hook sees the call
        (the OpenAI Agents SDK, pydantic-ai): the memory tools go with a call or not by what the
        previous call decided. Returns the context and whether the memory tools go with the next
        call; nothing is recorded until :meth:`commit`.

        ``tools_on``: the tools go with this call, so citing may start, and they stay on (the
        caller sets :attr:`offer_cost_tokens` to 0: they are paid already). Off: the builder weighs
        starting as a per-call offer does (:attr:`offer_cost_tokens` then holds what the tools'
        definitions and the memory prompt would add); if it would start, the tools go from the next
        call. In this call it starts only when that shows no citation (nothing swapped yet, no
        first showing cut at the cap: the model could not retrieve what it cites), e.g. results
        shown as their readable text from the start; else it does not start until the tools are
        there. So a conversation whose results never pay for the tools (small results) never
        carries them, and one whose results do cites from one call later than a framework that
        chooses tools per call would.
        """
        would = self.build(history, rewrite_from=rewrite_from)
        if tools_on or would.state.citing_since is None:
            return would, tools_on
        shown = {m.tool_result_ref for m in history if m.role == "tool" and m.tool_result_ref} - would.state.swapped
        if not would.swapped_now and not any(self.view(item_id).capped for item_id in shown if item_id in self.memory):
            return would, True  # citing starts with readable showings and no citation: the tools come next
        return self.build(history, rewrite_from=rewrite_from, may_start=False), True

    def commit(self, built: BuiltContext) -> None:
        """Record that ``built`` (what :meth:`build` gave) was sent and answered: its state
        becomes the builder's, and the next :meth:`build` continues from it. Commit only once the
        provider answered: a call that failed is built again and shows the model the same."""
        self.state = built.state
        self.stats.builds = built.state.calls
        self.stats.swaps += len(built.swapped_now)
        self.stats.citing_since = built.state.citing_since

    def reset(self, state: PresentationState | None = None) -> None:
        """Forget what was shown (``clear()`` of the memory, a new conversation), or restore a
        saved state."""
        self.state = state if state is not None else PresentationState()
        self._views.clear()
        self._texts.clear()
        self._origins.clear()
        self._read_backs.clear()

    def rewritten(self) -> PresentationState:
        """Record that the caller rewrote the history (the kernel's compaction: a new epoch of the
        working context). The next prompt shares nothing the builder can count on with the last
        one, so every swap due then goes with it: free, since that prompt is written to the cache
        anew anyway. Returns the new state, for the caller to save with the rewritten history."""
        self.state = self.state.model_copy(update={"prompt_messages": 0})
        return self.state

    def _due(self, item_ids: list[str], call: int, first_call: dict[str, int]) -> list[str]:
        """The results the policy would show as citations in this call (before size checks)."""
        kind = self.policy.kind
        if kind == "always_cite":
            return list(item_ids)
        if kind == "full_once":
            return [item_id for item_id in item_ids if first_call[item_id] < call]
        return item_ids[: max(0, len(item_ids) - self.policy.k)]  # keep_last_k: all but the k newest

    def _worth_citing(self, item_id: str) -> bool:
        view = self.view(item_id)
        if self.policy.kind == "always_cite":
            return True  # never shown in full, whatever the sizes
        return view.cited_tokens < view.full_tokens and view.raw_tokens > self.policy.inline_max_tokens

    def _positions(self, history: Sequence[Message]) -> dict[str, tuple[int, int]]:
        """Memory id -> (index of its first tool message in ``history``, how many refer to it)."""
        out: dict[str, tuple[int, int]] = {}
        for i, message in enumerate(history):
            item_id = message.tool_result_ref if message.role == "tool" else None
            if item_id:
                first, seen = out.get(item_id, (i, 0))
                out[item_id] = (first, seen + 1)
        return out

    def _layout(self, history: Sequence[Message], live: set[str], shared: int, *, citing: bool,
                swapped: set[str] | frozenset[str]) -> tuple[PromptLayout, int]:
        """The last prompt as the cache holds it (the first ``shared`` messages of ``history``,
        after the caller's tools and, when citing, the memory tools) and the tokens the next
        prompt adds after it, every message shown as the committed state shows it (before any
        new swap). ``shared == 0``: nothing is held, the whole next prompt is added."""
        count = self._count
        sizes = []
        for message in history:
            item_id = message.tool_result_ref if message.role == "tool" else None
            if not item_id:
                sizes.append(message_tokens(message, count))
            elif item_id not in live:
                sizes.append(FRAMING_TOKENS + count(FORGOTTEN_NOTE.format(id=item_id)))
            else:
                view = self.view(item_id)
                shown = view.raw_tokens if not citing else view.cited_tokens if item_id in swapped else view.full_tokens
                sizes.append(FRAMING_TOKENS + shown)
        fixed = self.fixed_tokens + (self.offer_cost_tokens if citing else 0)
        if shared == 0:
            return PromptLayout(), fixed + sum(sizes)
        return PromptLayout(fixed, tuple(sizes[:shared])), sum(sizes[shared:])

    def _start(self, history: Sequence[Message], item_ids: list[str], call: int, first_call: dict[str, int],
               shared: int) -> list[str] | None:
        """Whether citing starts with this call: the results it would cite (possibly none), or
        ``None`` while it does not pay. Starting changes every result's showing (raw to full, due
        ones to their citation) and the tools list, so it is one rewrite from position 0: it must
        save more tokens than :attr:`offer_cost_tokens` and, under a price model, pay. Under a price
        model, a ``full_once`` prompt that shares nothing with the cache (the first, or one after a
        rewrite) that already holds a result worth citing starts when
        :func:`~agent_memory.presentation.rewrites.offer_from_first_call` says the offer is cheaper
        then than any later start; with no such result there is nothing for the offer to pay back
        with (on tau-bench, whose results are small, the early offer alone cost +2.5% a run under
        Sonnet). Only ``full_once``: the offer pays back
        through swaps that pay, and its swaps are of the result the last call showed (a rewrite of a
        few hundred tokens at the end of the prompt); ``keep_last_k`` swaps a result ``k`` results
        deep, which rarely pays at 0.1x cache reads, so an early offer would be paid for nothing."""
        cited = [item_id for item_id in self._due(item_ids, call, first_call) if self._worth_citing(item_id)]
        if self.policy.kind != "always_cite" and self._saving(cited) < self.policy.min_swap_tokens:
            cited = []  # the floor keeps them in full for now
        chosen = set(cited)
        positions = self._positions(history)
        rates = self.rates
        swaps = []
        for item_id in item_ids:
            view = self.view(item_id)
            position, times = positions[item_id]
            after: Showing = "cited" if item_id in chosen else "full"
            shown = view.cited_tokens if after == "cited" else view.full_tokens
            read_back = self._read_back(item_id, "raw", after) if rates is not None else None
            swaps.append(Swap(position, times * (view.raw_tokens - shown), item_id, read_back))
        layout, added = (self._layout(history, set(item_ids), shared, citing=False, swapped=frozenset())
                         if rates is not None else (PromptLayout(), 0))
        if (self.policy.kind == "full_once" and layout.total == 0 and any(self._worth_citing(item_id) for item_id in item_ids)
                and offer_from_first_call(added, self.offer_cost_tokens, rates)):
            # nothing cached to rewrite: the offer now is cheaper than any later start; a due result
            # is cited with it when that pays for the read-back its citation may cost
            paid = decide_rewrite(layout, [swap for swap in swaps if swap.key in chosen], added_tokens=added,
                                  rates=rates, remaining=remaining_calls(call, self.policy.expected_calls),
                                  stop_loss=self.policy.expected_calls is None)
            return [swap.key for swap in paid.swaps]
        decision = decide_rewrite(layout, swaps, added_tokens=added, rates=rates,
                                remaining=remaining_calls(call, self.policy.expected_calls),
                                start_tokens=self.offer_cost_tokens, stop_loss=self.policy.expected_calls is None)
        return cited if decision.swaps else None

    def _rewrite(self, history: Sequence[Message], item_ids: list[str], call: int, first_call: dict[str, int],
               swapped: set[str], shared: int) -> list[str]:
        """The results to swap to their citation in this call, once citing: the due ones of the
        rewrite that pays best (all due ones, tokens only), or none."""
        pending = [item_id for item_id in self._due(item_ids, call, first_call) if item_id not in swapped]
        worth = [item_id for item_id in pending if self._worth_citing(item_id)]
        if not worth or self.policy.kind == "always_cite":
            return worth  # always_cite: a result is never shown in full, whatever the price
        rates = self.rates
        if rates is None:
            return worth if self._saving(worth) >= self.policy.min_swap_tokens else []
        positions = self._positions(history)
        swaps = []
        for item_id in worth:
            view = self.view(item_id)
            position, times = positions[item_id]
            swaps.append(Swap(position, times * (view.full_tokens - view.cited_tokens), item_id,
                              self._read_back(item_id, "full", "cited")))
        layout, added = self._layout(history, set(item_ids), shared, citing=True, swapped=swapped)
        decision = decide_rewrite(layout, swaps, added_tokens=added, rates=rates,
                                remaining=remaining_calls(call, self.policy.expected_calls),
                                min_saved_tokens=self.policy.min_swap_tokens,
                                stop_loss=self.policy.expected_calls is None)
        return [swap.key for swap in decision.swaps]

    def _read_back(self, item_id: str, before: Showing, after: Showing) -> ReadBack | None:
        """The retrieve that changing ``item_id``'s showing from ``before`` to ``after`` may cost
        later (:class:`~agent_memory.presentation.rewrites.ReadBack`); ``None`` when the new
        showing holds every key value (:mod:`~agent_memory.presentation.key_values`) of the old
        one. Else one retrieve ``around`` the first value it lacks, answered as the retrieve tool
        answers: that excerpt of the item's readable text within the memory's
        ``retrieve_max_tokens``, plus :data:`READ_BACK_HEADER_TOKENS` (a value too long to search
        for: the first page of the item). Made once per result and change."""
        key = (item_id, before, after)
        if key in self._read_backs:
            return self._read_backs[key]
        view = self.view(item_id)
        texts = {"raw": view.raw, "full": view.full, "cited": view.cited}
        kept = set(values_in(texts[after]))
        lacking = [value for value in values_in(texts[before]) if value not in kept]
        found = None
        if lacking:
            term = next((value for value in lacking if len(value) <= MAX_AROUND_CHARS), None)
            cap = self.memory.config.retrieve_max_tokens
            try:
                answer = apply_transform(self.memory.get(item_id), ExcerptTransform(around=term) if term else "full",
                                         counter=self.memory.tokens, max_tokens=cap).tokens
            except TransformError:  # content the transforms cannot shape: a page of it
                answer = min(view.raw_tokens, cap)
            arguments = json.dumps({"id": item_id, "around": term} if term else {"id": item_id})
            found = ReadBack(call_tokens=self._count(self._retrieve_call) + self._count(arguments),
                             answer_tokens=answer + READ_BACK_HEADER_TOKENS)
        self._read_backs[key] = found
        return found

    @property
    def _retrieve_call(self) -> str:
        """The tool name the citations tell the model to call."""
        citations = self.citations
        return (citations.builder if isinstance(citations, LLMCitationWriter) else citations).retrieve_call

    def _saving(self, item_ids: Sequence[str]) -> int:
        """Tokens swapping ``item_ids`` from full to their citation saves (once each)."""
        return sum(self.view(item_id).full_tokens - self.view(item_id).cited_tokens for item_id in item_ids)


def _url_argument(arguments: str | None) -> str | None:
    """The ``url`` argument of a call's JSON arguments, if it has one (a string)."""
    try:
        parsed = json.loads(arguments) if arguments else None
    except ValueError:
        return None
    url = parsed.get("url") if isinstance(parsed, dict) else None
    return url if isinstance(url, str) and url else None
