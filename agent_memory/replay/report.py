"""Replay report: per source and in total, as a rich table, ``report.md``, ``report.json``,
``tokens.png`` (cumulative net prompt tokens per LLM call, one panel per source) and ``cost.png``
(cumulative cost per LLM call under the first price model, one panel per source).

Reductions are 1 − Σ strategy prompt tokens / Σ naive prompt tokens over a source (BASELINES.md);
negative numbers are savings. *Net* counts everything sent with each call (messages and every
tool definition: the agent's own in every strategy, memory tools where offered); *gross* counts the
messages only. Cache-reusable prefix: per prompt, the net tokens a provider's prefix cache could
reuse (the tool definitions when unchanged, then the leading messages identical to the previous
prompt's).

Cost: each call priced with prompt caching by :class:`~agent_memory.pricing.PriceModel` (prices
from ``genai-prices``): its net prompt tokens, the prefix equal to the previous call's prompt, and
its output (the assistant message the trace has after the call, the same in every strategy).
Change = Σ strategy cost / Σ naive cost − 1 over a source.

``report.md`` leads with one short table, the default strategy against naive per source (tokens
and cost under the headline price models); the details follow. Peer strategies
(:mod:`~agent_memory.replay.peers`) are columns of the detail tables like every other strategy, each
described in one line (what it is, at what settings, whether it is a re-implementation).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agent_memory.pricing import CallTokens, Cost, PriceModel, headline_price_models, prices_version
from agent_memory.replay.engine import RunResult, StrategyCurve
from agent_memory.replay.kernel_replay import KernelRunResult
from agent_memory.replay.react_check import ReactCheck
from agent_memory.replay.strategies import DEFAULT_STRATEGIES, MASKING, NAIVE

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "ReplayReport",
    "SourceSummary",
    "StrategyCost",
    "StrategySummary",
    "curve_costs",
    "figure",
    "summarize",
    "summarize_kernel",
    "write_report",
]

TOTAL = "total"
"""Name of the summary over every real source (not ``scripted``, i.e. not assembled); over all
sources when every one is assembled. The page session's raw HTML would otherwise swamp the real
traces' figures."""

PAGES_SUFFIX = " (ReAct turns, real pages)"
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
            "notes": self.notes,
        }


def _percentile(values: Sequence[int], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, math.ceil(q / 100 * len(ordered)) - 1)
    return float(ordered[rank])


def _ratio(value: float, base: float) -> float:
    return round(value / base - 1, 4) if base else 0.0


def curve_costs(curve: StrategyCurve, output_tokens: Sequence[int], model: PriceModel) -> list[Cost]:
    """The cost of each call of one strategy's curve (oldest first): its net prompt, the prefix
    equal to the previous prompt (:attr:`StrategyCurve.prefix_tokens`) and ``output_tokens`` (one
    per call; when their number differs from the calls', output is counted as 0)."""
    outputs = output_tokens if len(output_tokens) == len(curve.prompt_tokens) else [0] * len(curve.prompt_tokens)
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
            runs_citing=None if label in (NAIVE, MASKING) or label in peers
            else sum(c.citing_since is not None for c in curves),
            cost=dict((costs or {}).get(label, {})),
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


# -- rendering ------------------------------------------------------------------------------------
def _k(tokens: float) -> str:
    return f"{tokens / 1e6:.2f}M" if tokens >= 1e6 else f"{tokens / 1e3:.1f}k" if tokens >= 1e4 else f"{tokens:,.0f}"


def _pct(value: float) -> str:
    """A signed percentage with one decimal and a true minus sign; ``+0.0%`` for what rounds to 0."""
    text = f"{value * 100:+.1f}%"
    return "+0.0%" if text == "-0.0%" else text.replace("-", "−")


def _usd(value: float) -> str:
    """US dollars: cents from $1, three significant digits below."""
    if value == 0:
        return "$0"
    return f"${value:,.2f}" if value >= 1 else f"${value:.3g}"


def _name(summary: SourceSummary, report: ReplayReport) -> str:
    if summary.source == TOTAL:
        return "total (real traces only)" if any(not s.scripted for s in report.sources) else TOTAL
    return summary.source + (PAGES_SUFFIX if summary.scripted else "")


def _short(label: str) -> str:
    return {NAIVE: "naive", MASKING: "mask3"}.get(label, label)


def _model_names(report: ReplayReport) -> list[tuple[str, str]]:
    """(label, display name) of each price model."""
    return [(m["label"], m["name"]) for m in report.price_models]


def _headline_rows(report: ReplayReport) -> tuple[list[str], list[list[str]]]:
    """The short table: per source, the default against naive, tokens then cost per model."""
    default = report.default
    headers = ["source", "naive tokens", f"{default} tokens", "tokens saved"]
    headers += [f"cost {label}" for label, _ in _model_names(report)]
    rows = []
    for summary in [*report.sources, report.total]:
        naive, chosen = summary.strategies[NAIVE], summary.strategies[default]
        row = [_name(summary, report), _k(naive.prompt_tokens), _k(chosen.prompt_tokens),
               _pct(-chosen.reduction).removeprefix("+")]
        for label, _ in _model_names(report):
            before, after = naive.cost[label], chosen.cost[label]
            row.append(f"{_usd(before.total_usd)} → {_usd(after.total_usd)} ({_pct(after.change)})")
        rows.append(row)
    return headers, rows


def _token_rows(report: ReplayReport) -> tuple[list[str], list[list[str]]]:
    headers = ["source", "runs", "calls", "own tools", "naive (net)"]
    headers += [f"{label}{' (default)' if label == report.default else ''} net (gross)" for label in report.strategies[1:]]
    rows = []
    for summary in [*report.sources, report.total]:
        st = summary.strategies
        row = [_name(summary, report), f"{summary.runs:,}", f"{summary.calls:,}", f"{summary.own_tool_tokens:,}",
               _k(st[NAIVE].prompt_tokens)]
        row += [f"{_pct(st[label].reduction)} ({_pct(st[label].reduction_gross)})" for label in report.strategies[1:]]
        rows.append(row)
    return headers, rows


def _cost_rows(report: ReplayReport) -> tuple[list[str], list[list[str]]]:
    names = " / ".join(label for label, _ in _model_names(report))
    headers = ["source", f"naive ({names})"]
    headers += [f"{label}{' (default)' if label == report.default else ''}" for label in report.strategies[1:]]
    rows = []
    for summary in [*report.sources, report.total]:
        st = summary.strategies
        row = [_name(summary, report), " / ".join(_usd(st[NAIVE].cost[label].total_usd) for label, _ in _model_names(report))]
        row += [" / ".join(_pct(st[s].cost[label].change) for label, _ in _model_names(report)) for s in report.strategies[1:]]
        rows.append(row)
    return headers, rows


def _parts_rows(report: ReplayReport) -> tuple[list[str], list[list[str]]]:
    """Where the money goes under the first price model: naive and the default, by part."""
    label = report.price_models[0]["label"]
    headers = ["source", "strategy", "uncached input", "cache writes", "cache reads", "output", "total"]
    rows = []
    for summary in [*report.sources, report.total]:
        for strategy in (NAIVE, report.default):
            c = summary.strategies[strategy].cost[label]
            rows.append([_name(summary, report), strategy, _usd(c.uncached_input_usd), _usd(c.cache_write_usd),
                         _usd(c.cache_read_usd), _usd(c.output_usd), _usd(c.total_usd)])
    return headers, rows


def _other_rows(report: ReplayReport) -> tuple[list[str], list[list[str]]]:
    default = report.default
    headers = ["source", f"largest prompt naive → {default}", f"cache-reusable prefix naive / mask3 / {default}",
               "citation p50/p95/max", "round trip", "ReAct query top-5"]
    rows = []
    for summary in [*report.sources, report.total]:
        st = summary.strategies
        react = "–"
        if summary.react:
            r = summary.react
            react = f"run {r['hit_rate_in_run'] * 100:.1f}% · pool {r['hit_rate_pooled'] * 100:.1f}% (n={r['runs_checked']})"
        rows.append([
            _name(summary, report), f"{_k(st[NAIVE].largest_prompt)} → {_k(st[default].largest_prompt)}",
            " / ".join(f"{st[s].prefix_share * 100:.0f}%" for s in (NAIVE, MASKING, default)),
            f"{summary.citation_tokens_p50:.0f} / {summary.citation_tokens_p95:.0f} / {summary.citation_tokens_max}",
            f"{summary.roundtrip_ok:,}/{summary.results:,}", react,
        ])
    return headers, rows


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join("---" for _ in headers) + " |"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return lines


def rich_table(report: ReplayReport) -> Any:
    """The headline as a rich :class:`~rich.table.Table`: per source, the default strategy
    against naive in tokens and (when priced) cost under each price model."""
    from rich.table import Table

    if report.price_models:
        headers, rows = _headline_rows(report)
        title = (f"agent-memory replay: {report.default} (default) against naive, Σ net prompt tokens and cost "
                 "with prompt caching (details in report.md)")
    else:
        headers, rows = _token_rows(report)
        title = "agent-memory replay: Σ net prompt tokens (gross in brackets), change vs naive"
    table = Table(title=title)
    for n, header in enumerate(headers):
        table.add_column(header, justify="left" if n == 0 else "right", overflow="fold")
    for summary, row in zip([*report.sources, report.total], rows):
        table.add_row(*row, style="bold" if summary.source == TOTAL else None)
    return table


def tools_line(report: ReplayReport) -> str:
    """One line with the memory tools' sizes (empty when unknown)."""
    t = report.memory_tools
    if not t:
        return ""
    return (
        f"Memory tools as OpenAI JSON (o200k): store_memory {t['store_memory']:,}, retrieve_memory "
        f"{t['retrieve_memory']:,}, query_memory {t['query_memory']:,}; all three {t['all_three']:,} tokens; as one "
        f"`memory` tool {t['single_all']:,}. Offered by default: retrieve_memory alone (a tools list of "
        f"{t['offered_when_citing']:,} tokens) with the system-prompt section that teaches the memory "
        f"({t.get('memory_prompt', 0):,} tokens), both counted in the net figures: from the first call when "
        f"the first prompt is cached and that costs less than any later start, else from the call where "
        f"citing starts to pay."
    )


def _price_notes(report: ReplayReport) -> list[str]:
    models = "; ".join(f"**{m['name']}** (`{m['label']}`, {m['provider']}): {m['prices']}" for m in report.price_models)
    return [
        "### How cost is modelled",
        "",
        f"Prices from `genai-prices` {report.prices.get('genai_prices', '?')} (the table the package ships, never",
        f"fetched at run time), as they stand on {report.prices.get('priced_on', '?')}: {models}.",
        "",
        "Each call is priced from its net prompt tokens, the tokens at its start equal to the previous call's",
        "prompt (the cache-reusable prefix above) and its output tokens: the assistant message that follows the",
        "call in the trace (content and tool calls), the same in every strategy. **Anthropic** (explicit",
        "breakpoints, 5-minute cache): breakpoints are assumed where they serve best, so the longest prefix equal",
        "to the previous prompt is read from the cache (0.1× the input price) and the rest of the prompt is",
        "written to it (1.25×); a prompt under 1,024 tokens (the Sonnet minimum) is not cached at all.",
        "**OpenAI** (automatic prefix cache): a prompt of 1,024 tokens or more reuses the shared prefix rounded",
        "down to 1,024 + a multiple of 128 tokens at the model's cached-input price; no write surcharge. Most",
        "ReAct prompts are under 1,024 tokens, so there cost follows tokens.",
        "",
        "Left out: cache expiry between calls (the 5-minute TTL; every call is taken to follow the previous",
        "one in time), the 1-hour cache, Anthropic's limit of 4 breakpoints per request (and that a read shorter",
        "than the previous prompt needs a breakpoint placed there by an earlier call), OpenAI cache misses",
        "under load, batch, flex and priority rates, per-request fees; prompts above a model's context window",
        "(the naive page session) are priced as if they were accepted; no retrieve call is simulated.",
        "",
    ]


def _peer_lines(report: ReplayReport) -> list[str]:
    """The paragraph naming each peer strategy (empty when none was replayed)."""
    if not report.peers:
        return []
    return [
        "Peers: the tool-result clearing users turn on elsewhere, each call's prompt built by the peer's own",
        "code (its package's, unless marked a re-implementation) from the same history as `naive`, sent with",
        "the agent's own tools; text actions (SWE-agent, ReAct) get a tool call on the LangChain side only, so",
        "that LangChain can pair their results:",
        "",
        *[f"- `{label}`: {text}." for label, text in report.peers.items()],
        "",
    ]


def _tokens_by_model_lines(report: ReplayReport) -> list[str]:
    """The default's token saving in its run under each price model (when it was replayed under
    several: its swaps are decided by the price)."""
    rows = [(_name(summary, report), summary.strategies[report.default].reduction_by_price_model)
            for summary in [*report.sources, report.total]]
    if not any(by_model for _, by_model in rows):
        return []
    models = list(next(by_model for _, by_model in rows if by_model))
    cells = "; ".join(f"{name} {' / '.join(_pct(by_model.get(m, 0.0)) for m in models)}" for name, by_model in rows)
    return [
        f"`{report.default}` decides its swaps with the price model it is billed under, so it is replayed once",
        f"per model; the token columns are its run under {models[0]}. Net tokens against naive in its run under",
        f"{' / '.join(models)}: {cells}.",
        "",
    ]


def _dearer_runs_lines(report: ReplayReport) -> list[str]:
    """Per source, how many runs of the default cost more than naive under each price model, and
    the worst of them: a total below naive can hide runs above it."""
    names = [label for label, _ in _model_names(report)]
    cells = []
    for summary in [*report.sources, report.total]:
        cost = summary.strategies[report.default].cost
        if not cost:
            continue
        parts = " / ".join(
            f"{cost[m].runs_dearer}" + (f" (worst {_pct(cost[m].worst_run_change)})" if cost[m].runs_dearer else "")
            for m in names if m in cost)
        cells.append(f"{_name(summary, report)} {parts} of {summary.runs}")
    if not cells:
        return []
    return [
        f"Runs in which `{report.default}` cost more than naive, under {' / '.join(names)}: {'; '.join(cells)}.",
        "",
    ]


def markdown(report: ReplayReport) -> str:
    """``report.md``: the headline table, then what was measured, the detail tables, notes."""
    default = report.default
    lines = ["# Replay report", ""]
    if report.price_models:
        headers, rows = _headline_rows(report)
        lines += [
            f"The default strategy (`{default}`) against naive (the full history), per source: Σ net prompt tokens",
            "over every LLM call, and what those calls cost with prompt caching, output included, under each",
            f"headline price model (cells: naive → `{default}` (change); how cost is modelled: below). A negative",
            "change is cheaper than naive.",
            "",
            *_table(headers, rows),
            "",
            *_tokens_by_model_lines(report),
            *_dearer_runs_lines(report),
        ]
    lines += [
        "## Details",
        "",
        "Each run is replayed through AgentMemory: every tool result is stored and the history keeps its",
        "memory id. Before each assistant message (ReAct: before each Thought) the prompt is built for every",
        "strategy and counted with tiktoken o200k_base, 4 framing tokens per message plus its content (an",
        "assistant's tool calls: name + arguments), as in BASELINES.md. **Net** adds every tool definition sent",
        "with the call, as JSON: the agent's own tools (tau-bench: the 14 airline tools; the page session: its",
        "2 tools) in every strategy, and the memory tools an agent-memory strategy offers with that call;",
        "**gross** (in brackets) counts the messages only. Reduction = 1 − Σ strategy tokens / Σ naive tokens.",
        "Strategies: `naive` (full history), `masking_keep_3` (3 newest results in full, older ones replaced by",
        "`[result cleared]`, no way back), and agent-memory: `full_once` (the default: `retrieve_memory` offered",
        "from the first call when the first prompt is cached and that is cheaper than any later start, which",
        "rewrites the whole prompt; otherwise results as the tool returned them until citing would save more",
        "than the memory tools cost *and* the rewrite that starting is pays under the price model; from then on",
        "each result in full in the first call after it arrives, then its citation when that swap pays),",
        "`full_once+tokens` (the same deciding by tokens alone: citing starts as soon as it saves tokens, every",
        "due swap at once),",
        "`full_once+eager+all_tools` (citing from the first call, all three memory tools sent with every call),",
        "`keep_last_3`. No retrieve call a model might make to re-read a cited result is simulated.",
        "",
        "A cache-aware strategy (all but `+tokens`) knows the price model its calls are billed under, as a",
        "user's agent knows its model: it is replayed once per price model, and its cost under each model is",
        "the cost of the run that knew that model. Its token figures (and the tokens plot) are from the run",
        f"under {report.price_models[0]['name'] if report.price_models else 'the first price model'}.",
        "",
        *_peer_lines(report),
        "### Tokens per strategy, change against naive",
        "",
        *_table(*_token_rows(report)),
        "",
    ]
    if report.price_models:
        names = " / ".join(label for label, _ in _model_names(report))
        lines += [
            f"### Cost per strategy, change against naive ({names})",
            "",
            *_table(*_cost_rows(report)),
            "",
            f"Where the money goes under {report.price_models[0]['name']}, naive and `{default}`:",
            "",
            *_table(*_parts_rows(report)),
            "",
            *_price_notes(report),
        ]
    lines += [
        "### Other measures",
        "",
        "Cache-reusable prefix: share of net prompt tokens a prefix cache could reuse (tools first; a change of",
        "the tool list resets it). Round trip: results `memory.get(id)` gave back identical.",
        "",
        *_table(*_other_rows(report)),
        "",
    ]
    if report.memory_tools:
        lines += [tools_line(report), ""]
    for summary in [*report.sources, report.total]:
        s = summary.strategies[default]
        if s.runs_citing is not None:
            lines.append(f"- `{summary.source}`: `{default}` began citing in {s.runs_citing} of {summary.runs} runs.")
    lines.append("")
    for summary in report.sources:
        if summary.scripted:
            lines += [
                f"`{summary.source}`: a research session assembled from real parts. The questions and every assistant",
                "turn (each Thought verbatim, its Search or Lookup as a tool call, the Finish answer) are those of",
                "consecutive real ReAct runs from the first (of the first ReAct log among the traces, or `--pages-shape`),",
                "as one agent answering question after question. Each Search result is the next real web page's raw",
                "`source.html` (pasted as a naive agent pastes a fetched page; after the last page the question under",
                "way ends with its real observations) and each Lookup result the run's real observation. **The pairing",
                "of a Search with a page is not real** (the Thought after it was written about what the run's search",
                "returned, a Wikipedia paragraph for HotpotQA), so the session is kept out of the total.",
                "",
            ]
        if summary.react:
            r = summary.react
            lines += [
                f"`{summary.source}` Query Memory check: for the {r['runs_checked']} runs whose `Finish[...]` answer occurs",
                "(case-insensitive, whole words; yes/no answers excluded) in one of their Search/Lookup observations,",
                f"the question as query finds such an observation in the top 5 in {r['hits_in_run']} runs when",
                f"filtered to the run's own observations, and in {r['hits_pooled']} runs over the pooled",
                f"{r['pooled_items']:,} distinct observations of every run.",
                "",
            ]
    if report.kernel_budget is not None:
        lines += [
            f"## The kernel (`--budget {report.kernel_budget:,}`)",
            "",
            "Every run again, through the trace memory kernel (MemoryManager + LLMRequestAssembler): the model's",
            f"input budget is the run's fixed parts (system prompt, tool definitions, the task) plus {report.kernel_budget:,}",
            "tokens of conversation; compaction at 80% of that, back to 50%. Each run's real assistant messages are",
            "committed as the model's answers. Checks: no prompt over the budget, the system prompt first in every",
            "prompt, every turn accounted for (active + archive), every tool call answered right after its message.",
            "",
            "| source | runs | calls | compactions (runs) | truncations | largest prompt (of its budget) | Σ prompt tokens (net of tools) | checks failed |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for row in report.kernel:
            lines.append(
                f"| {row['source']} | {row['runs']:,} | {row['calls']:,} | {row['compactions']:,} ({row['runs_compacting']:,}) | "
                f"{row['truncations']:,} | {row['largest_prompt']:,} ({row['largest_share_of_budget'] * 100:.0f}%) | "
                f"{_k(row['prompt_tokens'])} ({_k(row['prompt_tokens_net_of_tools'])}) | {row['checks_failed']} |"
            )
        lines.append("")
    lines += [f"- {note}" for note in report.notes]
    lines += ["", f"Replay time: {report.seconds:.1f} s.", "", "![cumulative prompt tokens](tokens.png)", ""]
    if report.cost_curves:
        lines += [f"![cumulative cost under {report.price_models[0]['name']}](cost.png)", ""]
    return "\n".join(lines)


def _panels(report: ReplayReport, series: dict[str, dict[str, list[float]]], *, ylabel: str, title: str,
            total: Callable[[float], str], change: Callable[[StrategySummary], float]) -> Figure:
    """One panel per source: the cumulative sum of each strategy's per-call values on a log scale,
    the default strategy drawn thick in black; each legend entry ends with the strategy's Σ
    (``total`` formats it) and its change against naive as the tables give it (``change``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(series)
    cols = min(2, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.8 * cols, 4.4 * rows), squeeze=False)
    colours = {label: f"C{n}" for n, label in enumerate(report.strategies)}
    summaries = {s.source: s for s in report.sources}
    for ax, name in zip(axes.flat, names):
        floor = math.inf
        for label in report.strategies:  # legend in strategy order; the default drawn on top
            cumulative = list(accumulate(series[name].get(label, [])))
            if not cumulative:
                continue
            floor = min(floor, cumulative[len(cumulative) // 20])
            chosen = label == report.default
            summary = summaries[name].strategies.get(label) if name in summaries else None
            versus = f", {_pct(change(summary))}" if summary is not None and label != NAIVE else ""
            style = "--" if label == MASKING else ":" if label == NAIVE else "-." if label in report.peers else "-"
            ax.plot(range(1, len(cumulative) + 1), cumulative, style, color="black" if chosen else colours[label],
                    label=f"{label}{' (default)' if chosen else ''}: {total(cumulative[-1])}{versus}",
                    linewidth=2.4 if chosen else 1.4, zorder=3 if chosen else 2)
        scripted = next((s.scripted for s in report.sources if s.source == name), False)
        ax.set_title(name + (PAGES_SUFFIX if scripted else ""), fontsize=10)
        ax.set_yscale("log")
        if 0 < floor < math.inf:  # leave out the first 5% of calls: the lines part later
            ax.set_ylim(bottom=floor)
        ax.set_xlabel("LLM call (runs one after another)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8, loc="lower right")
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def figure(report: ReplayReport, kind: Literal["tokens", "cost"] = "tokens") -> Figure:
    """The matplotlib figure of ``tokens.png`` (cumulative net prompt tokens) or ``cost.png``
    (cumulative cost in USD under the first price model), one panel per source, log scale, the
    default strategy marked. Close it with ``matplotlib.pyplot.close``.

    Raises:
        ValueError: ``kind="cost"`` for a report without prices.
    """
    if kind == "tokens":
        series = {name: {label: [float(v) for v in values] for label, values in curves.items()}
                  for name, curves in report.curves.items()}
        return _panels(report, series, ylabel="cumulative net prompt tokens (log)", total=_k,
                       change=lambda summary: summary.reduction,
                       title="Cumulative net prompt tokens per source; legend: Σ and change against naive")
    if not report.cost_curves:
        raise ValueError("the report has no prices: summarize() with price models")
    name, label = report.price_models[0]["name"], report.price_models[0]["label"]
    return _panels(report, report.cost_curves, ylabel="cumulative cost, USD (log)", total=_usd,
                   change=lambda summary: summary.cost[label].change,
                   title=f"Cumulative cost with prompt caching at {name} prices per source; legend: Σ and change against naive")


def _save(fig: Figure, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(report: ReplayReport, out_dir: Path | str) -> dict[str, Path]:
    """Write ``report.json``, ``report.md``, ``tokens.png`` and (when priced) ``cost.png`` into
    ``out_dir`` (created); returns their paths by name (``json``, ``md``, ``png``, ``cost_png``)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "md": out / "report.md", "png": out / "tokens.png"}
    paths["json"].write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    paths["md"].write_text(markdown(report), encoding="utf-8")
    _save(figure(report, "tokens"), paths["png"])
    if report.cost_curves:
        paths["cost_png"] = out / "cost.png"
        _save(figure(report, "cost"), paths["cost_png"])
    return paths
