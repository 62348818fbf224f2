"""Replay report, the text: ``report.md`` (:func:`markdown`), the headline as a rich table for
the terminal (:func:`rich_table`) and the memory tools' sizes in one line (:func:`tools_line`),
all from a :class:`~agent_memory.replay.report.ReplayReport`.

``report.md`` leads with one sentence on the real traces only (the default's cost after its
simulated retrieves, per price model, and the later-used values its prompts kept), then one short table, the default strategy against naive per source (tokens
and cost under the headline price models); the details follow. Peer strategies
(:mod:`~agent_memory.replay.peers`) are rows of the detail tables like every other strategy, each
described in one line (what it is, at what settings, whether it is a re-implementation). No table has
more than :data:`MAX_TABLE_COLUMNS` columns.
"""

from __future__ import annotations

from typing import Any

from agent_memory.extras import require_extra
from agent_memory.replay.report import PAGES_SUFFIX, TOTAL, ReplayReport, SourceSummary
from agent_memory.replay.strategies import MASKING, MASKING_RERUN, NAIVE, RERUN_SUFFIX

__all__ = ["markdown", "rich_table", "tools_line"]


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


def _step_ms(p50: float | None, p95: float | None) -> str:
    """The memory's wall time per step, ``p50 / p95`` in ms (``–`` when not timed)."""
    if p50 is None or p95 is None:
        return "–"
    return f"{p50:.1f} / {p95:.1f}" if p95 < 100 else f"{p50:,.0f} / {p95:,.0f}"


def _name(summary: SourceSummary, report: ReplayReport) -> str:
    if summary.source == TOTAL:
        return "total (real traces only)" if any(not s.scripted for s in report.sources) else TOTAL
    return summary.source + (PAGES_SUFFIX if summary.scripted else "")


def _short(label: str) -> str:
    return {NAIVE: "naive", MASKING: "mask3", MASKING_RERUN: "mask3+rerun"}.get(label, label)


def _its(count: int, noun: str) -> str:
    """``its 1 simulated retrieve call`` / ``its 3 simulated retrieve calls`` (``count`` of ``noun``)."""
    return f"its {count:,} {noun}" + ("" if count == 1 else "s")


def _model_names(report: ReplayReport) -> list[tuple[str, str]]:
    """(label, display name) of each price model."""
    return [(m["label"], m["name"]) for m in report.price_models]


def _headline_rows(report: ReplayReport) -> tuple[list[str], list[list[str]]]:
    """The short table: per source, the default against naive, tokens then cost per model."""
    default = report.default
    headers = ["source", f"tokens naive → {default}", "tokens saved", "used values kept (retrieves)",
               "memory ms/step p50 / p95"]
    headers += [f"cost {label}" for label, _ in _model_names(report)]
    rows = []
    for summary in [*report.sources, report.total]:
        naive, chosen = summary.strategies[NAIVE], summary.strategies[default]
        row = [_name(summary, report), f"{_k(naive.prompt_tokens)} → {_k(chosen.prompt_tokens)}",
               _pct(-chosen.reduction).removeprefix("+"),
               f"{chosen.kept:,}/{chosen.needed:,} ({chosen.retrieves:,})", _step_ms(chosen.memory_ms_p50,
                                                                                    chosen.memory_ms_p95)]
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


MAX_TABLE_COLUMNS = 8
"""Columns of a table in report.md at most; a wider one is cut into several, each repeating the
first column (report.json holds every figure)."""


def _by_strategy(headers: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]]]:
    """A per-source table (a row per source, a column per figure or strategy) turned a quarter:
    a row per figure or strategy, a column per source (a report has a few sources, many strategies)."""
    return (["per source →", *(row[0] for row in rows)],
            [[header, *(row[n] for row in rows)] for n, header in enumerate(headers) if n])


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table, cut into tables of at most :data:`MAX_TABLE_COLUMNS` columns (each one
    repeating the first column) when it is wider."""
    lines: list[str] = []
    width = MAX_TABLE_COLUMNS - 1
    for start in range(1, max(2, len(headers)), width):
        chosen = [0, *range(start, min(len(headers), start + width))]
        if lines:
            lines.append("")
        lines += ["| " + " | ".join(headers[n] for n in chosen) + " |", "| " + " | ".join("---" for _ in chosen) + " |"]
        lines += ["| " + " | ".join(row[n].replace("|", "\\|") for n in chosen) + " |" for row in rows]
    return lines


def rich_table(report: ReplayReport) -> Any:
    """The headline as a rich :class:`~rich.table.Table`: per source, the default strategy
    against naive in tokens and (when priced) cost under each price model."""
    require_extra("replay", "the replay's tables")
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
        f"({t.get('memory_prompt', 0):,} tokens), both counted in the net figures, from the call where "
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
        "(the naive page session) are priced as if they were accepted. A simulated retrieve is priced as the",
        "call it is: its prompt (the strategy's prompt before the real call), its output (the `retrieve_memory`",
        "calls), and its answer in every later prompt.",
        "",
    ]


def _lead_lines(report: ReplayReport) -> list[str]:
    """The report's first sentence: on the real traces only, the default's cost against naive
    under each price model, simulated retrieves included, and what its prompts kept."""
    total = report.total.strategies.get(report.default)
    if total is None or not report.price_models:
        return []
    real = [s for s in report.sources if not s.scripted]
    changes = " / ".join(f"{_pct(total.cost[label].change)} under {name}" for label, name in _model_names(report)
                         if label in total.cost)
    return [
        f"**On the {report.total.runs:,} real agent runs of {len(real)} sources, `{report.default}` costs {changes}"
        f" against naive, {_its(total.retrieves, 'simulated retrieve call')} included; its prompts kept"
        f" {total.kept:,} of the {total.needed:,} values the runs' models went on to use from tool results"
        f" ({total.kept_share * 100:.1f}%).** The constructed page session is not in these figures.",
        "",
    ]


def _used_values_rows(report: ReplayReport) -> tuple[list[str], list[list[str]]]:
    """One column per strategy; a ``+rerun`` curve shares its strategy's column (its re-runs)."""
    reruns = {label for label in report.strategies if label.endswith(RERUN_SUFFIX)
              and label.removesuffix(RERUN_SUFFIX) in report.strategies}
    columns = [label for label in report.strategies[1:] if label not in reruns]
    headers = ["source", "needed"] + [_short(label) for label in columns]
    rows = []
    for summary in [*report.sources, report.total]:
        st = summary.strategies
        row = [_name(summary, report), f"{st[NAIVE].needed:,}"]
        for label in columns:
            s = st[label]
            paid = (f", {s.retrieves:,} retrieves" if s.retrieves else "") + (f", {s.lost:,} lost" if s.lost else "")
            missed = f"{s.calls_missed:,} call misses" if s.calls_missed == 1 else f"{s.calls_missed:,} calls miss"
            cell = f"{s.kept_share * 100:.1f}% ({missed}{paid})"
            again = st.get(label + RERUN_SUFFIX) if label + RERUN_SUFFIX in reruns else None
            if again is not None and again.retrieves:
                cell += f"; +rerun: {again.retrieves:,} re-runs" + (f", {again.lost:,} lost" if again.lost else "")
            row.append(cell)
        rows.append(row)
    return headers, rows


def _used_values_lines(report: ReplayReport) -> list[str]:
    """What the model later used, kept in each strategy's prompts or paid for."""
    return [
        "## What the model later used: kept, retrieved, or lost",
        "",
        "At each LLM call, the values the run's real model wrote next (its text and the values of its tool-call",
        "arguments: identifier-like tokens of 5+ characters with a digit, an underscore or an inner capital)",
        "that occur in an earlier tool result and in no earlier system, user or assistant message, nor in the",
        "agent's tool definitions, are *needed*. A strategy *keeps* one when the prompt it builds for that call",
        "holds it. An agent-memory strategy whose prompt misses one makes a **simulated retrieve** first: one more",
        "LLM call over the same prompt whose output is `retrieve_memory` (the cited result's id, `around` the",
        "value; for a result whose first showing was capped, the page that holds it), answered by the real tool;",
        "that call and its answer stay in the history from then on. Masking and the peers cannot get the",
        "content back: their misses are *lost*. As a second figure, each of them is replayed again as",
        "`<label>+rerun`: a call whose prompt lost a needed value is preceded by one more LLM call that runs",
        "the original tool calls again (the re-run and its result stay in the history, edited by the",
        "strategy's own code from then on), priced like any call in the cost tables.",
        "Cells: share kept (calls whose prompt missed a value, then the retrieves made or values lost;",
        "then the `+rerun` replay's re-runs and what even they did not bring back).",
        "",
        *_table(*_by_strategy(*_used_values_rows(report))),
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
    lines += [*_lead_lines(report)]
    if report.price_models:
        headers, rows = _headline_rows(report)
        lines += [
            f"The default strategy (`{default}`) against naive (the full history), per source: Σ net prompt tokens",
            "over every LLM call, and what those calls cost with prompt caching, output included, under each",
            f"headline price model (cells: naive → `{default}` (change); how cost is modelled: below). A negative",
            f"change is cheaper than naive. Memory ms/step: the wall time of what the memory itself did per agent step",
            f"under `{default}` (storing the step's results, building and committing the prompt with its citations,",
            f"simulated retrieves; not the model, not the counting), p50 / p95 over the source's steps, with",
            f"{report.workers} run{'s' if report.workers != 1 else ''} replayed at a time (threads sharing the cores).",
            "",
            *_table(headers, rows),
            "",
            *_tokens_by_model_lines(report),
            *_dearer_runs_lines(report),
            "![cost change against naive per source and price model](savings.png)",
            "",
        ]
    lines += _used_values_lines(report)
    lines += [
        "## Details",
        "",
        "Each run is replayed through AgentMemory: every tool result is stored and the history keeps its",
        "memory id. Before each assistant message (ReAct: before each Thought) the prompt is built for every",
        "strategy and counted with tiktoken o200k_base, 4 framing tokens per message plus its content (an",
        "assistant's tool calls: name + arguments), as `agent_memory/prompt_tokens.py` counts every prompt.",
        "**Net** adds every tool definition sent",
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
        "`keep_last_3`. Every figure of an agent-memory strategy includes its simulated retrieves (below), and",
        "every `+rerun` label (masking's and each peer's) is that strategy priced as if the model re-ran the",
        "tool call whose result it had lost.",
        "",
        "A cache-aware strategy (all but `+tokens`) knows the price model its calls are billed under, as a",
        "user's agent knows its model: it is replayed once per price model, and its cost under each model is",
        "the cost of the run that knew that model. Its token figures (and the tokens plot) are from the run",
        f"under {report.price_models[0]['name'] if report.price_models else 'the first price model'}.",
        "",
        *_peer_lines(report),
        "### Tokens per strategy, change against naive",
        "",
        *_table(*_by_strategy(*_token_rows(report))),
        "",
    ]
    if report.price_models:
        names = " / ".join(label for label, _ in _model_names(report))
        lines += [
            f"### Cost per strategy, change against naive ({names})",
            "",
            *_table(*_by_strategy(*_cost_rows(report))),
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
                f"`{summary.source}` Query Memory check: for the {r['runs_checked']} runs whose final answer occurs",
                "(case-insensitive, whole words; yes/no answers excluded) in one of their tool results,",
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
