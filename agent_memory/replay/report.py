"""Replay report: per source and in total, as a rich table, ``report.md``, ``report.json`` and
``tokens.png`` (cumulative net prompt tokens per LLM call, one panel per source).

Reductions are 1 − Σ strategy prompt tokens / Σ naive prompt tokens over a source (BASELINES.md);
negative numbers are savings. *Net* counts everything sent with each call (messages and every
tool definition: the agent's own in every strategy, memory tools where offered); *gross* counts the
messages only. Cache-reusable prefix: per prompt, the net tokens a provider's prefix cache could
reuse (the tool definitions when unchanged, then the leading messages identical to the previous
prompt's).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent_memory.replay.engine import RunResult
from agent_memory.replay.kernel_replay import KernelRunResult
from agent_memory.replay.react_check import ReactCheck
from agent_memory.replay.strategies import MASKING, NAIVE

__all__ = ["ReplayReport", "SourceSummary", "StrategySummary", "summarize", "summarize_kernel", "write_report"]

TOTAL = "total"
"""Name of the summary over every real (not scripted) source; over all sources when every one is
scripted. The page session's raw HTML would otherwise swamp the real traces' figures."""


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
    """Agent-memory strategies: runs in which citing began (``None`` for the baselines)."""


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
    """Assistant turns scripted (page session)."""
    react: dict[str, Any] | None = None
    """ReAct Query Memory check, when the source has questions."""


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

    def to_json(self) -> dict[str, Any]:
        return {
            "strategies": self.strategies,
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


def _ratio(value: int, base: int) -> float:
    return round(value / base - 1, 4) if base else 0.0


def _summary(name: str, results: Sequence[RunResult], strategies: Sequence[str]) -> SourceSummary:
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
            runs_citing=None if label in (NAIVE, MASKING) else sum(c.citing_since is not None for c in curves),
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


def summarize(results: Sequence[RunResult], *, react: dict[str, ReactCheck] | None = None,
              seconds: float = 0.0, memory_tools: dict[str, int] | None = None) -> ReplayReport:
    """Summaries per source (in first-seen order) and in total.

    Args:
        results: the replayed runs.
        react: the ReAct check per source.
        seconds: how long the replay took.
        memory_tools: token sizes of the memory tools, for the report
            (:func:`~agent_memory.replay.engine.memory_tool_sizes`).
    """
    if not results:
        raise ValueError("nothing was replayed")
    strategies = list(results[0].curves)
    by_source: dict[str, list[RunResult]] = {}
    for result in results:
        by_source.setdefault(result.source, []).append(result)
    sources = []
    for name, group in by_source.items():
        summary = _summary(name, group, strategies)
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
    real = [r for r in results if not r.scripted] or list(results)
    total = _summary(TOTAL, real, strategies)
    return ReplayReport(sources=sources, total=total, strategies=strategies, memory_tools=dict(memory_tools or {}),
                        curves=curves, seconds=seconds)


# -- rendering ------------------------------------------------------------------------------------
def _k(tokens: float) -> str:
    return f"{tokens / 1e6:.2f}M" if tokens >= 1e6 else f"{tokens / 1e3:.1f}k" if tokens >= 1e4 else f"{tokens:,.0f}"


def _pct(value: float) -> str:
    return f"{value * 100:+.1f}%"


def _name(summary: SourceSummary, report: ReplayReport) -> str:
    if summary.source == TOTAL:
        return "total (real traces only)" if any(not s.scripted for s in report.sources) else TOTAL
    return summary.source + (" (scripted turns, real pages)" if summary.scripted else "")


def _rows(report: ReplayReport) -> tuple[list[str], list[list[str]]]:
    first = report.strategies[2] if len(report.strategies) > 2 else report.strategies[-1]
    headers = ["source", "runs", "calls", "own tools", "naive (net)"]
    headers += [f"{label} net (gross)" for label in report.strategies[1:]]
    headers += [f"largest prompt naive → {first}", f"cache-reusable prefix naive / mask3 / {first}",
                "citation p50/p95/max", "round trip", "ReAct query top-5"]
    rows = []
    for summary in [*report.sources, report.total]:
        st = summary.strategies
        row = [_name(summary, report), f"{summary.runs:,}", f"{summary.calls:,}", f"{summary.own_tool_tokens:,}",
               _k(st[NAIVE].prompt_tokens)]
        row += [f"{_pct(st[label].reduction)} ({_pct(st[label].reduction_gross)})" for label in report.strategies[1:]]
        row.append(f"{_k(st[NAIVE].largest_prompt)} → {_k(st[first].largest_prompt)}")
        row.append(" / ".join(f"{st[s].prefix_share * 100:.0f}%" for s in (NAIVE, MASKING, first)))
        row.append(f"{summary.citation_tokens_p50:.0f} / {summary.citation_tokens_p95:.0f} / {summary.citation_tokens_max}")
        row.append(f"{summary.roundtrip_ok:,}/{summary.results:,}")
        if summary.react:
            r = summary.react
            row.append(f"run {r['hit_rate_in_run'] * 100:.1f}% · pool {r['hit_rate_pooled'] * 100:.1f}% (n={r['runs_checked']})")
        else:
            row.append("–")
        rows.append(row)
    return headers, rows


def _short(label: str) -> str:
    return {NAIVE: "naive", MASKING: "mask3"}.get(label, label)


def rich_table(report: ReplayReport) -> Any:
    """The summaries as a rich :class:`~rich.table.Table`: net reductions, gross below them."""
    from rich.table import Table

    first = report.strategies[2] if len(report.strategies) > 2 else report.strategies[-1]
    table = Table(title="agent-memory replay: Σ prompt tokens over LLM calls, net of every tool definition "
                        "(gross, messages only, in brackets); reduction vs naive")
    headers = ["source", "runs", "calls", "own tools", "naive", *(_short(s) for s in report.strategies[1:]),
               f"largest naive→{_short(first)}", f"cache prefix naive/mask3/{_short(first)}", "citation p50/p95/max",
               "round trip", "ReAct top-5 run/pool"]
    for n, header in enumerate(headers):
        table.add_column(header, justify="left" if n == 0 else "right", overflow="fold")
    for summary in [*report.sources, report.total]:
        st = summary.strategies
        react = "–"
        if summary.react:
            react = f"{summary.react['hit_rate_in_run'] * 100:.0f}% / {summary.react['hit_rate_pooled'] * 100:.1f}%"
        table.add_row(
            _name(summary, report).replace(" (scripted turns, real pages)", " (scripted)"), f"{summary.runs:,}",
            f"{summary.calls:,}", f"{summary.own_tool_tokens:,}", _k(st[NAIVE].prompt_tokens),
            *(f"{_pct(st[s].reduction)} ({_pct(st[s].reduction_gross)})" for s in report.strategies[1:]),
            f"{_k(st[NAIVE].largest_prompt)}→{_k(st[first].largest_prompt)}",
            " / ".join(f"{st[s].prefix_share * 100:.0f}%" for s in (NAIVE, MASKING, first)),
            f"{summary.citation_tokens_p50:.0f}/{summary.citation_tokens_p95:.0f}/{summary.citation_tokens_max}",
            f"{summary.roundtrip_ok:,}/{summary.results:,}", react,
            style="bold" if summary.source == TOTAL else None,
        )
    return table


def tools_line(report: ReplayReport) -> str:
    """One line with the memory tools' sizes (empty when unknown)."""
    t = report.memory_tools
    if not t:
        return ""
    return (
        f"Memory tools as OpenAI JSON (o200k): store_memory {t['store_memory']:,}, retrieve_memory "
        f"{t['retrieve_memory']:,}, query_memory {t['query_memory']:,}; all three {t['all_three']:,} tokens; as one "
        f"`memory` tool {t['single_all']:,}. Offered by default: nothing until citing pays, then "
        f"retrieve_memory alone (a tools list of {t['offered_when_citing']:,} tokens), with the "
        f"system-prompt section that teaches the memory ({t.get('memory_prompt', 0):,} tokens, counted in "
        f"the net figures)."
    )


def markdown(report: ReplayReport) -> str:
    """``report.md``: what was measured, the table, notes."""
    headers, rows = _rows(report)
    lines = [
        "# Replay report",
        "",
        "Each run is replayed through AgentMemory: every tool result is stored and the history keeps its",
        "memory id. Before each assistant message (ReAct: before each Thought) the prompt is built for every",
        "strategy and counted with tiktoken o200k_base, 4 framing tokens per message plus its content (an",
        "assistant's tool calls: name + arguments), as in BASELINES.md. **Net** adds every tool definition sent",
        "with the call, as JSON: the agent's own tools (tau-bench: the 14 airline tools; the page session: its",
        "2 tools) in every strategy, and the memory tools an agent-memory strategy offers with that call;",
        "**gross** (in brackets) counts the messages only. Reduction = 1 − Σ strategy tokens / Σ naive tokens.",
        "Strategies: `naive` (full history), `masking_keep_3` (3 newest results in full, older ones replaced by",
        "`[result cleared]`, no way back), and agent-memory: `full_once` (the default: results as the tool",
        "returned them until citing would save more than the memory tools cost; from then on each result in",
        "full in the first call after it arrives, then its citation, with `retrieve_memory` offered),",
        "`full_once+eager+all_tools` (citing from the first call, all three memory tools sent with every call),",
        "`keep_last_3`. No retrieve call a model might make to re-read a cited result is simulated. Cache-",
        "reusable prefix: share of net prompt tokens a prefix cache could reuse (tools first; a change of the",
        "tool list resets it). Round trip: results `memory.get(id)` gave back identical.",
        "",
        "| " + " | ".join(headers) + " |",
        "| " + " | ".join("---" for _ in headers) + " |",
    ]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    lines.append("")
    if report.memory_tools:
        lines += [tools_line(report), ""]
    for summary in [*report.sources, report.total]:
        for label in report.strategies[2:]:
            s = summary.strategies[label]
            if s.runs_citing is not None and label == report.strategies[2]:
                lines.append(f"- `{summary.source}`: `{label}` began citing in {s.runs_citing} of {summary.runs} runs.")
    lines.append("")
    for summary in report.sources:
        if summary.scripted:
            lines += [
                f"`{summary.source}`: a research session built from real pages (raw `source.html`, pasted as a",
                "naive agent pastes a fetched page) in the seed's pattern of one search then 3 pages per iteration;",
                "**the assistant turns (reasoning, tool calls) are scripted**, only the tool results are real.",
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
    return "\n".join(lines)


def plot(report: ReplayReport, path: Path) -> None:
    """``tokens.png``: cumulative net prompt tokens per LLM call, one panel per source."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report.curves)
    cols = min(2, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 4.2 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        for label, values in report.curves[name].items():
            cumulative, running = [], 0
            for value in values:
                running += value
                cumulative.append(running)
            style = "--" if label == MASKING else ":" if label == NAIVE else "-"
            ax.plot(range(1, len(cumulative) + 1), cumulative, style, label=label, linewidth=1.4)
        scripted = next((s.scripted for s in report.sources if s.source == name), False)
        ax.set_title(name + (" (scripted turns, real pages)" if scripted else ""), fontsize=10)
        ax.set_xlabel("LLM call")
        ax.set_ylabel("cumulative net prompt tokens")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(report: ReplayReport, out_dir: Path | str) -> dict[str, Path]:
    """Write ``report.json``, ``report.md`` and ``tokens.png`` into ``out_dir`` (created); returns
    their paths by name."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "md": out / "report.md", "png": out / "tokens.png"}
    paths["json"].write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    paths["md"].write_text(markdown(report), encoding="utf-8")
    plot(report, paths["png"])
    return paths
