"""Replay report, the plots and the files: ``tokens.png`` (cumulative net prompt tokens per LLM
call, one panel per source) and ``cost.png`` (cumulative cost per LLM call under the first price
model, one panel per source) from a :class:`~agent_memory.replay.report.ReplayReport`
(:func:`figure`), and :func:`write_report`, which writes them with ``report.json`` and
``report.md`` (:mod:`~agent_memory.replay.report_text`).

matplotlib is imported only when a figure is drawn, never when this module is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agent_memory.extras import require_extra
from agent_memory.replay.report import PAGES_SUFFIX, ReplayReport, StrategySummary
from agent_memory.replay.report_text import _k, _pct, _usd, markdown
from agent_memory.replay.strategies import MASKING, NAIVE, RERUN_SUFFIX

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["figure", "savings_figure", "write_report"]


def _panels(report: ReplayReport, series: dict[str, dict[str, list[float]]], *, ylabel: str, title: str,
            total: Callable[[float], str], change: Callable[[StrategySummary], float]) -> Figure:
    """One panel per source: the cumulative sum of each strategy's per-call values on a log scale,
    the default strategy drawn thick in black; each legend entry ends with the strategy's Σ
    (``total`` formats it) and its change against naive as the tables give it (``change``)."""
    require_extra("replay", "the replay's plots")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(series)
    cols = min(2, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.8 * cols, 4.4 * rows), squeeze=False)
    # a ``+rerun`` curve takes its strategy's colour, drawn thin: the same strategy, priced with re-runs
    bases = [label for label in report.strategies if label.removesuffix(RERUN_SUFFIX) == label
             or label.removesuffix(RERUN_SUFFIX) not in report.strategies]
    palette = plt.get_cmap("tab20" if len(bases) > 10 else "tab10")
    colours: dict[str, Any] = {label: palette(n) for n, label in enumerate(bases)}
    for label in report.strategies:
        colours.setdefault(label, colours.get(label.removesuffix(RERUN_SUFFIX), "grey"))
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
            base = label.removesuffix(RERUN_SUFFIX)
            style = "--" if base == MASKING else ":" if label == NAIVE else "-." if label in report.peers else "-"
            ax.plot(range(1, len(cumulative) + 1), cumulative, style, color="black" if chosen else colours[label],
                    label=f"{label}{' (default)' if chosen else ''}: {total(cumulative[-1])}{versus}",
                    linewidth=2.4 if chosen else 0.8 if base != label else 1.4, zorder=3 if chosen else 2)
        scripted = next((s.scripted for s in report.sources if s.source == name), False)
        ax.set_title(name + (PAGES_SUFFIX if scripted else ""), fontsize=10)
        ax.set_yscale("log")
        if 0 < floor < math.inf:  # leave out the first 5% of calls: the lines part later
            ax.set_ylim(bottom=floor)
        ax.set_xlabel("LLM call (runs one after another)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=6 if len(report.strategies) > 10 else 8, loc="lower right")
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


def savings_figure(report: ReplayReport) -> Figure:
    """The bar chart of ``savings.png``: per source (the constructed page session marked) and for
    the real traces' total, the default strategy's cost change against naive under each price
    model, simulated retrieves included; below 0 it saves money. Close it with
    ``matplotlib.pyplot.close``.

    Raises:
        ValueError: for a report without prices.
    """
    require_extra("replay", "the replay's plots")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not report.price_models:
        raise ValueError("the report has no prices: summarize() with price models")
    summaries = [*report.sources, report.total]
    models = [(m["label"], m["name"]) for m in report.price_models]
    width = 0.8 / len(models)
    fig, ax = plt.subplots(figsize=(max(7.0, 1.5 * len(summaries)), 4.6))
    for n, (label, name) in enumerate(models):
        changes = [s.strategies[report.default].cost[label].change * 100 for s in summaries]
        xs = [i + (n - (len(models) - 1) / 2) * width for i in range(len(summaries))]
        bars = ax.bar(xs, changes, width, label=name, color=f"C{n}")
        ax.bar_label(bars, labels=[_pct(c / 100) for c in changes], fontsize=7, padding=2)
    names = [("real traces" if s.source == "total" else s.source) + ("\n(constructed)" if s.scripted else "")
             for s in summaries]
    ax.set_xticks(range(len(summaries)), names, fontsize=8, rotation=15)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_ylabel(f"cost change of {report.default} against naive, %")
    ax.set_title(f"Does {report.default} save money? Cost change against naive with prompt caching, "
                 "simulated retrieves included (below 0: cheaper)", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _save(fig: Figure, path: Path) -> None:
    require_extra("replay", "the replay's plots")
    import matplotlib.pyplot as plt

    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(report: ReplayReport, out_dir: Path | str) -> dict[str, Path]:
    """Write ``report.json``, ``report.md``, ``tokens.png`` and (when priced) ``cost.png`` and
    ``savings.png`` into ``out_dir`` (created); returns their paths by name (``json``, ``md``,
    ``png``, ``cost_png``, ``savings_png``).

    Raises:
        MissingExtraError: without the ``replay`` extra (matplotlib), before anything is written.
    """
    require_extra("replay", "the replay's plots")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "md": out / "report.md", "png": out / "tokens.png"}
    paths["json"].write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    paths["md"].write_text(markdown(report), encoding="utf-8")
    _save(figure(report, "tokens"), paths["png"])
    if report.cost_curves:
        paths["cost_png"] = out / "cost.png"
        _save(figure(report, "cost"), paths["cost_png"])
    if report.price_models:
        paths["savings_png"] = out / "savings.png"
        _save(savings_figure(report), paths["savings_png"])
    return paths
