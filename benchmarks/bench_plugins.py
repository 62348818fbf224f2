"""Benchmark of the compaction plugins and citations on real pages and tool outputs.

Run from the project root::

    .venv/bin/python benchmarks/bench_plugins.py --data ../shared/data --out benchmarks/results/plugins.json

Input files are found by glob under ``--data`` (never by fixed names):

- ``webpages/readability/*/``: ``source.html``, ``expected.html`` (gold main content) and
  ``expected-metadata.json`` (gold title);
- ``webpages/trafilatura_eval/**/evaldata.json`` with its ``html/`` directory: per page, snippets
  the main content must keep (``with``) and boilerplate it must drop (``without``);
- ``traces/tau_bench/*.json`` (``role: tool`` messages), ``traces/swe_agent/*.traj``
  (``trajectory[].observation``) and ``sqlite/*.sqlite`` (queries run here).

Measured (see benchmarks/README.md):

1. web-page plugin on the readability pages: share of pages whose title matches the gold title
   (normalised), and share of the citation's lead words / sentences found in the gold content;
2. ``extract_page`` (trafilatura) on the trafilatura eval set: precision / recall / F1 of snippets;
3. rendered citation sizes (tokens) by source, with ``CitationBuilder(PluginRegistry.from_entry_points(),
   TiktokenCounter())`` at its defaults (cap 100 tokens, key content ≤ 8% of the result).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sqlite3
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from agent_memory import ItemMetadata, MemoryItem
from agent_memory.html import extract_page
from agent_memory.models.items import content_to_bytes
from agent_memory.plugins import PluginRegistry
from agent_memory.presentation.citations import VALUES_LABEL, CitationBuilder
from agent_memory.tokens import TiktokenCounter
from agent_memory.transforms import raw_text, readable_text

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = PROJECT_ROOT.parent / "shared" / "data"
DEFAULT_OUT = PROJECT_ROOT / "benchmarks" / "results" / "plugins.json"

READABILITY_GLOB = "webpages/readability/*/source.html"
TRAFILATURA_GLOB = "webpages/**/evaldata.json"
TAU_GLOB = "traces/tau_bench/*.json"
SWE_GLOB = "traces/swe_agent/*.traj"
SQLITE_GLOB = "sqlite/*.sqlite"

COUNTER = TiktokenCounter()
_WORD = re.compile(r"\w+", re.U)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
err = Console(stderr=True)


def norm(text: str | None) -> str:
    """Lower-cased words separated by single spaces (punctuation dropped)."""
    return " ".join(_WORD.findall((text or "").lower()))


def make_item(content: Any, n: int, type: str = "action_result", **meta: Any) -> MemoryItem:  # noqa: A002
    """An item as ``AgentMemory.store`` would record it (tokens of the raw and the readable text)."""
    _, encoding = content_to_bytes(content)
    raw = raw_text(content, encoding)
    item = MemoryItem(id=f"mem_{n:012x}", type=type, content=content,
                      metadata=ItemMetadata(content_encoding=encoding, tokens=COUNTER.count(raw), **meta))
    readable, _ = readable_text(item)
    if readable != raw:
        item = item.model_copy(update={"metadata": item.metadata.model_copy(
            update={"text_tokens": COUNTER.count(readable)})})
    return item


def quantiles(values: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / max / mean of ``values`` (nearest-rank percentiles)."""
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    rank = lambda q: ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]  # noqa: E731
    return {"n": len(ordered), "p50": rank(0.5), "p95": rank(0.95), "max": ordered[-1],
            "mean": round(statistics.fmean(ordered), 2)}


def html_text(path: Path) -> str:
    import lxml.html

    return lxml.html.fromstring(path.read_bytes()).text_content()


# -- 1. web pages --------------------------------------------------------------------------------
def bench_readability(data: Path, builder: CitationBuilder) -> dict[str, Any]:
    from compaction_plugins.web_page import page_title

    pages = sorted(data.glob(READABILITY_GLOB))
    rows = []
    for n, source in enumerate(pages):
        folder = source.parent
        meta_path, gold_path = folder / "expected-metadata.json", folder / "expected.html"
        if not meta_path.is_file() or not gold_path.is_file():
            continue
        gold_title = json.loads(meta_path.read_text(encoding="utf-8")).get("title") or ""
        html = source.read_text(encoding="utf-8", errors="replace")
        page = extract_page(html)
        title = page_title(html, page)
        item = make_item(html, n, type="web_content", media_type="text/html", source=f"https://example.org/{folder.name}")
        citation = builder.cite(item)
        key, values = _values_apart(citation.key_content)
        lead = _lead(key, (title, page.site_name, page.date))
        gold = norm(html_text(gold_path))
        gold_words = set(gold.split())
        sentences = [_whole_words(s) for s in _SENTENCE_END.split(lead.strip()) if _whole_words(s)]
        words = _whole_words(lead).split()
        rows.append({
            "page": folder.name,
            "title_exact": bool(gold_title) and norm(title) == norm(gold_title),
            "title_overlap": bool(gold_title) and bool(norm(title)) and (norm(title) in norm(gold_title)
                                                                        or norm(gold_title) in norm(title)),
            "trafilatura_title_exact": bool(gold_title) and norm(page.title) == norm(gold_title),
            "has_lead": bool(words),
            "lead_words": len(words),
            "lead_words_in_gold": sum(w in gold_words for w in words),
            "lead_sentences": len(sentences),
            "lead_sentences_in_gold": sum(s in gold for s in sentences),
            "values": len(values),
            "values_in_gold": sum(bool(norm(v)) and f" {norm(v)} " in f" {gold} " for v in values),
            "citation_tokens": COUNTER.count(citation.render()),
            "markup_in_citation": bool(re.search(r"<[a-zA-Z/!][^>]*>", citation.render())),
        })
    n = len(rows) or 1
    words = sum(r["lead_words"] for r in rows) or 1
    sentences = sum(r["lead_sentences"] for r in rows) or 1
    return {
        "pages": len(rows),
        "title_exact_share": round(sum(r["title_exact"] for r in rows) / n, 3),
        "title_overlap_share": round(sum(r["title_overlap"] for r in rows) / n, 3),
        "trafilatura_title_exact_share": round(sum(r["trafilatura_title_exact"] for r in rows) / n, 3),
        "pages_with_lead_share": round(sum(r["has_lead"] for r in rows) / n, 3),
        "lead_words_in_gold_share": round(sum(r["lead_words_in_gold"] for r in rows) / words, 3),
        "lead_sentences_in_gold_share": round(sum(r["lead_sentences_in_gold"] for r in rows) / sentences, 3),
        "pages_with_values_share": round(sum(bool(r["values"]) for r in rows) / n, 3),
        "values_in_gold_share": round(sum(r["values_in_gold"] for r in rows) / (sum(r["values"] for r in rows) or 1), 3),
        "pages_with_markup_in_citation": sum(r["markup_in_citation"] for r in rows),
        "per_page": rows,
    }


def _values_apart(key: str) -> tuple[str, list[str]]:
    """A citation's key content without its ``values:`` line, and that line's values (a last value
    cut short by an ellipsis left out)."""
    lines = key.split("\n")
    for n, line in enumerate(lines):
        if line.startswith(VALUES_LABEL):
            values = line[len(VALUES_LABEL):].split()
            if values and values[-1].endswith("…"):
                values = values[:-1]
            return "\n".join(lines[:n] + lines[n + 1:]), values
    return key, []


def _lead(key: str, head: tuple[str | None, ...]) -> str:
    """The lead excerpt of a web-page key content: what follows ``title · site · date: ``."""
    rest = key
    for part in head:
        if part and rest.startswith(part):
            rest = rest[len(part):].removeprefix(" · ")
    return rest.removeprefix(": ") if rest != key or key.startswith(": ") else key


def _whole_words(text: str) -> str:
    """Normalised words of ``text``, without a last word cut short by an ellipsis."""
    words = norm(text.strip()).split()
    return " ".join(words[:-1] if text.strip().endswith("…") else words)


# -- 2. main-content extraction ------------------------------------------------------------------
def bench_trafilatura_eval(data: Path) -> dict[str, Any]:
    counts = Counter()
    pages = 0
    for evaldata in sorted(data.glob(TRAFILATURA_GLOB)):
        root = evaldata.parent
        for entry in json.loads(evaldata.read_text(encoding="utf-8")).values():
            matches = list(root.glob(f"**/{entry['file']}"))
            if not matches:
                continue
            pages += 1
            text = norm(extract_page(matches[0].read_text(encoding="utf-8", errors="replace")).text)
            for snippet in entry.get("with", []):
                counts["tp" if norm(snippet) in text else "fn"] += 1
            for snippet in entry.get("without", []):
                counts["fp" if norm(snippet) in text else "tn"] += 1
    tp, fp, fn, tn = counts["tp"], counts["fp"], counts["fn"], counts["tn"]
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"pages": pages, "tp": tp, "fp": fp, "fn": fn, "tn": tn, "precision": round(precision, 3),
            "recall": round(recall, 3), "f1": round(f1, 3),
            "accuracy": round((tp + tn) / max(1, tp + fp + fn + tn), 3)}


# -- 3. citation sizes ---------------------------------------------------------------------------
def source_items(data: Path) -> Iterator[tuple[str, MemoryItem]]:
    n = 0
    for path in sorted(data.glob(READABILITY_GLOB)):
        n += 1
        yield "readability pages", make_item(path.read_text(encoding="utf-8", errors="replace"), n, type="web_content",
                                             media_type="text/html", source=f"https://example.org/{path.parent.name}")
    for path in sorted(data.glob(TAU_GLOB)):
        for run in json.loads(path.read_text(encoding="utf-8")):
            for message in run.get("traj", []):
                if message.get("role") == "tool":
                    n += 1
                    yield "tau-bench tool results", make_item(message["content"], n, source=message.get("name", "tool"))
    for path in sorted(data.glob(SWE_GLOB)):
        for step in json.loads(path.read_text(encoding="utf-8")).get("trajectory", []):
            if step.get("observation"):
                n += 1
                action = " ".join(step.get("action", "").split())[:60] or "shell"
                yield "SWE-agent observations", make_item(step["observation"], n, source=action)
    for path in sorted(data.glob(SQLITE_GLOB)):
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        db.row_factory = sqlite3.Row
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
        queries = [f'SELECT * FROM "{t}" LIMIT {limit}' for t in tables for limit in (5, 50)]
        queries += [
            "SELECT g.Name, COUNT(*) AS Tracks, AVG(t.Milliseconds) AS AvgMs FROM Track t JOIN Genre g "
            "USING (GenreId) GROUP BY g.Name ORDER BY Tracks DESC",
            "SELECT c.Country, COUNT(*) AS Invoices, SUM(i.Total) AS Revenue FROM Invoice i JOIN Customer c "
            "USING (CustomerId) GROUP BY c.Country ORDER BY Revenue DESC",
            "SELECT a.Title, ar.Name AS Artist FROM Album a JOIN Artist ar USING (ArtistId) LIMIT 30",
        ]
        for sql in queries:
            try:
                rows = [dict(r) for r in db.execute(sql)]
            except sqlite3.Error:
                continue
            n += 1
            yield "Chinook query results", make_item(rows, n, type="database_result", source=sql[:60])


def bench_citations(data: Path, builder: CitationBuilder) -> dict[str, Any]:
    by_source: dict[str, dict[str, list[Any]]] = {}
    for source, item in source_items(data):
        start = time.perf_counter()
        citation = builder.cite(item)
        elapsed_ms = (time.perf_counter() - start) * 1000
        rendered = COUNTER.count(citation.render())
        size = item.metadata.text_tokens if item.metadata.text_tokens is not None else item.metadata.tokens
        acc = by_source.setdefault(source, {"citation": [], "result": [], "ms": [], "plugins": [], "key": [],
                                            "header": []})
        acc["header"].append(COUNTER.count(builder.header(item).render()))
        acc["citation"].append(rendered)
        acc["result"].append(size)
        acc["ms"].append(elapsed_ms)
        acc["plugins"].append(citation.plugin or "header-only")
        acc["key"].append(COUNTER.count(citation.key_content))
    out = {}
    for source, acc in by_source.items():
        total_result, total_citation = sum(acc["result"]), sum(acc["citation"])
        shown = [c for c, r in zip(acc["citation"], acc["result"], strict=True) if c < r]
        out[source] = {
            "items": len(acc["citation"]),
            "citation_tokens": quantiles(acc["citation"]),
            "key_content_tokens": quantiles(acc["key"]),
            "header_only_tokens": quantiles(acc["header"]),
            "result_tokens": quantiles(acc["result"]),
            "citation_to_result_ratio": round(total_citation / max(1, total_result), 3),
            "tokens_saved_where_citation_is_smaller": sum(r - c for c, r in zip(acc["citation"], acc["result"],
                                                                               strict=True) if c < r),
            "share_citation_smaller_than_result": round(len(shown) / len(acc["citation"]), 3),
            "over_cap": sum(c > builder.max_tokens for c in acc["citation"]),
            "plugins": dict(Counter(acc["plugins"]).most_common()),
            "cite_ms": quantiles([round(ms, 2) for ms in acc["ms"]]),
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="directory of ../shared/data's layout")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results JSON")
    args = parser.parse_args(argv)
    data: Path = args.data
    if not data.is_dir():
        err.print(f"[red]no data directory at {data}[/red]")
        return 2
    registry = PluginRegistry.from_entry_points()
    builder = CitationBuilder(registry, COUNTER)
    started = time.perf_counter()
    err.print("1/3 web-page plugin on the readability pages…")
    readability = bench_readability(data, builder)
    err.print("2/3 main-content extraction on the trafilatura eval set…")
    extraction = bench_trafilatura_eval(data)
    err.print("3/3 citation sizes…")
    citations = bench_citations(data, builder)
    results = {
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "plugins": [{"name": p.name, "priority": p.priority} for p in registry.plugins],
        "citation_builder": {"max_tokens": builder.max_tokens, "key_share": builder.key_share,
                             "counter": "tiktoken o200k_base"},
        "readability": readability,
        "trafilatura_eval": extraction,
        "citations": citations,
        "seconds": round(time.perf_counter() - started, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")

    console = Console(width=max(Console().width, 150))
    pages = Table(title=f"Web pages: readability ({readability['pages']} pages), trafilatura eval "
                        f"({extraction['pages']} pages)")
    pages.add_column("measure")
    pages.add_column("value", justify="right")
    pages.add_row("title = gold title (normalised), web-page plugin", f"{readability['title_exact_share']:.3f}")
    pages.add_row("title = gold title, trafilatura's title alone", f"{readability['trafilatura_title_exact_share']:.3f}")
    pages.add_row("title contains / is contained in gold title", f"{readability['title_overlap_share']:.3f}")
    pages.add_row("citations with a lead excerpt", f"{readability['pages_with_lead_share']:.3f}")
    pages.add_row("lead words found in gold content", f"{readability['lead_words_in_gold_share']:.3f}")
    pages.add_row("lead sentences found verbatim in gold content", f"{readability['lead_sentences_in_gold_share']:.3f}")
    pages.add_row("citations with a values line", f"{readability['pages_with_values_share']:.3f}")
    pages.add_row("values found as words in gold content", f"{readability['values_in_gold_share']:.3f}")
    pages.add_row("citations with markup", str(readability["pages_with_markup_in_citation"]))
    pages.add_row("extract_page snippets: precision / recall / F1",
                  f"{extraction['precision']:.3f} / {extraction['recall']:.3f} / {extraction['f1']:.3f}")
    console.print(pages)
    sizes = Table(title="Rendered citation tokens (cap 100, key content ≤ 8% of the result)")
    for column in ("source", "items", "result p50", "header p50", "citation p50", "p95", "max", "citation/result",
                   "citation < result", "plugins", "cite ms p50/p95"):
        sizes.add_column(column, justify="left" if column in ("source", "plugins") else "right")
    for source, row in citations.items():
        c, r, ms = row["citation_tokens"], row["result_tokens"], row["cite_ms"]
        sizes.add_row(source, str(row["items"]), str(r["p50"]), str(row["header_only_tokens"]["p50"]), str(c["p50"]), str(c["p95"]), str(c["max"]),
                      f"{row['citation_to_result_ratio']:.3f}", f"{row['share_citation_smaller_than_result']:.0%}",
                      ", ".join(f"{k} {v}" for k, v in row["plugins"].items()), f"{ms['p50']:.1f} / {ms['p95']:.1f}")
    console.print(sizes)
    console.print(f"results: {args.out} ({results['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
