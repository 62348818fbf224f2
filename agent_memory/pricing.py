"""Prices, and the cost of an LLM call under provider prompt caching.

A :class:`PriceModel` is one provider's model with its prices per million tokens, read from the
price table the ``genai-prices`` package ships (never typed by hand), and the way that provider
caches prompt prefixes (:class:`PromptCaching`). It prices a call in two steps:

1. :meth:`PriceModel.split` turns what a call sends (:class:`CallTokens`: the prompt, how much of
   it equals the previous prompt from the start, the output) into what the provider bills
   (:class:`BilledTokens`: uncached input, cache writes, cache reads, output), by the provider's
   documented caching rule:

   - Anthropic (``explicit`` breakpoints, 5-minute cache): a breakpoint ends the prompt, so the
     longest prefix equal to the previous prompt is read from the cache and the rest is written
     (billed at the table's cache-write price, 1.25x the base input price; reads at 0.1x). A
     prompt (or a prefix) shorter than :attr:`PromptCaching.min_tokens` is not cached.
   - OpenAI (``automatic`` prefix cache): prompts of 1,024 tokens or more are cached; a cache hit
     covers the shared prefix rounded down to 1,024 + a multiple of 128 tokens, billed at the
     model's cached-input price; no write surcharge (the rest is uncached input, or a cache write
     for a model whose table row has a cache-write price).

2. :meth:`PriceModel.price` prices a :class:`BilledTokens` in USD (:class:`Cost`), with the
   table's rates and its tier rule (a tiered price applies to every token of a call once the
   call's input passes the tier). Usage a provider reports (Anthropic's
   ``cache_creation_input_tokens`` / ``cache_read_input_tokens``, OpenAI's ``cached_tokens``) is
   priced the same way, with no modelling.

:meth:`PriceModel.cost` does both. Amounts are :class:`~decimal.Decimal` USD, exact.

What the model leaves out: cache expiry between calls (the 5-minute TTL; every call is assumed
to follow the previous one within it), Anthropic's 1-hour cache (priced higher), the limit of 4
breakpoints per request and the 20-block look-back (a read shorter than the previous prompt needs
a breakpoint at that point in an earlier call; we assume one is there), OpenAI's cache misses
under load or routing, batch and flex discounts, priority tiers, and per-request fees.

The prices are the snapshot bundled with the installed ``genai-prices``: nothing is fetched at
run time, and a process-wide auto-updated snapshot (``genai_prices.UpdatePrices``) is ignored,
so a figure depends only on the installed version and the pricing date.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from agent_memory.errors import ConfigurationError, InvalidArgumentError

if TYPE_CHECKING:
    from genai_prices.data_snapshot import DataSnapshot
    from genai_prices.types import ModelPrice

__all__ = [
    "ANTHROPIC_CACHING",
    "HEADLINE_MODELS",
    "OPENAI_CACHING",
    "BilledTokens",
    "CallTokens",
    "Cost",
    "PriceModel",
    "PromptCaching",
    "headline_price_models",
    "prices_version",
]

_PER_MTOK = 1_000_000


@dataclass(frozen=True)
class PromptCaching:
    """How a provider caches prompt prefixes (its documented rule, not a price)."""

    kind: Literal["explicit", "automatic", "none"]
    """``explicit``: the caller places cache breakpoints (Anthropic ``cache_control``); we assume
    one ends every prompt, so everything past the cached prefix is written. ``automatic``: the
    provider caches every long enough prompt by itself (OpenAI). ``none``: no caching."""
    min_tokens: int = 0
    """A prompt shorter than this is not cached, and a cached prefix is at least this long, in
    tokens."""
    step_tokens: int = 1
    """A cache hit covers ``min_tokens`` plus a multiple of this many tokens (OpenAI: 128)."""

    def __post_init__(self) -> None:
        if self.min_tokens < 0 or self.step_tokens < 1:
            raise InvalidArgumentError(
                f"PromptCaching needs min_tokens >= 0 and step_tokens >= 1, got {self.min_tokens} and {self.step_tokens}"
            )

    def cached_prefix(self, prompt_tokens: int, prefix_tokens: int) -> int:
        """Tokens of a prompt read from the cache, given ``prefix_tokens`` equal to the previous
        prompt from the start: 0 when caching is off or the prefix (or the prompt) is below
        :attr:`min_tokens`, else the prefix rounded down to ``min_tokens + k * step_tokens``."""
        if self.kind == "none" or prompt_tokens < self.min_tokens or prefix_tokens < max(self.min_tokens, 1):
            return 0
        return prefix_tokens - (prefix_tokens - self.min_tokens) % self.step_tokens


ANTHROPIC_CACHING = PromptCaching("explicit", min_tokens=1024)
"""Anthropic: explicit breakpoints, 5-minute cache. 1,024 tokens is the minimum cacheable prompt
of the Sonnet models (Haiku and some Opus models need 2,048 or 4,096: pass your own)."""

OPENAI_CACHING = PromptCaching("automatic", min_tokens=1024, step_tokens=128)
"""OpenAI: automatic prefix caching of prompts of 1,024 tokens or more, hits in 128-token steps."""

_CACHING_BY_PROVIDER = {"anthropic": ANTHROPIC_CACHING, "openai": OPENAI_CACHING}


@dataclass(frozen=True)
class CallTokens:
    """What one LLM call sends and produces, in tokens."""

    prompt_tokens: int
    """Every input token of the call: messages, tool definitions, system prompt."""
    prefix_tokens: int = 0
    """Leading prompt tokens equal to the previous call's prompt (0: the first call, or nothing
    shared); a prefix cache can serve at most these."""
    output_tokens: int = 0
    """Tokens the call produced (0 when unknown)."""

    def __post_init__(self) -> None:
        if self.prompt_tokens < 0 or self.output_tokens < 0 or not 0 <= self.prefix_tokens <= self.prompt_tokens:
            raise InvalidArgumentError(
                "CallTokens needs 0 <= prefix_tokens <= prompt_tokens and output_tokens >= 0, got "
                f"prompt {self.prompt_tokens}, prefix {self.prefix_tokens}, output {self.output_tokens}"
            )


@dataclass(frozen=True)
class BilledTokens:
    """Tokens as a provider bills them. The four input parts add up to the prompt."""

    uncached_input_tokens: int = 0
    """Input billed at the base input price."""
    cache_write_tokens: int = 0
    """Input written to the cache (Anthropic: 1.25x the base price for the 5-minute cache)."""
    cache_read_tokens: int = 0
    """Input read from the cache (Anthropic 0.1x; OpenAI the model's cached-input price)."""
    output_tokens: int = 0
    """Output tokens."""

    def __post_init__(self) -> None:
        if any(getattr(self, f.name) < 0 for f in fields(self)):
            raise InvalidArgumentError(f"token counts cannot be negative: {self}")

    @property
    def input_tokens(self) -> int:
        """Every input token: uncached + cache writes + cache reads."""
        return self.uncached_input_tokens + self.cache_write_tokens + self.cache_read_tokens

    def __add__(self, other: BilledTokens) -> BilledTokens:
        if not isinstance(other, BilledTokens):
            return NotImplemented
        return BilledTokens(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))


@dataclass(frozen=True)
class Cost:
    """What a call (or a sum of calls) costs, in USD, by part."""

    uncached_input_usd: Decimal = Decimal(0)
    """Input at the base input price."""
    cache_write_usd: Decimal = Decimal(0)
    """Input written to the cache."""
    cache_read_usd: Decimal = Decimal(0)
    """Input read from the cache."""
    output_usd: Decimal = Decimal(0)
    """Output."""

    @property
    def input_usd(self) -> Decimal:
        """Every input part."""
        return self.uncached_input_usd + self.cache_write_usd + self.cache_read_usd

    @property
    def total_usd(self) -> Decimal:
        """Input and output."""
        return self.input_usd + self.output_usd

    def __add__(self, other: Cost) -> Cost:
        if not isinstance(other, Cost):
            return NotImplemented
        return Cost(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def to_json(self, *, digits: int = 6) -> dict[str, float]:
        """The parts and ``total_usd`` as floats rounded to ``digits`` decimals (for reports)."""
        parts = {f.name: getattr(self, f.name) for f in fields(self)} | {"total_usd": self.total_usd}
        return {name: round(float(value), digits) for name, value in parts.items()}


@cache
def _bundled_snapshot() -> DataSnapshot:
    """The price table shipped inside ``genai-prices`` (our own instance: an auto-updated,
    process-wide snapshot never replaces it)."""
    from genai_prices.data import providers
    from genai_prices.data_snapshot import DataSnapshot

    return DataSnapshot(providers=providers, from_auto_update=False)


def prices_version() -> str:
    """The installed ``genai-prices`` version: the price table every figure is priced with."""
    from importlib.metadata import version

    return version("genai-prices")


@dataclass(frozen=True)
class PriceModel:
    """One provider's model: its prices (from ``genai-prices``) and its prompt caching.

    Build one with :meth:`lookup`. Frozen and cheap to copy; thread-safe.
    """

    provider: str
    """``genai-prices`` provider id (``anthropic``, ``openai``, ...)."""
    model: str
    """``genai-prices`` model id (``claude-sonnet-4-6``, ``gpt-4o``, ...): also the label in reports."""
    name: str
    """The model's display name."""
    caching: PromptCaching
    """How the provider caches prompt prefixes."""
    priced_at: datetime
    """The date the prices hold on (a table row can change price on a date)."""
    prices: ModelPrice = field(repr=False, compare=False)
    """The table's prices per million tokens (``genai_prices.types.ModelPrice``)."""

    @classmethod
    def lookup(cls, model: str, *, provider: str | None = None, caching: PromptCaching | None = None,
               at: datetime | None = None) -> PriceModel:
        """The price model of ``model`` in the bundled table.

        Args:
            model: a model name as an API takes it (``claude-sonnet-4-6``, ``gpt-4o-2024-08-06``);
                matched as ``genai-prices`` matches it.
            provider: the ``genai-prices`` provider id; ``None``: the provider whose models match.
            caching: the prompt caching rule; ``None``: the provider's (:data:`ANTHROPIC_CACHING`,
                :data:`OPENAI_CACHING`). A model whose table row has no cached-input price gets
                ``PromptCaching("none")`` whatever is given.
            at: the date to price at; ``None``: now (UTC).

        Raises:
            ConfigurationError: the table has no such model or provider, or no caching rule is
                known for the provider and ``caching`` is not given.
        """
        try:
            found_provider, info = _bundled_snapshot().find_provider_model(model, None, provider, None)
        except LookupError as exc:
            raise ConfigurationError(
                f"no price for model {model!r}{f' of {provider!r}' if provider else ''} in genai-prices "
                f"{prices_version()}: use a model id of its table (e.g. claude-sonnet-4-6, gpt-4o, gpt-5)"
            ) from exc
        if caching is None:
            caching = _CACHING_BY_PROVIDER.get(found_provider.id)
            if caching is None:
                raise ConfigurationError(
                    f"no prompt-caching rule known for provider {found_provider.id!r}: pass caching=PromptCaching(...)"
                )
        when = at or datetime.now(tz=UTC)
        prices = info.get_prices(when)
        if caching.kind != "none" and prices.cache_read_mtok is None:
            caching = PromptCaching("none")  # the table has no cached price: the model is not cached
        name = info.name or info.id
        if name == name.lower() and name.replace(" ", "-") == info.id:
            name = info.id  # the table's lower-case spelling of the id itself ("gpt 4o"): the id reads better
        return cls(provider=found_provider.id, model=info.id, name=name, caching=caching, priced_at=when,
                   prices=prices)

    @classmethod
    def lookup_or_reason(cls, model: str, *, provider: str | None = None) -> tuple[PriceModel | None, str | None]:
        """:meth:`lookup`, for callers that run unpriced rather than refuse a model the bundled
        table lacks (a local model behind vLLM or Ollama): ``(price model, None)``, or ``(None,
        why)`` with the lookup's message."""
        try:
            return cls.lookup(model, provider=provider), None
        except ConfigurationError as exc:
            return None, str(exc)

    @property
    def label(self) -> str:
        """The name in reports: the model id."""
        return self.model

    def rates_usd_per_mtok(self) -> dict[str, Decimal]:
        """The base rate of each billed part in USD per million tokens: ``input``,
        ``cache_write``, ``cache_read``, ``output`` (a part the table has no rate for is billed
        at the input rate; a tiered rate gives its base, below the first tier)."""
        from genai_prices.types import TieredPrices

        def base(rate: Any) -> Decimal:
            return rate.base if isinstance(rate, TieredPrices) else Decimal(rate or 0)

        prices = self.prices
        return {
            "input": base(prices.input_mtok),
            "cache_write": base(prices.cache_write_mtok if prices.cache_write_mtok is not None else prices.input_mtok),
            "cache_read": base(prices.cache_read_mtok if prices.cache_read_mtok is not None else prices.input_mtok),
            "output": base(prices.output_mtok),
        }

    def describe(self) -> str:
        """The table's rates in words: ``input $3, cache write $3.75, cache read $0.3, output $15
        per MTok`` (a part without a rate of its own left out; ``tiered`` when a rate changes above
        a prompt size)."""
        from genai_prices.types import TieredPrices

        own = {"cache_write": self.prices.cache_write_mtok, "cache_read": self.prices.cache_read_mtok}
        rates = ", ".join(f"{part.replace('_', ' ')} ${rate.normalize():f}"
                          for part, rate in self.rates_usd_per_mtok().items() if own.get(part, True) is not None)
        tiered = any(isinstance(value, TieredPrices) for value in vars(self.prices).values())
        return f"{rates} per MTok" + (" (tiered above a prompt size)" if tiered else "")

    def split(self, call: CallTokens) -> BilledTokens:
        """How the provider bills ``call``'s tokens under its prompt caching (module docstring)."""
        read = self.caching.cached_prefix(call.prompt_tokens, call.prefix_tokens)
        rest = call.prompt_tokens - read
        cached = self.caching.kind != "none" and call.prompt_tokens >= self.caching.min_tokens
        writes = cached and (self.caching.kind == "explicit" or self.prices.cache_write_mtok is not None)
        return BilledTokens(
            uncached_input_tokens=0 if writes else rest,
            cache_write_tokens=rest if writes else 0,
            cache_read_tokens=read,
            output_tokens=call.output_tokens,
        )

    def price(self, tokens: BilledTokens) -> Cost:
        """The cost of billed tokens: each part at the table's rate for it (a missing cache-write
        rate is the input rate), a tiered rate chosen by the call's whole input. For one call's
        tokens: a sum of calls would pass a tier that no single call passes."""
        from genai_prices.types import calc_unit_price

        prices = self.prices
        total_input = tokens.input_tokens

        def usd(rate: Any, count: int) -> Decimal:
            return calc_unit_price(rate, count, total_input, _PER_MTOK) if count else Decimal(0)

        write_rate = prices.cache_write_mtok if prices.cache_write_mtok is not None else prices.input_mtok
        read_rate = prices.cache_read_mtok if prices.cache_read_mtok is not None else prices.input_mtok
        return Cost(
            uncached_input_usd=usd(prices.input_mtok, tokens.uncached_input_tokens),
            cache_write_usd=usd(write_rate, tokens.cache_write_tokens),
            cache_read_usd=usd(read_rate, tokens.cache_read_tokens),
            output_usd=usd(prices.output_mtok, tokens.output_tokens),
        )

    def cost(self, call: CallTokens) -> Cost:
        """What ``call`` costs: :meth:`price` of :meth:`split`."""
        return self.price(self.split(call))


HEADLINE_MODELS: tuple[tuple[str, str], ...] = (
    ("anthropic", "claude-sonnet-4-6"),
    ("openai", "gpt-4o"),
    ("openai", "gpt-5"),
)
"""(provider, model) of the price models in the replay's headline: one Claude Sonnet (cache read
0.1x, write 1.25x), one gpt-4o-class (cached input 0.5x) and one gpt-5-class (cached input 0.1x)."""


def headline_price_models(*, at: datetime | None = None) -> tuple[PriceModel, ...]:
    """The :data:`HEADLINE_MODELS` priced at ``at`` (``None``: now)."""
    return tuple(PriceModel.lookup(model, provider=provider, at=at) for provider, model in HEADLINE_MODELS)
