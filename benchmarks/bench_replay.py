"""Savings and their price (issue 28): on every real trace source, what each strategy costs against
naive with prompt caching, simulated retrieves included, and how many of the values the runs'
models went on to use its prompts kept.

    python benchmarks/bench_replay.py [--data DIR] [--limit-runs N] [--out FILE]

Replays every run of ``DATA/traces`` (tau-bench with its agent tools from
``DATA/agent_tools/tau_bench_airline.json``, SWE-agent, ReAct HotpotQA, smolagents' GAIA runs,
TapeAgents' GAIA and WorkArena tapes) with the default strategies and the installed peers under the
three headline price models, exactly as ``make run`` does (without the page session, which is
constructed, and without the kernel replay). Per source and strategy: the cost change against naive
per price model, the runs that cost more than naive and the worst run's change, the values needed
and kept (``agent_memory.replay.used_values``), the calls with a miss, the simulated retrieve calls
(agent-memory) or tool re-runs (``masking_keep_3+rerun`` and each peer's ``+rerun``), and the
values lost. Writes ``benchmarks/results/replay.json`` and prints the default's rows.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from agent_memory.replay import engine, report  # noqa: E402
from agent_memory.replay.loaders import limit_per_source, load_tool_definitions, load_traces, with_tool_definitions  # noqa: E402
from agent_memory.replay.peers import DEFAULT_PEERS, installed_peers  # noqa: E402

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = PROJECT_ROOT.parent / "shared" / "data"
DEFAULT_OUT = PROJECT_ROOT / "benchmarks" / "results" / "replay.json"


def _rows(summary: report.ReplayReport) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for source in [*summary.sources, summary.total]:
        rows[source.source] = {
            "runs": source.runs,
            "calls": source.calls,
            "strategies": {
                label: {
                    "cost_change": {model: cost.change for model, cost in strategy.cost.items()},
                    "runs_dearer": {model: cost.runs_dearer for model, cost in strategy.cost.items()},
                    "worst_run_change": {model: cost.worst_run_change for model, cost in strategy.cost.items()},
                    "needed": strategy.needed,
                    "kept": strategy.kept,
                    "kept_share": round(strategy.kept_share, 4),
                    "calls_missed": strategy.calls_missed,
                    "retrieves": strategy.retrieves,
                    "retrieve_tokens": strategy.retrieve_tokens,
                    "lost": strategy.lost,
                }
                for label, strategy in source.strategies.items()
            },
        }
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--limit-runs", type=int, default=None, help="at most N runs per source")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    runs = load_traces([args.data / "traces"])
    runs = with_tool_definitions(runs, {"tau_bench": load_tool_definitions(args.data / "agent_tools" / "tau_bench_airline.json")})
    if args.limit_runs:
        runs = limit_per_source(runs, args.limit_runs)
    peers, not_replayed = installed_peers(DEFAULT_PEERS)
    started = time.monotonic()
    results, _ = engine.replay_many(runs, peers=peers, react_check=False)
    summary = report.summarize(results, seconds=time.monotonic() - started)
    out = {
        "benchmark": "replay: cost after simulated retrieves, later-used values kept",
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "command": "python benchmarks/bench_replay.py" + (f" --limit-runs {args.limit_runs}" if args.limit_runs else ""),
        "default": summary.default,
        "price_models": [model["label"] for model in summary.price_models],
        "peers_not_replayed": not_replayed,
        "seconds": round(summary.seconds, 1),
        "sources": _rows(summary),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    for name, row in out["sources"].items():
        chosen = row["strategies"][summary.default]
        changes = " / ".join(f"{change * 100:+.1f}%" for change in chosen["cost_change"].values())
        print(f"{name:28s} {summary.default}: cost {changes}; kept {chosen['kept']}/{chosen['needed']} "
              f"({chosen['kept_share'] * 100:.1f}%), {chosen['retrieves']} retrieves")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
