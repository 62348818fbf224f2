"""Prompt rewrites: whether rewriting the prompt to swap results for their citations pays under prompt
caching (issue 15).

A provider's prompt cache serves only the part of a prompt equal to the previous prompt from the
start. Swapping a result that was sent in full for its citation shortens every later prompt, but
changes the prompt from that result on: everything after it is written to the cache again. So
swaps are batched into *rewrites*: one rewrite of the prompt from a position ``p`` (the oldest
swapped message), which swaps every due result at or after ``p`` at once. Between rewrites the
prompt only grows at its end, and the cache serves all of it but the new messages.

The decision (:func:`decide_rewrite`) prices both futures in units of the base input price per token
(:class:`CacheRates`, from a :class:`~agent_memory.pricing.PriceModel`: ``w`` the cache-write
rate, ``r`` the cache-read rate, both relative to the input price; Anthropic ``w = 1.25``,
``r = 0.1``; OpenAI ``w = 1`` (uncached input), ``r = 0.5`` for gpt-4o, ``0.1`` for gpt-5; a
prompt under the provider's minimum is not cached at all, ``w = r = 1``). With the previous prompt
``P`` tokens and the region of it from ``p`` on ``L`` tokens, of which the swaps save ``D``:

- extra cost of this call: ``(L - D) * w - L * r`` (the region is written again instead of read);
- gain: ``D * r`` per later call (those tokens are no longer read), over ``N`` expected remaining
  calls: ``D * r * N``;
- when citing starts, the tools list and the system prompt change (the memory tools and the
  section that teaches them, ``T`` tokens), so the rewrite starts at position 0 and every later
  call carries ``T`` more: ``- T * w`` now and ``- T * r * N`` later;
- when a swap's new showing (a citation, or a first showing cut at the cap) lacks a value the old
  one showed, the model may need it back: one more call over the prompt (read from the cache),
  whose output is the retrieve call, and the answer in the history from then on (``- C``, the
  *read-back*: :class:`ReadBack`, :func:`read_back_cost`).

A rewrite is made when ``gain - extra - C > 0``.

:func:`decide_rewrite` evaluates ``gain - extra - C`` with the provider's own rule
(:meth:`~agent_memory.pricing.PromptCaching.cached_prefix`: the 1,024-token minimum, OpenAI's
128-token steps) for every candidate ``p`` (the position of each due swap) and chooses the ``p``
that maximises it, or no rewrite when none pays. This is the same break-even Anthropic's context
editing leaves to the user's hand (``clear_at_least``), computed from the prices. A rewrite that
happens anyway (a compaction: the kernel rewrites the prompt from the compaction point) makes
every swap after it free: the caller passes an empty previous prompt and every due swap is made.

``N`` is an estimate (:func:`remaining_calls`). A caller who knows how long its conversations run
gives ``expected_calls``. Without it, ``N`` follows J. R. Gott's delta-t argument (Nature 363,
1993; the Lindy effect): observed at a random moment of its life, a process that has lasted ``t``
goes on for more than ``x`` with probability ``t / (t + x)``. A rewrite pays only if the
conversation lasts long enough, and one that does not pay back costs more than sending
everything, so ``N`` is the length it reaches with probability 3/4, ``t / 3``
(:data:`LINDY_DIVISOR`), at least 1. And since that is a guess, a rewrite must also be affordable
(``stop_loss``): its extra cost now at most what the call costs without it
(:data:`MAX_EXTRA_SHARE`), so that a conversation that ends right after a rewrite has cost at most
one call more than sending everything.

Measured on the replayed traces (``agent-memory replay``: tau-bench, SWE-agent, ReAct; the rule has
no per-source setting): with Gott's median (``N = t``) and no stop-loss the default cost up to 5%
more than naive on SWE-agent (rewrites late in short runs); with ``t / 3`` and the stop-loss, at most
0.03% more (one run that began citing at its last call; before the offer below). Telling the policy
each tau-bench run's real length (``expected_calls``) instead changes its cost by under half a
point: the estimate is not what limits it.

**The read-back.** A citation saves ``D`` tokens on every later call, but a value the model goes on
to need that the citation lacks costs a whole extra call over the prompt. Which results a model
goes back to cannot be told in advance, so a rewrite is priced with one read-back counted as
certain: the costliest of its swaps' (a later call that needs values of several cited results reads
them back in one extra call). A swap whose new showing keeps every key value of the old one
(:mod:`~agent_memory.presentation.key_values`: the ids, dates, amounts and names a model copies)
has none. The caller sizes each read-back as the retrieve tool answers it: a retrieve ``around``
the first value the showing lacks (:class:`~agent_memory.presentation.context.ContextBuilder`).
Left out: the prompt grows before the value is needed (the read-back is priced over the prompt right
after the rewrite: a lower bound), and a model that reads back twice.

Measured on the replayed traces (``agent-memory replay``, 2026-11-28, the 544 real runs of 5
sources, simulated retrieves included; docs/replay.md): without the read-back the default cost less
than naive on every source in total, but on tau-bench under gpt-4o by only 0.2% (on the runs held
back from us it cost 0.1% more), and 13 runs under gpt-4o and 4 under GPT-5 cost more than naive,
up to 14% and 18%; 8 of those made a retrieve, 5 on tau-bench, each for a flight number that a
cited flight search held and its citation did not. With it no tau-bench or SWE-agent run costs more
than naive under any of the three headline price models (tau-bench under gpt-4o: 0.3% less in
total), 1 run of the 544 does (TapeAgents under gpt-4o, +3.0%: citing began at its second-to-last
call, nothing was retrieved), the simulated retrieves fall from 14 to 2 (over the three price
models), and the default saves 12.7% / 20.1% / 10.7% in total (Sonnet 4.6 / gpt-4o / GPT-5)
instead of 12.9% / 20.4% / 10.8%. Counting a read-back per swap instead of one per rewrite left
SWE-agent under gpt-4o at −2.8% instead of −9.3%.

**The offer from the first call.** Starting to cite later rewrites the whole prompt (the tools list
changes): at least the first prompt's ``P`` tokens, ``(w - r)`` more per token than reading them.
Offering the memory tools with the first prompt instead (nothing is cached yet, so nothing is
rewritten) costs ``T * r`` per later call. Without the offer, citing can start with the third call
at the earliest (a result arrives with the first call's answer, is shown in full in the second and
is due in the third), so :func:`offer_from_first_call` makes the offer when the tools' reads over
those calls (:data:`OFFER_HORIZON_CALLS`) cost less than that rewrite: then the offer is cheaper
than any later start. A prompt the provider does not cache (``w = r``) is never offered the tools
early: nothing is saved by avoiding a rewrite there. The builder makes the offer for ``full_once``
only, whose swaps (of the result the last call showed) rewrite a few hundred tokens at the end of
the prompt and pay from the next call; ``keep_last_k``'s rewrite ``k`` results and rarely pay at
0.1x reads. What the offer risks: a conversation that never gets a result worth citing, or ends
before its swaps pay back ``T * w`` once and ``T * r`` per call, costs more than sending
everything. So ``T`` is kept small: ``retrieve_memory``'s schema holds only the shape of a call
(153 tokens) and the memory section of the system prompt is 29 tokens.

Measured on the replayed traces (``agent-memory replay``, 2026-11-25): tau-bench and SWE-agent
first prompts are 1,100-4,000 tokens and their results a few hundred. Without the offer, citing
almost never paid under Anthropic and GPT-5 rates (the default cost what naive costs, 0.03% more on
SWE-agent under GPT-5); with it and ``T`` = 183, the default costs less than naive under all three
headline price models on every source (tau-bench −1.8% / −9.5% / −1.8% under Sonnet 4.6 / gpt-4o /
gpt-5, SWE-agent −5.3% / −20.7% / −5.6%), while about half the tau-bench runs, the short ones, cost
up to 4-6% more than naive (the report counts them). Gott's median (``N = t``) instead of ``t / 3``
moves those figures by under half a point either way.

Without rates (``None``: no price model), the decision is the one of tokens alone: every due swap at
once, and citing starts as soon as it saves more tokens than the memory tools cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from agent_memory.errors import InvalidArgumentError
from agent_memory.pricing import PriceModel, PromptCaching
from agent_memory.prompt_tokens import FRAMING_TOKENS

__all__ = [
    "LINDY_DIVISOR",
    "MAX_EXTRA_SHARE",
    "OFFER_HORIZON_CALLS",
    "CacheRates",
    "RewriteDecision",
    "PromptLayout",
    "ReadBack",
    "Swap",
    "decide_rewrite",
    "offer_from_first_call",
    "read_back_cost",
    "remaining_calls",
]

MAX_EXTRA_SHARE = 1.0
"""With ``stop_loss``: a rewrite's extra cost now may be at most this share of what the call costs
without it."""

LINDY_DIVISOR = 3
"""Without ``expected_calls``, a conversation that has made ``t`` calls is counted on for ``t / 3``
more: by Gott's delta-t argument it goes on for at least that long with probability 3/4 (the lower
end of his 50% interval, ``t/3`` to ``3t``), so a rewrite that pays back within ``t / 3`` calls pays
three times in four. The median, ``t`` more calls, would make every marginal rewrite a coin toss, and
a rewrite that does not pay back leaves the conversation dearer than sending everything."""


OFFER_HORIZON_CALLS = 2
"""The calls before the earliest start of citing without an early offer (the second and the third:
a result arrives with the first call's answer, is shown in full in the second call and is due in
the third). An offer from the first call whose reads over them cost less than the rewrite a start
then would cost is cheaper than any later start."""


@dataclass(frozen=True)
class CacheRates:
    """A provider's prompt-cache prices relative to its base input price (per token), and its
    caching rule. Build one with :meth:`of`."""

    write: float
    """``w``: what a token written to the cache costs, in base input prices (Anthropic 1.25; a
    provider without a write surcharge, OpenAI: 1.0, the uncached input price)."""
    read: float
    """``r``: what a token read from the cache costs, in base input prices (Anthropic 0.1, gpt-4o
    0.5, gpt-5 0.1)."""
    caching: PromptCaching
    """The provider's rule: minimum cacheable prompt, hit granularity (``kind="none"``: no cache,
    every token at the base price)."""
    output: float = 1.0
    """What an output token costs, in base input prices (Claude Sonnet 4.6 5, gpt-4o 4, GPT-5 8):
    a read-back's retrieve call is written by the model (:class:`ReadBack`)."""

    def __post_init__(self) -> None:
        if self.write < 0 or self.read < 0 or self.output < 0:
            raise InvalidArgumentError(
                f"cache rates cannot be negative: write {self.write}, read {self.read}, output {self.output}")

    @classmethod
    def of(cls, model: PriceModel) -> CacheRates:
        """The rates of ``model``'s price table row (its base rates, below any tier): ``write`` =
        cache-write / input price when the provider bills writes (explicit breakpoints, or a table
        row with a cache-write price), else 1.0; ``read`` = cache-read / input price (1.0 when the
        model is not cached); ``output`` = output / input price."""
        rates = model.rates_usd_per_mtok()
        base = rates["input"]
        if base <= 0:  # a free model: every choice costs nothing, tokens decide
            return cls(write=1.0, read=1.0, caching=PromptCaching("none"))
        bills_writes = model.caching.kind == "explicit" or model.prices.cache_write_mtok is not None
        write = float(rates["cache_write"] / base) if bills_writes else 1.0
        read = float(rates["cache_read"] / base) if model.caching.kind != "none" else 1.0
        return cls(write=write, read=read, caching=model.caching, output=float(rates["output"] / base))

    def call_cost(self, prompt_tokens: int, prefix_tokens: int) -> float:
        """The input cost of one call in base input prices per token (output left out): the cached
        part of ``prefix_tokens`` (the leading tokens equal to the previous prompt) at ``read``,
        the rest at ``write``; a prompt the provider does not cache (under its minimum) at 1.0 per
        token. The same split as :meth:`~agent_memory.pricing.PriceModel.split`."""
        if self.caching.kind == "none" or prompt_tokens < self.caching.min_tokens:
            return float(prompt_tokens)
        read = self.caching.cached_prefix(prompt_tokens, min(prefix_tokens, prompt_tokens))
        return read * self.read + (prompt_tokens - read) * self.write

    def read_cost(self, prompt_tokens: int) -> float:
        """What a later call pays to send this prompt again as its prefix (all of it read from
        the cache when cached): :meth:`call_cost` with the whole prompt as prefix."""
        return self.call_cost(prompt_tokens, prompt_tokens)

    def read_rate(self, prompt_tokens: int) -> float:
        """What one more token of a prefix of a prompt this long costs a later call: ``read``
        when the prompt is cached, 1.0 when it is under the minimum."""
        return self.read if self.caching.kind != "none" and prompt_tokens >= self.caching.min_tokens else 1.0


@dataclass(frozen=True)
class PromptLayout:
    """The previous prompt as the cache holds it: what comes before the messages, then each
    message in order, in tokens."""

    fixed_tokens: int = 0
    """Tokens before the messages: the tool definitions (and, for a provider that puts it there,
    the system prompt)."""
    message_tokens: tuple[int, ...] = ()
    """Tokens of each message, oldest first (framing included)."""

    @property
    def total(self) -> int:
        """Every token of the prompt."""
        return self.fixed_tokens + sum(self.message_tokens)

    def tokens_before(self, position: int) -> int:
        """Tokens before message ``position`` (0-based; past the end: the whole prompt)."""
        return self.fixed_tokens + sum(self.message_tokens[: max(0, position)])


@dataclass(frozen=True)
class ReadBack:
    """The retrieve a new showing of a result may cost later: the showing (its citation, or a
    first showing cut at the cap) lacks a value the model was shown before, and a model that goes
    on to need it makes one more LLM call, whose output is the ``retrieve_memory`` call, and keeps
    the tool's answer in its history from then on (module docstring)."""

    call_tokens: int
    """Output tokens of the retrieve call (the tool's name and its JSON arguments)."""
    answer_tokens: int
    """Tokens of the tool's answer (its header line and the part read)."""

    def __post_init__(self) -> None:
        if self.call_tokens < 0 or self.answer_tokens < 0:
            raise InvalidArgumentError(
                f"a read-back's tokens cannot be negative: call {self.call_tokens}, answer {self.answer_tokens}")


@dataclass(frozen=True)
class Swap:
    """A result due for its citation."""

    position: int
    """Index of its (first) message in the prompt, 0-based; the same in the previous prompt and
    the next one (the history is append-only between rewrites)."""
    saved_tokens: int
    """Tokens the swap takes off every prompt from now on."""
    key: str = ""
    """What the caller swaps (a memory id)."""
    read_back: ReadBack | None = None
    """The retrieve the new showing may cost (it lacks a value the old one showed); ``None``: it
    keeps every value, or the caller does not price read-backs."""


def read_back_cost(rates: CacheRates, prompt_tokens: int, read_back: ReadBack, remaining: float) -> float:
    """What one read-back costs, in base input prices per token, after a rewrite that leaves the
    prompt ``prompt_tokens`` long: the extra call over that prompt (read from the cache as
    :meth:`CacheRates.read_cost` prices it; the part a prompt adds before the read-back is needed
    is left out, so this is a lower bound), its output (``call_tokens`` at ``output``), and the
    call and its answer in the history from then on (with framing: written once, then read by each
    of the ``remaining`` calls)."""
    kept = read_back.call_tokens + read_back.answer_tokens + 2 * FRAMING_TOKENS
    grown = prompt_tokens + kept
    return (rates.read_cost(prompt_tokens) + read_back.call_tokens * rates.output
            + rates.call_cost(grown, prompt_tokens) - rates.read_cost(prompt_tokens)
            + remaining * (rates.read_cost(grown) - rates.read_cost(prompt_tokens)))


@dataclass(frozen=True)
class RewriteDecision:
    """What :func:`decide_rewrite` chose."""

    swaps: tuple[Swap, ...] = ()
    """The swaps to make with the next prompt (empty: none; the prompt only grows)."""
    rewrite_from: int | None = None
    """The message position from which the next prompt differs from the previous one because of
    the swaps (0 when citing starts: the tools list changes); ``None``: no rewrite."""
    net_gain: float = 0.0
    """The expected saving of the chosen rewrite, ``gain - extra``, in base input prices per token
    (0.0 without rates or without a rewrite)."""

    @property
    def saved_tokens(self) -> int:
        """Tokens the chosen swaps take off each prompt."""
        return sum(swap.saved_tokens for swap in self.swaps)


def remaining_calls(call: int, expected_calls: int | None = None) -> float:
    """LLM calls to count on after call number ``call`` (1-based): ``expected_calls - call`` when
    the caller knows how many calls a conversation makes in all, else ``call / LINDY_DIVISOR``
    (module docstring); at least 1."""
    if call < 1:
        raise InvalidArgumentError(f"call numbers start at 1, not {call}")
    return max(1.0, expected_calls - call if expected_calls is not None else call / LINDY_DIVISOR)


def offer_from_first_call(prompt_tokens: int, offer_tokens: int, rates: CacheRates | None) -> bool:
    """Whether to offer the memory tools (and their system-prompt section) with a prompt that
    shares nothing with the cache (the first call, or a rewrite of the history), before any result
    is due for its citation (module docstring).

    Args:
        prompt_tokens: the prompt without the memory tools, in tokens (``P``).
        offer_tokens: what the offer adds to every prompt, in tokens (``T``).
        rates: the provider's cache rates; ``None`` (tokens only): never, since tokens alone only
            count what the tools add.

    Returns:
        ``True`` when the prompt with the tools is cached and ``T * r * OFFER_HORIZON_CALLS <
        P * (w - r)``: the tools' reads until the earliest later start cost less than the rewrite
        that start would make.
    """
    if rates is None or offer_tokens <= 0 or rates.caching.kind == "none":
        return False
    if prompt_tokens + offer_tokens < rates.caching.min_tokens:
        return False  # not cached: each call pays every token of the tools in full
    return offer_tokens * rates.read * OFFER_HORIZON_CALLS < prompt_tokens * (rates.write - rates.read)


def decide_rewrite(
    previous: PromptLayout,
    swaps: Sequence[Swap],
    *,
    added_tokens: int = 0,
    rates: CacheRates | None,
    remaining: float,
    start_tokens: int | None = None,
    min_saved_tokens: int = 0,
    stop_loss: bool = True,
) -> RewriteDecision:
    """Choose the rewrite of the next prompt (module docstring for the cost model).

    Args:
        previous: the previous prompt, as the cache holds it; an empty layout when nothing of it
            can be reused (the first call, or a rewrite that happens anyway: a compaction).
        swaps: the results due for their citation, each with its position, saving and the
            read-back its new showing may cost (with rates, a rewrite is priced with the costliest
            read-back of the swaps it makes, counted as made once); after citing began, swaps that
            save nothing are ignored.
        added_tokens: what the next prompt adds after the previous one (new messages), before any
            swap.
        rates: the provider's cache rates; ``None``: tokens only (every swap at once; citing
            starts when it saves more than ``start_tokens``).
        remaining: ``N``, the calls expected after this one (:func:`remaining_calls`).
        start_tokens: ``None`` when citing has begun; else the tokens starting to cite adds to
            every call (``T``: the memory tools and their system-prompt section). Starting is one
            rewrite from position 0 with every change in ``swaps`` (every result's new showing; all
            are free then), made only when together they save more than ``T`` tokens *and*, with
            rates, it pays.
        min_saved_tokens: a rewrite (after citing began) must save at least this many tokens.
        stop_loss: a rewrite's extra cost now must also be at most :data:`MAX_EXTRA_SHARE` of what
            the call costs without it (for an estimated ``remaining``; ``False`` when the caller
            knows how many calls are to come).

    Returns:
        The swaps to make (all of ``swaps`` at or after the chosen position), or none.

    Raises:
        InvalidArgumentError: for a negative ``remaining``, ``added_tokens`` or ``start_tokens``.
    """
    if remaining < 0 or added_tokens < 0 or (start_tokens is not None and start_tokens < 0):
        raise InvalidArgumentError("remaining, added_tokens and start_tokens must be >= 0")
    old = previous.total
    prompt = old + added_tokens
    if start_tokens is not None:
        saved = sum(swap.saved_tokens for swap in swaps)  # all change at once, even a longer one
        if not swaps or saved <= start_tokens:
            return RewriteDecision()  # a citing prompt would not be smaller than the naive one
        if rates is None:
            return RewriteDecision(tuple(swaps), 0)
        after = prompt - saved + start_tokens
        now = rates.call_cost(prompt, old)
        extra = rates.call_cost(after, 0) - now
        net = (remaining * (rates.read_cost(prompt) - rates.read_cost(after)) - extra
               - _read_back(rates, after, swaps, remaining))
        affordable = not stop_loss or extra <= now * MAX_EXTRA_SHARE
        return RewriteDecision(tuple(swaps), 0, net) if net > 0 and affordable else RewriteDecision()
    useful = sorted((swap for swap in swaps if swap.saved_tokens > 0), key=lambda swap: swap.position)
    if not useful:
        return RewriteDecision()
    # saved[i]: what the swaps at or after useful[i] save together
    saved_from = list(accumulate(swap.saved_tokens for swap in reversed(useful)))[::-1]
    if rates is None:
        if saved_from[0] >= min_saved_tokens:
            return RewriteDecision(tuple(useful), useful[0].position)
        return RewriteDecision()
    now, later = rates.call_cost(prompt, old), rates.read_cost(prompt)
    best: RewriteDecision | None = None
    for i, swap in enumerate(useful):
        if i and swap.position == useful[i - 1].position:
            continue  # the same rewrite as the previous candidate
        if saved_from[i] < min_saved_tokens:
            break  # later candidates save even less
        after = prompt - saved_from[i]
        kept = min(old, previous.tokens_before(swap.position))  # the prefix the cache still serves
        extra = rates.call_cost(after, kept) - now
        net = remaining * (later - rates.read_cost(after)) - extra - _read_back(rates, after, useful[i:], remaining)
        affordable = not stop_loss or extra <= now * MAX_EXTRA_SHARE
        if net > 0 and affordable and (best is None or net > best.net_gain):
            best = RewriteDecision(tuple(useful[i:]), swap.position, net)
    return best if best is not None else RewriteDecision()


def _read_back(rates: CacheRates, prompt_tokens: int, swaps: Sequence[Swap], remaining: float) -> float:
    """The read-back a rewrite of ``swaps`` is priced with: the costliest of theirs, counted as
    made once; 0.0 when every new showing keeps its values (module docstring)."""
    return max((read_back_cost(rates, prompt_tokens, swap.read_back, remaining) for swap in swaps if swap.read_back),
               default=0.0)
