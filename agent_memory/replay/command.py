"""``agent-memory replay``: replay real agent runs and write the token and cost report (registered
on the CLI app by :mod:`agent_memory.cli`; its output and errors as every command's, from
:mod:`agent_memory.console`). The module needs the ``cli`` extra only, so that ``agent-memory
--help`` works without the ``replay`` extra; the command itself asks for that extra when it runs
(its plots need matplotlib)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agent_memory.console import CliError
from agent_memory.console import fail as _fail
from agent_memory.console import reported_errors as _reported_errors
from agent_memory.console import stderr as _stderr
from agent_memory.console import stdout as _stdout
from agent_memory.errors import ConfigurationError
from agent_memory.extras import require_extra
from agent_memory.pricing import PriceModel
from agent_memory.replay.pages import DEFAULT_MAX_PAGES

__all__ = ["DEFAULT_REPLAY_OUT", "replay"]

DEFAULT_REPLAY_OUT = Path("replay-report")
"""Where ``replay`` writes report.md, report.json, tokens.png, cost.png and savings.png when no ``--out`` is given."""


TABLE_COLUMNS = 100
"""Width of the headline table on the terminal (narrower when the terminal is; a log gets this)."""

PROGRESS_LINES = 10
"""Lines a long step prints on a log (stderr not a terminal, where the progress bar shows nothing)."""


def _progress_lines(what: str, total: int, started: float) -> Callable[[str], None]:
    """A callback, one call per run done, that prints ``what: done/total runs, seconds`` on stderr
    about :data:`PROGRESS_LINES` times in all, when stderr is not a terminal (a CI log, a file);
    on a terminal it does nothing (the progress bar shows the same)."""
    if _stderr().is_terminal or total <= 0:
        return lambda _: None
    every, done = max(1, total // PROGRESS_LINES), 0

    def line(last: str) -> None:
        nonlocal done
        done += 1
        if done % every == 0 or done == total:
            tail = f", last {last}" if last else ""
            typer.echo(f"{what}: {done:,}/{total:,} runs, {time.monotonic() - started:.0f} s{tail}", err=True)

    return line


def _price_models(names: list[str]) -> list[PriceModel] | None:
    """``--price-model`` values (``MODEL`` or ``PROVIDER:MODEL``) as price models; ``None`` (the
    headline models) when none are given."""
    if not names:
        return None
    models = []
    for name in names:
        provider, sep, model = name.partition(":")
        try:
            models.append(PriceModel.lookup(model if sep else provider, provider=provider if sep else None))
        except ConfigurationError as exc:
            raise CliError(f"--price-model {name}: {exc}") from exc
    return models


def _tool_definitions(pairs: list[str]) -> dict[str, tuple[dict, ...]]:
    from agent_memory.replay.loaders import load_tool_definitions

    tool_definitions = {}
    for pair in pairs:
        source, sep, path = pair.partition("=")
        if not sep or not source or not path:
            raise CliError(f"--tool-definitions takes SOURCE=FILE (e.g. tau_bench=tools.json), not {pair!r}")
        try:
            tool_definitions[source] = load_tool_definitions(path)
        except (OSError, ValueError) as exc:
            raise CliError(f"--tool-definitions {pair}: {exc}") from exc
    return tool_definitions


def replay(
    traces: list[Path] = typer.Argument(
        None, help="Trace files or directories: OpenAI chat .json (tau-bench), SWE-agent .traj, ReAct .txt logs."
    ),
    pages: Path | None = typer.Option(
        None, "--pages", help="Also replay the page session: real ReAct runs whose Search results are the real pages in DIR "
        "(<page>/source.html), one page per Search."
    ),
    pages_max: int = typer.Option(
        DEFAULT_MAX_PAGES, "--pages-max", min=1, help="Pages in the page session (one per Search, in order)."
    ),
    pages_shape: Path | None = typer.Option(
        None, "--pages-shape",
        help="The ReAct log (.txt) whose real runs give the page session its turns (questions, thoughts, "
        "Search/Lookup calls); each Search is answered by the next page. Default: the first ReAct log among "
        "the traces given.",
    ),
    tool_definition_files: list[str] = typer.Option(
        [], "--tool-definitions",
        help="SOURCE=FILE: the tool definitions (OpenAI JSON) the agent of SOURCE sent with every call; counted "
        "in every strategy's net figure. Repeat for several sources.",
    ),
    out: Path = typer.Option(
        DEFAULT_REPLAY_OUT, "--out", help="Directory for report.md, report.json, tokens.png, cost.png and savings.png."
    ),
    price_models: list[str] = typer.Option(
        [], "--price-model",
        help="MODEL or PROVIDER:MODEL of the genai-prices table to price every call under (prompt caching "
        "included); repeat for several, the first one is plotted. Default: claude-sonnet-4-6, gpt-4o, gpt-5.",
    ),
    policies: list[str] = typer.Option(
        [], "--policy",
        help="Agent-memory strategy to replay; repeat for several: full_once, keep_last_<k>, always_cite, each "
        "optionally +batch<tokens>, +eager, +tokens (swaps by tokens alone, not by price), +calls<n>, +all_tools, "
        "+single. Default: full_once, full_once+tokens, full_once+eager+all_tools, keep_last_3.",
    ),
    peer_names: list[str] = typer.Option(
        [], "--peer",
        help="Peer strategy to replay, run from its own package (extra `bench`); repeat for several: "
        "langchain_clear_tool_uses, langchain_summarization_4k, openai_agents_trimmer, anthropic_clear_tool_uses, "
        "anthropic_clear_tool_uses_5k (a re-implementation). Default: every one whose package is installed, "
        "none when --policy is given.",
    ),
    limit_runs: int | None = typer.Option(None, "--limit-runs", min=1, help="Replay at most N runs of each source."),
    workers: int = typer.Option(4, "--workers", min=1, help="Runs replayed at once (threads)."),
    react_check: bool = typer.Option(
        True, "--react-check/--no-react-check", help="Query Memory with each ReAct question (loads the embedding model)."
    ),
    budget: int | None = typer.Option(
        None, "--budget", min=100,
        help="Also run every run through the trace memory kernel, with N tokens of conversation beyond its fixed "
        "parts (system prompt, tools, task): compactions, largest prompt, checks.",
    ),
) -> None:
    """Replay real agent runs through agent memory and count every prompt, net of every tool
    definition sent (and gross, messages only): naive full history, observation masking (3 newest
    results), agent memory per strategy and the peers (LangChain's, the OpenAI Agents SDK's and
    Anthropic's tool-result clearing); price every call with prompt caching; write a report."""
    with _reported_errors():
        require_extra("replay", "agent-memory replay")  # its plots; the command's help needs only the cli extra
    from agent_memory.replay import engine, report, report_plots, report_text
    from agent_memory.replay.loaders import limit_per_source, load_traces, with_tool_definitions
    from agent_memory.replay.pages import find_react_log, load_page_session
    from agent_memory.replay.peers import DEFAULT_PEERS, installed_peers, parse_peer
    from agent_memory.replay.strategies import DEFAULT_STRATEGIES, parse_strategy

    with _reported_errors():
        if not traces and pages is None:
            _fail("give trace files or directories, or --pages DIR")
        priced = _price_models(price_models)
        try:
            chosen = [parse_strategy(name) for name in policies] or list(DEFAULT_STRATEGIES)
            peers, not_replayed = installed_peers([parse_peer(name) for name in peer_names] if peer_names or policies
                                                  else DEFAULT_PEERS)
            if peer_names and not_replayed:
                raise CliError("; ".join(not_replayed))
            runs = load_traces(traces or [])
            if tool_definition_files:
                runs = with_tool_definitions(runs, _tool_definitions(tool_definition_files))
        except ValueError as exc:
            raise CliError(str(exc)) from exc
        if limit_runs is not None:
            runs = limit_per_source(runs, limit_runs)
        if pages is not None:
            shape = pages_shape or find_react_log(traces or [])
            if shape is None:
                raise CliError("--pages takes its turns from real ReAct runs: give a ReAct log among the traces "
                               "(react_hotpotqa) or with --pages-shape FILE")
            runs.append(load_page_session(pages, react_log=shape, max_pages=pages_max))
        if not runs:
            _fail("no runs found in the given traces")
        started = time.monotonic()
        progress = Progress(
            TextColumn("Replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.description}", style="dim"), console=_stderr(),
        )
        with progress:
            task = progress.add_task("", total=len(runs))

            logged = _progress_lines("Replaying", len(runs), started)

            def advance(result: engine.RunResult) -> None:
                progress.update(task, advance=1, description=f"{result.source}/{result.run_id}"[-60:])
                logged(f"{result.source}/{result.run_id}")

            results, checks = engine.replay_many(
                runs, strategies=chosen, workers=workers, react_check=react_check, on_run=advance, peers=peers,
                price_models=priced,  # a cache-aware strategy is run under each model it is priced under
            )
            if checks:
                progress.update(task, description="ReAct Query Memory check…")
        summary = report.summarize(results, react=checks, seconds=time.monotonic() - started,
                                   memory_tools=engine.memory_tool_sizes(), price_models=priced)
        summary.notes += not_replayed
        summary.workers = workers
        if budget is not None:
            from agent_memory.replay.kernel_replay import replay_kernel

            kernel_progress = Progress(TextColumn("Kernel"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                       console=_stderr())
            with kernel_progress:
                kernel_task = kernel_progress.add_task("", total=len(runs))
                kernel_logged = _progress_lines("Kernel", len(runs), time.monotonic())

                def kernel_advance(_: object) -> None:
                    kernel_progress.update(kernel_task, advance=1)
                    kernel_logged("")

                kernel_results = replay_kernel(runs, budget=budget, on_run=kernel_advance)
            summary.kernel = report.summarize_kernel(kernel_results)
            summary.kernel_budget = budget
            summary.seconds = time.monotonic() - started
        paths = report_plots.write_report(summary, out)
        width = min(_stdout().width, TABLE_COLUMNS) if _stdout().is_terminal else TABLE_COLUMNS
        Console(highlight=False, width=width).print(report_text.rich_table(summary))
        line = report_text.tools_line(summary)
        if line:
            typer.echo(line)
        for row in summary.kernel:
            typer.echo(
                f"Kernel, {row['source']}: {row['compactions']:,} compactions in {row['runs_compacting']:,} of {row['runs']:,} runs, "
                f"{row['truncations']:,} truncations, largest prompt {row['largest_prompt']:,} tokens "
                f"(at most {row['largest_share_of_budget'] * 100:.0f}% of a run's budget), "
                f"checks failed: {row['checks_failed']}"
            )
        typer.echo("Wrote " + ", ".join(str(path) for path in paths.values()))
