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


MAX_CURVES = 6
"""Curves a panel draws at most: naive, the default, masking, the best and the worst peer (the rest
of the strategies are in the tables and report.json)."""


def _shown(report: ReplayReport, series: dict[str, list[float]]) -> list[str]:
    """The strategies a panel draws, in the report's order: naive, the default, masking, then the
    peers whose total is lowest and highest (:data:`MAX_CURVES` at most); no ``+rerun`` curve."""
    present = [label for label in report.strategies if series.get(label) and not label.endswith(RERUN_SUFFIX)]
    wanted = [label for label in (NAIVE, report.default, MASKING) if label in present]
    peers = sorted((label for label in present if label in report.peers and label not in wanted),
                   key=lambda label: (sum(series[label]), label))
    wanted += dict.fromkeys(peers[:1] + peers[-1:])
    others = [label for label in present if label not in wanted]  # strategies beside the default, no peer
    wanted += others[: max(0, MAX_CURVES - len(wanted))]
    return [label for label in present if label in wanted][:MAX_CURVES]


def _panels(report: ReplayReport, series: dict[str, dict[str, list[float]]], *, ylabel: str, title: str,
            total: Callable[[float], str], change: Callable[[StrategySummary], float], log: bool) -> Figure:
    """One panel per source: the cumulative sum of the per-call values of the strategies
    :func:`_shown` picks (``log``: on a log scale), the default drawn thick in black; the legend,
    below the panel, ends each entry with the strategy's Σ (``total`` formats it) and its change
    against naive as the tables give it (``change``)."""
    require_extra("replay", "the replay's plots")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(series)
    cols = min(2, len(names))
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.8 * cols, 5.6 * rows), squeeze=False, layout="constrained")
    palette = plt.get_cmap("tab10")
    bases = [label for label in report.strategies if not label.endswith(RERUN_SUFFIX)]
    colours: dict[str, Any] = {label: palette(n % 10) for n, label in enumerate(bases)}
    summaries = {s.source: s for s in report.sources}
    for ax, name in zip(axes.flat, names):
        floor = math.inf
        for label in _shown(report, series[name]):  # legend in strategy order; the default drawn on top
            cumulative = list(accumulate(series[name][label]))
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
        if log:
            ax.set_yscale("log")
            if 0 < floor < math.inf:  # leave out the first 5% of calls: the lines part later
                ax.set_ylim(bottom=floor)
        else:
            ax.set_ylim(bottom=0)
        ax.set_xlabel("LLM call (runs one after another)", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=11)
    return fig


def figure(report: ReplayReport, kind: Literal["tokens", "cost"] = "tokens") -> Figure:
    """The matplotlib figure of ``tokens.png`` (cumulative net prompt tokens, log scale) or
    ``cost.png`` (cumulative cost in USD under the first price model, linear), one panel per
    source, at most :data:`MAX_CURVES` curves each, the default strategy marked. Close it with
    ``matplotlib.pyplot.close``.

    Raises:
        ValueError: ``kind="cost"`` for a report without prices.
    """
    if kind == "tokens":
        series = {name: {label: [float(v) for v in values] for label, values in curves.items()}
                  for name, curves in report.curves.items()}
        return _panels(report, series, ylabel="cumulative net prompt tokens (log)", total=_k,
                       change=lambda summary: summary.reduction, log=True,
                       title="How many prompt tokens does each strategy send? Σ and change against naive")
    if not report.cost_curves:
        raise ValueError("the report has no prices: summarize() with price models")
    name, label = report.price_models[0]["name"], report.price_models[0]["label"]
    return _panels(report, report.cost_curves, ylabel="cumulative cost, USD", total=_usd,
                   change=lambda summary: summary.cost[label].change, log=False,
                   title=f"What does each strategy cost at {name} prices, prompt caching included? Σ and change "
                         "against naive")


def savings_figure(report: ReplayReport) -> Figure:
    """The bar chart of ``savings.png``: per real source and for the real traces' total, the
    default strategy's cost change against naive under each price model, simulated retrieves
    included (below 0 it saves money); the constructed page session, whose changes are of
    another size, in a panel of its own beside. Close it with ``matplotlib.pyplot.close``.

    Raises:
        ValueError: for a report without prices.
    """
    require_extra("replay", "the replay's plots")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not report.price_models:
        raise ValueError("the report has no prices: summarize() with price models")
    real = [*[s for s in report.sources if not s.scripted], report.total]
    constructed = [s for s in report.sources if s.scripted]
    models = [(m["label"], m["name"]) for m in report.price_models]
    groups = [real, constructed] if constructed else [real]
    fig, axes = plt.subplots(1, len(groups), figsize=(1.7 * len(real) + 2.6 * len(constructed) + 2.5, 5.0),
                             squeeze=False, gridspec_kw={"width_ratios": [max(1, len(g)) for g in groups]},
                             layout="constrained")
    width = 0.8 / len(models)
    for ax, summaries in zip(axes.flat, groups):
        lowest = highest = 0.0
        for n, (label, name) in enumerate(models):
            changes = [s.strategies[report.default].cost[label].change * 100 for s in summaries]
            lowest, highest = min(lowest, *changes), max(highest, *changes)
            xs = [i + (n - (len(models) - 1) / 2) * width for i in range(len(summaries))]
            bars = ax.bar(xs, changes, width, label=name, color=f"C{n}")
            ax.bar_label(bars, labels=[_pct(c / 100) for c in changes], fontsize=6, padding=2)
        names = ["real traces" if s.source == "total" else s.source for s in summaries]
        ax.set_xticks(range(len(summaries)), names, fontsize=7)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_ylim(bottom=lowest * 1.25 - 5, top=max(highest * 1.25 + 5, -0.15 * lowest, 5.0))  # room for labels
        ax.grid(axis="y", alpha=0.3)
        ax.tick_params(axis="y", labelsize=7)
        ax.set_title("constructed page session" if summaries is constructed else "real agent runs", fontsize=9)
    axes.flat[0].set_ylabel(f"cost change of {report.default} against naive, %", fontsize=8)
    axes.flat[0].legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=len(models), frameon=False)
    fig.suptitle(f"Does {report.default} save money? Cost change against naive, prompt caching and simulated "
                 "retrieves included", fontsize=10)
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
