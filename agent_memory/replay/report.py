"""Replay report, the data: per source and in total, what every strategy's prompts counted and
cost (:class:`ReplayReport`, built by :func:`summarize`; the kernel replay by
:func:`summarize_kernel`). Its text is :mod:`~agent_memory.replay.report_text` (``report.md``, the
rich table); its plots and the files are :mod:`~agent_memory.replay.report_plots`.

Reductions are 1 − Σ strategy prompt tokens / Σ naive prompt tokens over a source;
negative numbers are savings. *Net* counts everything sent with each call (messages and every
tool definition: the agent's own in every strategy, memory tools where offered); *gross* counts the
messages only. Cache-reusable prefix: per prompt, the net tokens a provider's prefix cache could
reuse (the tool definitions when unchanged, then the leading messages identical to the previous
prompt's).

Memory time: per agent step of an agent-memory strategy, the wall time of what the memory did
(storing the step's results, building and committing the prompt, simulated retrieves), p50 and p95
over a source's steps; runs are replayed several at a time (``--workers``, :attr:`ReplayReport.workers`),
so the figures include waiting for the other runs' threads.

Cost: each call priced with prompt caching by :class:`~agent_memory.pricing.PriceModel` (prices
from ``genai-prices``): its net prompt tokens, the prefix equal to the previous call's prompt, and
its output (the assistant message the trace has after the call, the same in every strategy).
Change = Σ strategy cost / Σ naive cost − 1 over a source.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

from agent_memory.pricing import CallTokens, Cost, PriceModel, headline_price_models, prices_version
from agent_memory.replay.engine import DEFAULT_WORKERS, RunResult, StrategyCurve
from agent_memory.replay.kernel_replay import KernelRunResult
from agent_memory.replay.react_check import ReactCheck
from agent_memory.replay.strategies import DEFAULT_STRATEGIES, MASKING, NAIVE

__all__ = [
    "ReplayReport",
    "SourceSummary",
    "StrategyCost",
    "StrategySummary",
    "curve_costs",
    "summarize",
    "summarize_kernel",
]

TOTAL = "total"
"""Name of the summary over every real source (not ``scripted``, i.e. not assembled); over all
sources when every one is assembled. The page session's raw HTML would otherwise swamp the real
traces' figures."""

PAGES_SUFFIX = " (constructed: ReAct turns, real pages)"
"""After the name of an assembled source (the page session: real ReAct turns, real pages as the
Search results; their pairing is not real) in tables and plots."""

DEFAULT_LABEL = DEFAULT_STRATEGIES[0].label
"""The label of the library's default strategy (``full_once``), marked in the report."""


@dataclass
class StrategyCost:
    """One strategy's LLM calls over one source, priced under one price model, in USD."""

    total_usd: float
    """Σ cost of every call: input (uncached, cache writes, cache reads) and output."""
    uncached_input_usd: float
    """Σ input billed at the base input price."""
    cache_write_usd: float
    """Σ input written to the prompt cache."""
    cache_read_usd: float
    """Σ input read from the prompt cache."""
    output_usd: float
    """Σ output (the same in every strategy)."""
    change: float
    """total_usd / naive total_usd − 1 (negative: cheaper than naive; 0.0 when naive costs 0)."""
    runs_dearer: int = 0
    """Runs that cost more than naive under this price model (a run too short to pay back what
    the memory tools cost per call, say); the total above is over every run."""
    worst_run_change: float = 0.0
    """The largest run's cost / its naive cost − 1 (≤ 0.0 when no run cost more than naive)."""


@dataclass
class StrategySummary:
    """One strategy over one source."""

    prompt_tokens: int
    """Σ net prompt tokens over every LLM call (messages + every tool definition sent)."""
    message_tokens: int
    """Σ gross prompt tokens (messages only)."""
    tool_tokens: int
    """Σ tokens of the tool definitions sent (the agent's own and memory tools)."""
    reduction: float
    """Net: 1 − prompt_tokens / naive prompt_tokens (negative: a saving)."""
    reduction_gross: float
    """Gross: 1 − message_tokens / naive message_tokens."""
    prefix_tokens: int
    """Σ net tokens a prefix cache could reuse."""
    prefix_share: float
    """prefix_tokens / prompt_tokens."""
    largest_prompt: int
    """Largest single net prompt, in tokens."""
    runs_citing: int | None = None
    """Agent-memory strategies: runs in which citing began (``None`` for the baselines and peers)."""
    cost: dict[str, StrategyCost] = field(default_factory=dict)
    """Per price model label (:attr:`ReplayReport.price_models`, in that order); empty when
    nothing was priced."""
    reduction_by_price_model: dict[str, float] = field(default_factory=dict)
    """A cache-aware strategy replayed under several price models: the net token reduction of its
    run under each (the figures above are its run under the first); empty otherwise."""
    needed: int = 0
    """Values the runs' calls used that only an earlier tool result held
    (:mod:`~agent_memory.replay.used_values`); the same for every strategy."""
    kept: int = 0
    """Of :attr:`needed`, those this strategy's prompt for the call held (before any retrieve)."""
    calls_missed: int = 0
    """Calls whose prompt missed at least one needed value."""
    retrieves: int = 0
    """Simulated retrieve calls (or tool re-runs, ``+rerun``) made for those misses: extra LLM
    calls, priced in every figure above."""
    retrieve_tokens: int = 0
    """Tokens of what those calls brought into the history."""
    lost: int = 0
    """Needed values missed and never brought back (clearing strategies: the content is gone)."""
    memory_ms_p50: float | None = None
    """Agent-memory strategies: the median of the memory's own wall time per agent step, in
    milliseconds (:attr:`~agent_memory.replay.engine.StrategyCurve.memory_ms`: storing the step's
    results, building and committing the prompt, simulated retrieves); ``None`` for the baselines
    and peers, which have no memory."""
    memory_ms_p95: float | None = None
    """The same, 95th percentile (nearest rank)."""

    @property
    def kept_share(self) -> float:
        """kept / needed (1.0 when nothing was needed)."""
        return self.kept / self.needed if self.needed else 1.0


@dataclass
class SourceSummary:
    """Every run of one source."""

    source: str
    runs: int
    calls: int
    results: int
    result_tokens: int
    """Σ tokens of the tool results' contents."""
    own_tool_tokens: int
    """Tokens of the agent's own tool definitions per call (0 when the traces have none)."""
    strategies: dict[str, StrategySummary]
    citation_tokens_p50: float
    citation_tokens_p95: float
    citation_tokens_max: int
    roundtrip_ok: int
    """Results that came back identical by id."""
    scripted: bool = False
    """Assembled, not recorded as is (the page session: real ReAct turns, a real page substituted
    for each Search result); kept out of the total. The name is historical."""
    react: dict[str, Any] | None = None
    """ReAct Query Memory check, when the source has questions."""
    output_tokens: int = 0
    """Σ output tokens of every call (what the model wrote after it, in the trace)."""


@dataclass
class ReplayReport:
    """The whole replay."""

    sources: list[SourceSummary]
    total: SourceSummary
    strategies: list[str]
    """Strategy labels, naive first."""
    memory_tools: dict[str, int] = field(default_factory=dict)
    """Token sizes of the memory tools as OpenAI JSON (see :func:`summarize`)."""
    curves: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    """Per source, per strategy: net prompt tokens of each call, runs one after another."""
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    kernel: list[dict[str, Any]] = field(default_factory=list)
    """The kernel replay per source (``--budget``): see :func:`summarize_kernel`."""
    kernel_budget: int | None = None
    """The conversation budget of the kernel replay, in tokens (``None``: not run)."""
    default: str = DEFAULT_LABEL
    """The strategy the headline compares with naive (the library's default when replayed, else
    the first agent-memory strategy)."""
    price_models: list[dict[str, Any]] = field(default_factory=list)
    """The price models, headline order: label, provider, model, name, prices, caching rule."""
    prices: dict[str, str] = field(default_factory=dict)
    """Where the prices come from: ``genai_prices`` (version) and ``priced_on`` (date)."""
    cost_curves: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    """Per source, per strategy: the cost of each call in USD under the first price model."""
    peers: dict[str, str] = field(default_factory=dict)
    """Per peer strategy (label): what it is and at what settings (:mod:`~agent_memory.replay.peers`)."""
    workers: int = DEFAULT_WORKERS
    """Runs replayed at once (threads): the memory's wall time per step includes waiting for the
    others' (:attr:`StrategySummary.memory_ms_p50`)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "strategies": self.strategies,
            "default": self.default,
            "peers": self.peers,
            "price_models": self.price_models,
            "prices": self.prices,
            "memory_tools": self.memory_tools,
            "kernel": {"budget": self.kernel_budget, "sources": self.kernel} if self.kernel_budget is not None else None,
            "sources": [asdict(s) for s in self.sources],
            "total": asdict(self.total),
            "seconds": round(self.seconds, 1),
            "workers": self.workers,
            "notes": self.notes,
        }


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, math.ceil(q / 100 * len(ordered)) - 1)
    return float(ordered[rank])


def _ratio(value: float, base: float) -> float:
    return round(value / base - 1, 4) if base else 0.0


def curve_costs(curve: StrategyCurve, output_tokens: Sequence[int], model: PriceModel) -> list[Cost]:
    """The cost of each call of one strategy's curve (oldest first), simulated retrieve calls
    included: its net prompt, the prefix equal to the previous prompt
    (:attr:`StrategyCurve.prefix_tokens`) and its output (the curve's own
    :attr:`~StrategyCurve.output_tokens`, else ``output_tokens``, one per call; when neither has
    one per call, output is counted as 0)."""
    outputs = next((o for o in (curve.output_tokens, output_tokens) if len(o) == len(curve.prompt_tokens)),
                   [0] * len(curve.prompt_tokens))
    return [
        model.cost(CallTokens(prompt_tokens=prompt, prefix_tokens=prefix, output_tokens=output))
        for prompt, prefix, output in zip(curve.prompt_tokens, curve.prefix_tokens, outputs)
    ]


_Priced = dict[int, dict[str, dict[str, list[Cost]]]]
"""Per result (``id``), per strategy, per price model label: the cost of each call."""


def _price(results: Sequence[RunResult], strategies: Sequence[str], models: Sequence[PriceModel]) -> _Priced:
    """Each call priced; a cache-aware strategy under each model from the run that knew that
    model (:attr:`RunResult.priced_curves`), else from its one run."""
    return {
        id(r): {label: {m.label: curve_costs(r.priced_curves.get(label, {}).get(m.label, r.curves[label]),
                                             r.output_tokens, m) for m in models} for label in strategies}
        for r in results
    }


def _costs(results: Sequence[RunResult], strategies: Sequence[str], models: Sequence[PriceModel],
           priced: _Priced) -> dict[str, dict[str, StrategyCost]]:
    sums: dict[str, dict[str, Cost]] = {
        label: {m.label: sum((c for r in results for c in priced[id(r)][label][m.label]), Cost()) for m in models}
        for label in strategies
    }
    out: dict[str, dict[str, StrategyCost]] = {}
    for label in strategies:
        out[label] = {}
        for m in models:
            total, naive = sums[label][m.label], sums[NAIVE][m.label]
            parts = total.to_json()
            per_run = [_run_change(priced[id(r)][label][m.label], priced[id(r)][NAIVE][m.label]) for r in results]
            out[label][m.label] = StrategyCost(
                total_usd=parts["total_usd"], uncached_input_usd=parts["uncached_input_usd"],
                cache_write_usd=parts["cache_write_usd"], cache_read_usd=parts["cache_read_usd"],
                output_usd=parts["output_usd"],
                change=round(float(total.total_usd / naive.total_usd - 1), 4) if naive.total_usd else 0.0,
                runs_dearer=sum(change > 0 for change in per_run),
                worst_run_change=round(max(per_run, default=0.0), 4),
            )
    return out


def _run_change(costs: Sequence[Cost], naive: Sequence[Cost]) -> float:
    """One run's cost / its naive cost − 1 (0.0 when naive costs nothing)."""
    mine, base = sum((c.total_usd for c in costs), Decimal(0)), sum((c.total_usd for c in naive), Decimal(0))
    return float(mine / base - 1) if base else 0.0


def _step_ms(curves: Sequence[StrategyCurve], q: float) -> float | None:
    """The ``q``-th percentile of the memory's wall time per step over ``curves``, in ms, to 0.01 ms;
    ``None`` when no curve timed a step (a strategy without memory)."""
    steps = [ms for curve in curves for ms in curve.memory_ms]
    return round(_percentile(steps, q), 2) if steps else None


def _summary(name: str, results: Sequence[RunResult], strategies: Sequence[str],
             costs: dict[str, dict[str, StrategyCost]] | None = None) -> SourceSummary:
    peers = {label for r in results for label in r.peers}
    naive_net = sum(r.curves[NAIVE].total for r in results)
    naive_gross = sum(r.curves[NAIVE].gross_total for r in results)
    summaries = {}
    for label in strategies:
        curves = [r.curves[label] for r in results]
        tokens = sum(c.total for c in curves)
        prefix = sum(c.prefix_total for c in curves)
        summaries[label] = StrategySummary(
            prompt_tokens=tokens,
            message_tokens=sum(c.gross_total for c in curves),
            tool_tokens=sum(sum(c.tool_tokens) for c in curves),
            reduction=_ratio(tokens, naive_net),
            reduction_gross=_ratio(sum(c.gross_total for c in curves), naive_gross),
            prefix_tokens=prefix,
            prefix_share=round(prefix / tokens, 4) if tokens else 0.0,
            largest_prompt=max((c.largest for c in curves), default=0),
            runs_citing=None if label in (NAIVE, MASKING) or label.startswith(MASKING) or label in peers
            else sum(c.citing_since is not None for c in curves),
            cost=dict((costs or {}).get(label, {})),
            needed=sum(c.needed for c in curves),
            kept=sum(c.kept for c in curves),
            calls_missed=sum(c.calls_missed for c in curves),
            retrieves=sum(c.retrieves for c in curves),
            retrieve_tokens=sum(c.retrieve_tokens for c in curves),
            lost=sum(c.lost for c in curves),
            memory_ms_p50=_step_ms(curves, 50),
            memory_ms_p95=_step_ms(curves, 95),
            reduction_by_price_model={
                model: _ratio(sum(r.priced_curves[label][model].total for r in results), naive_net)
                for model in dict.fromkeys(m for r in results for m in r.priced_curves.get(label, {}))
            },
        )
    citations = [t for r in results for t in r.citation_tokens]
    return SourceSummary(
        source=name,
        runs=len(results),
        calls=sum(r.calls for r in results),
        results=sum(r.results for r in results),
        result_tokens=sum(sum(r.result_tokens) for r in results),
        own_tool_tokens=max((r.own_tool_tokens for r in results), default=0),
        strategies=summaries,
        citation_tokens_p50=_percentile(citations, 50),
        citation_tokens_p95=_percentile(citations, 95),
        citation_tokens_max=max(citations, default=0),
        roundtrip_ok=sum(r.roundtrip_ok for r in results),
        scripted=any(r.scripted for r in results),
        output_tokens=sum(sum(r.output_tokens) for r in results),
    )


def summarize_kernel(results: Sequence[KernelRunResult]) -> list[dict[str, Any]]:
    """The kernel replay per source (first-seen order): runs, calls, compactions, truncations,
    the largest prompt, Σ prompt tokens with and without the tool definitions, and the checks."""
    by_source: dict[str, list[KernelRunResult]] = {}
    for result in results:
        by_source.setdefault(result.source, []).append(result)
    rows = []
    for source, group in by_source.items():
        failures = [f"{r.run_id}: {f}" for r in group for f in r.failures]
        rows.append({
            "source": source,
            "runs": len(group),
            "calls": sum(r.calls for r in group),
            "compactions": sum(r.compactions for r in group),
            "runs_compacting": sum(r.compactions > 0 for r in group),
            "truncations": sum(r.truncations for r in group),
            "largest_prompt": max((r.largest_prompt for r in group), default=0),
            "largest_budget": max((r.budget for r in group), default=0),
            "largest_share_of_budget": round(max((r.largest_prompt / r.budget for r in group if r.budget), default=0.0), 4),
            "prompt_tokens": sum(r.prompt_tokens for r in group),
            "prompt_tokens_net_of_tools": sum(r.prompt_tokens - r.tool_tokens for r in group),
            "turns": sum(r.turns for r in group),
            "checks_failed": len(failures),
            "failures": failures[:20],
        })
    return rows


def _price_model_json(model: PriceModel) -> dict[str, Any]:
    caching = model.caching
    return {
        "label": model.label, "provider": model.provider, "model": model.model, "name": model.name,
        "prices": model.describe(),
        "caching": {"kind": caching.kind, "min_tokens": caching.min_tokens, "step_tokens": caching.step_tokens},
    }


def summarize(results: Sequence[RunResult], *, react: dict[str, ReactCheck] | None = None,
              seconds: float = 0.0, memory_tools: dict[str, int] | None = None,
              price_models: Sequence[PriceModel] | None = None) -> ReplayReport:
    """Summaries per source (in first-seen order) and in total, tokens and cost.

    Args:
        results: the replayed runs.
        react: the ReAct check per source.
        seconds: how long the replay took.
        memory_tools: token sizes of the memory tools, for the report
            (:func:`~agent_memory.replay.engine.memory_tool_sizes`).
        price_models: what every call is priced under, the first one also for ``cost.png``;
            ``None``: :func:`~agent_memory.pricing.headline_price_models`; ``()``: no cost.

    Raises:
        ValueError: if ``results`` is empty.
        ConfigurationError: if a headline model is missing from the installed price table.
    """
    if not results:
        raise ValueError("nothing was replayed")
    models = list(headline_price_models() if price_models is None else price_models)
    strategies = list(results[0].curves)
    own = [label for label in strategies if label not in results[0].peers]  # a peer never heads the report
    default = DEFAULT_LABEL if DEFAULT_LABEL in strategies else own[min(2, len(own) - 1)]
    by_source: dict[str, list[RunResult]] = {}
    for result in results:
        by_source.setdefault(result.source, []).append(result)
    priced = _price(results, strategies, models)
    sources = []
    for name, group in by_source.items():
        summary = _summary(name, group, strategies, _costs(group, strategies, models, priced))
        check = (react or {}).get(name)
        if check is not None and check.runs_checked:
            summary.react = {
                "runs_checked": check.runs_checked,
                "hits_in_run": check.hits_in_run,
                "hit_rate_in_run": round(check.hits_in_run / check.runs_checked, 4),
                "hits_pooled": check.hits_pooled,
                "hit_rate_pooled": round(check.hits_pooled / check.runs_checked, 4),
                "pooled_items": check.pooled_items,
                "misses_pooled": check.misses,
            }
        sources.append(summary)
    curves = {
        name: {label: [t for r in group for t in r.curves[label].prompt_tokens] for label in strategies}
        for name, group in by_source.items()
    }
    cost_curves = {
        name: {label: [float(c.total_usd) for r in group for c in priced[id(r)][label][models[0].label]]
               for label in strategies}
        for name, group in by_source.items()
    } if models else {}
    real = [r for r in results if not r.scripted] or list(results)
    total = _summary(TOTAL, real, strategies, _costs(real, strategies, models, priced))
    prices = {"genai_prices": prices_version(), "priced_on": models[0].priced_at.date().isoformat()} if models else {}
    return ReplayReport(sources=sources, total=total, strategies=strategies, memory_tools=dict(memory_tools or {}),
                        curves=curves, seconds=seconds, default=default,
                        price_models=[_price_model_json(m) for m in models], prices=prices, cost_curves=cost_curves,
                        peers={label: text for r in results for label, text in r.peers.items()})
