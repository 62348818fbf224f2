"""Prices and the cost of a call under prompt caching (agent_memory.pricing).

Every expected amount is computed here from the rates genai-prices' own lookup gives, in exact
Decimal arithmetic, so the tests hold for any version of its table.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from genai_prices import Usage, calc_price
from genai_prices.data_snapshot import DataSnapshot, get_snapshot, set_custom_snapshot

from agent_memory.errors import ConfigurationError, InvalidArgumentError
from agent_memory.pricing import (
    HEADLINE_MODELS,
    BilledTokens,
    CallTokens,
    Cost,
    PriceModel,
    PromptCaching,
    headline_price_models,
)

NOW = datetime.now(tz=UTC)
M = Decimal(1_000_000)


def rates(provider: str, model: str) -> dict[str, Decimal | None]:
    """The table's rates per MTok, as genai-prices itself finds them."""
    _, info = get_snapshot().find_provider_model(model, None, provider, None)
    prices = info.get_prices(NOW)
    return {"input": prices.input_mtok, "cache_write": prices.cache_write_mtok,
            "cache_read": prices.cache_read_mtok, "output": prices.output_mtok}


@pytest.fixture(scope="module")
def sonnet() -> PriceModel:
    return PriceModel.lookup("claude-sonnet-4-6", provider="anthropic")


@pytest.fixture(scope="module")
def gpt4o() -> PriceModel:
    return PriceModel.lookup("gpt-4o", provider="openai")


def test_anthropic_reads_the_prefix_and_writes_the_rest(sonnet: PriceModel) -> None:
    r = rates("anthropic", "claude-sonnet-4-6")
    # Anthropic's documented multipliers for the 5-minute cache, as the table has them.
    assert r["cache_write"] == r["input"] * Decimal("1.25") and r["cache_read"] == r["input"] * Decimal("0.1")
    call = CallTokens(prompt_tokens=2000, prefix_tokens=1500, output_tokens=100)
    assert sonnet.split(call) == BilledTokens(cache_write_tokens=500, cache_read_tokens=1500, output_tokens=100)
    cost = sonnet.cost(call)
    assert cost == Cost(uncached_input_usd=Decimal(0), cache_write_usd=500 * r["cache_write"] / M,
                        cache_read_usd=1500 * r["cache_read"] / M, output_usd=100 * r["output"] / M)
    assert cost.total_usd == (500 * r["input"] * Decimal("1.25") + 1500 * r["input"] * Decimal("0.1")
                              + 100 * r["output"]) / M
    # The same usage priced by genai-prices itself (input_tokens counts every input token).
    usage = Usage(input_tokens=2000, cache_write_tokens=500, cache_read_tokens=1500, output_tokens=100)
    assert cost.total_usd == calc_price(usage, "claude-sonnet-4-6", provider_id="anthropic").total_price
    # The first call of a run writes its whole prompt.
    assert sonnet.split(CallTokens(5000)) == BilledTokens(cache_write_tokens=5000)


def test_anthropic_prompt_below_the_minimum_is_not_cached(sonnet: PriceModel) -> None:
    r = rates("anthropic", "claude-sonnet-4-6")
    short = CallTokens(prompt_tokens=1000, prefix_tokens=900)
    assert sonnet.split(short) == BilledTokens(uncached_input_tokens=1000)
    assert sonnet.cost(short).total_usd == 1000 * r["input"] / M
    # A prefix below the minimum is not read, the prompt (above it) is written whole.
    assert sonnet.split(CallTokens(prompt_tokens=3000, prefix_tokens=1023)) == BilledTokens(cache_write_tokens=3000)
    assert sonnet.split(CallTokens(prompt_tokens=3000, prefix_tokens=1024)) == BilledTokens(
        cache_write_tokens=1976, cache_read_tokens=1024)


def test_openai_caches_from_1024_tokens_in_128_token_steps(gpt4o: PriceModel) -> None:
    r = rates("openai", "gpt-4o")
    assert r["cache_write"] is None  # no write surcharge
    call = CallTokens(prompt_tokens=2000, prefix_tokens=1500, output_tokens=100)
    # 1,500 shared tokens: a hit of 1,024 + 3 x 128 = 1,408; the other 592 are plain input.
    assert gpt4o.split(call) == BilledTokens(uncached_input_tokens=592, cache_read_tokens=1408, output_tokens=100)
    assert gpt4o.cost(call).total_usd == (592 * r["input"] + 1408 * r["cache_read"] + 100 * r["output"]) / M
    usage = Usage(input_tokens=2000, cache_read_tokens=1408, output_tokens=100)
    assert gpt4o.cost(call).total_usd == calc_price(usage, "gpt-4o", provider_id="openai").total_price
    cached = {prefix: gpt4o.split(CallTokens(prompt_tokens=4000, prefix_tokens=prefix)).cache_read_tokens
              for prefix in (1023, 1024, 1151, 1152, 1279, 4000)}
    assert cached == {1023: 0, 1024: 1024, 1151: 1024, 1152: 1152, 1279: 1152, 4000: 3968}
    # A prompt under 1,024 tokens is never cached, even when it repeats the previous one.
    assert gpt4o.split(CallTokens(prompt_tokens=1023, prefix_tokens=1023)) == BilledTokens(uncached_input_tokens=1023)


def test_gpt5_cached_input_is_a_tenth() -> None:
    gpt5 = PriceModel.lookup("gpt-5", provider="openai")
    r = rates("openai", "gpt-5")
    assert r["cache_read"] == r["input"] * Decimal("0.1")
    cost = gpt5.cost(CallTokens(prompt_tokens=2048, prefix_tokens=2048))
    assert cost == Cost(cache_read_usd=2048 * r["cache_read"] / M)


def test_a_model_without_a_cached_price_is_not_cached() -> None:
    model = PriceModel.lookup("gpt-4o-2024-05-13", provider="openai")
    r = rates("openai", "gpt-4o-2024-05-13")
    assert r["cache_read"] is None and model.caching.kind == "none"
    assert model.split(CallTokens(prompt_tokens=5000, prefix_tokens=4000)) == BilledTokens(uncached_input_tokens=5000)


def test_tiered_prices_follow_genai_prices() -> None:
    # Claude Sonnet 4.5's table row doubles the input rate above 200k input tokens (a cliff).
    model = PriceModel.lookup("claude-sonnet-4-5", provider="anthropic")
    for prompt in (200_000, 200_001):
        tokens = model.split(CallTokens(prompt_tokens=prompt, prefix_tokens=150_000, output_tokens=10))
        usage = Usage(input_tokens=prompt, cache_write_tokens=tokens.cache_write_tokens,
                      cache_read_tokens=tokens.cache_read_tokens, output_tokens=10)
        expected = calc_price(usage, "claude-sonnet-4-5", provider_id="anthropic").total_price
        assert model.price(tokens).total_usd == expected
    below = model.cost(CallTokens(prompt_tokens=200_000, prefix_tokens=150_000)).total_usd
    above = model.cost(CallTokens(prompt_tokens=200_001, prefix_tokens=150_000)).total_usd
    assert above > below * Decimal("1.5")


def test_sums_and_reported_usage() -> None:
    a = BilledTokens(uncached_input_tokens=1, cache_write_tokens=2, cache_read_tokens=3, output_tokens=4)
    assert (a + a).input_tokens == 12 and (a + a).output_tokens == 8
    cost = Cost(Decimal("0.1"), Decimal("0.2"), Decimal("0.3"), Decimal("0.4"))
    total = sum([cost, cost], Cost())
    assert total.total_usd == Decimal("2.0") and total.input_usd == Decimal("1.2")
    assert cost.to_json()["total_usd"] == 1.0


def test_bad_input_raises() -> None:
    with pytest.raises(InvalidArgumentError):
        CallTokens(prompt_tokens=10, prefix_tokens=11)
    with pytest.raises(InvalidArgumentError):
        CallTokens(prompt_tokens=-1)
    with pytest.raises(InvalidArgumentError):
        BilledTokens(cache_read_tokens=-5)
    with pytest.raises(InvalidArgumentError):
        PromptCaching("automatic", step_tokens=0)
    with pytest.raises(ConfigurationError, match="no price for model"):
        PriceModel.lookup("no-such-model-xyz", provider="openai")
    with pytest.raises(ConfigurationError, match="caching"):
        PriceModel.lookup("gemini-2.5-pro", provider="google")
    # callers that run unpriced get the lookup's message instead of the error
    found, reason = PriceModel.lookup_or_reason("qwen2.5-7b-instruct")
    assert found is None and reason is not None and reason.startswith("no price for model 'qwen2.5-7b-instruct'")
    found, reason = PriceModel.lookup_or_reason("gpt-4o")
    assert reason is None and found is not None and found.provider == "openai"


def test_headline_models_and_custom_caching() -> None:
    models = headline_price_models(at=NOW)
    assert [(m.provider, m.model) for m in models] == list(HEADLINE_MODELS)
    assert [m.caching.kind for m in models] == ["explicit", "automatic", "automatic"]
    assert "cache write" in models[0].describe() and "cache write" not in models[1].describe()
    assert models[1].rates_usd_per_mtok()["cache_write"] == models[1].rates_usd_per_mtok()["input"]
    exact = PriceModel.lookup("gpt-4o", provider="openai", caching=PromptCaching("automatic"))
    assert exact.split(CallTokens(prompt_tokens=2000, prefix_tokens=1500)).cache_read_tokens == 1500


def test_an_auto_updated_snapshot_is_ignored(sonnet: PriceModel) -> None:
    """genai-prices' UpdatePrices replaces a process-wide snapshot; our prices stay the bundled ones."""
    before = sonnet.cost(CallTokens(prompt_tokens=2000, prefix_tokens=1500))
    set_custom_snapshot(DataSnapshot(providers=[], from_auto_update=True))
    try:
        with pytest.raises(LookupError):  # genai-prices itself now sees an empty table
            calc_price(Usage(input_tokens=10), "claude-sonnet-4-6", provider_id="anthropic")
        again = PriceModel.lookup("claude-sonnet-4-6", provider="anthropic")
        assert again.cost(CallTokens(prompt_tokens=2000, prefix_tokens=1500)) == before
    finally:
        set_custom_snapshot(None)


def test_prices_load_without_network() -> None:
    """In a fresh process with every socket connection refused, prices load and no updater thread runs."""
    code = (
        "import socket, threading\n"
        "def refuse(*a, **k):\n    raise OSError('network used')\n"
        "socket.socket.connect = refuse\nsocket.create_connection = refuse\n"
        "from agent_memory.pricing import CallTokens, headline_price_models\n"
        "models = headline_price_models()\n"
        "print([str(m.cost(CallTokens(2000, 1500, 100)).total_usd) for m in models])\n"
        "print(sorted(t.name for t in threading.enumerate() if 'genai' in t.name))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    lines = out.strip().splitlines()
    assert lines[-1] == "[]" and lines[0].startswith("['0.00")
