"""Benchmark of AgentMemory on real data: store latency with and without embedding, and the
recall of ``query`` on HotpotQA supporting paragraphs.

Run from the project root::

    .venv/bin/python benchmarks/bench_memory.py --data ../shared/data --out benchmarks/results/memory.json

Input files are found by glob under ``--data`` (never by fixed names), so any directory of the
same layout works:

- ``webpages/readability/*/source.html``: raw web pages, stored as ``web_content`` /
  ``text/html`` (the index embeds their extracted main text);
- ``hotpotqa/*.json``: lists of HotpotQA questions with ``context: [[title, [sentences]]]`` and
  ``supporting_facts: [[title, sentence_index]]``. Each distinct paragraph is stored as
  ``"<title>\\n<sentences joined>"`` with ``title=<title>``.

Measured (see benchmarks/README.md for the meaning of every figure):

1. per-item ``store`` latency with embedding (``index_on_store=True``) and without
   (``index_on_store=False``, then ``flush_index`` timed on its own), pages and paragraphs apart;
2. recall@5 and recall@10 of each question's supporting paragraphs among ``query(text=question)``
   hits, over all paragraphs pooled with the pages as distractors, and over the paragraphs only;
3. ``query`` latency.

Everything runs in fresh temporary memories that are deleted at the end (``--keep`` keeps them).
"""

from __future__ import annotations

import os

# Before numpy / torch load: one BLAS thread (on 2 cores, after a threaded numpy product over
# ~1,400 all-MiniLM-L6-v2 vectors the next torch encode is ~11x slower), never a hub download, no
# library progress bars.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from importlib import metadata  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402
from rich.table import Table  # noqa: E402

from agent_memory import AgentMemory, MemoryConfig  # noqa: E402
from agent_memory.index.embedding import index_embedder  # noqa: E402
from revisions import forget_extractions  # noqa: E402 - a sibling module

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = PROJECT_ROOT.parent / "shared" / "data"
DEFAULT_OUT = PROJECT_ROOT / "benchmarks" / "results" / "memory.json"

PAGES_GLOB = "webpages/readability/*/source.html"
"""Raw web pages, relative to ``--data``."""
HOTPOTQA_GLOB = "hotpotqa/*.json"
"""HotpotQA question files (each a JSON list of questions), relative to ``--data``."""

QUERY_LIMIT = 5
"""``limit`` of the timed queries (recall@5)."""
WIDE_LIMIT = 10
"""``limit`` of the second pass of queries (recall@10)."""

PARAGRAPH_TYPE = "search_results"
"""Type the HotpotQA paragraphs are stored with (what a search tool returns); the paragraphs-only
figures filter on it inside the index."""

BASELINES = {"bm25": 0.750, "dense": 0.775, "hybrid": 0.783, "target": 0.85}
"""HotpotQA recall@5, all paragraphs pooled, of the public baselines (bm25s, all-MiniLM-L6-v2 and
reciprocal rank fusion (k=60), measured before the project had code; bench_retrieval.py recomputes
them)."""

console = Console(stderr=True)


# -- data ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Page:
    name: str
    """The page's directory name."""
    html: str


@dataclass(frozen=True, slots=True)
class Paragraph:
    title: str
    text: str
    """``title + "\\n" + sentences``: what is stored."""


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    supporting_titles: frozenset[str]


def load_pages(data: Path) -> list[Page]:
    pages = []
    for path in sorted(data.glob(PAGES_GLOB)):
        raw = path.read_bytes()
        try:
            html = raw.decode("utf-8")
        except UnicodeDecodeError:
            html = raw.decode("latin-1")
        pages.append(Page(path.parent.name, html))
    return pages


def load_hotpotqa(data: Path) -> tuple[list[Question], list[Paragraph], list[str]]:
    """Questions, distinct paragraphs (first seen first), and the files read."""
    questions: list[Question] = []
    paragraphs: dict[tuple[str, str], Paragraph] = {}
    files = sorted(data.glob(HOTPOTQA_GLOB))
    for path in files:
        for entry in json.loads(path.read_text(encoding="utf-8")):
            for title, sentences in entry["context"]:
                text = f"{title}\n{''.join(sentences).strip()}"
                paragraphs.setdefault((title, text), Paragraph(title, text))
            supporting = frozenset(title for title, _ in entry["supporting_facts"])
            questions.append(Question(entry["question"], supporting))
    return questions, list(paragraphs.values()), [str(p.relative_to(data)) for p in files]


# -- measuring -------------------------------------------------------------------------------------
def summarize_ms(samples_s: Sequence[float]) -> dict[str, float | int]:
    """p50 / p95 / mean / max in milliseconds and the total in seconds of latencies in seconds."""
    ms = sorted(s * 1000 for s in samples_s)
    if not ms:
        return {"n": 0}
    cuts = statistics.quantiles(ms, n=100, method="inclusive") if len(ms) > 1 else [ms[0]] * 99
    return {
        "n": len(ms),
        "p50_ms": round(cuts[49], 2),
        "p95_ms": round(cuts[94], 2),
        "mean_ms": round(statistics.fmean(ms), 2),
        "max_ms": round(ms[-1], 2),
        "total_s": round(sum(ms) / 1000, 3),
    }


def progress_bar() -> Progress:
    return Progress(TextColumn("{task.description:<42}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console)


def timed_stores(memory: AgentMemory, label: str, items: Sequence[Any],
                 store: Callable[[AgentMemory, Any], str]) -> list[float]:
    """Store every item and return each store call's wall time in seconds."""
    latencies: list[float] = []
    with progress_bar() as progress:
        task = progress.add_task(label, total=len(items))
        for item in items:
            start = time.perf_counter()
            store(memory, item)
            latencies.append(time.perf_counter() - start)
            progress.advance(task)
    return latencies


def store_page(memory: AgentMemory, page: Page) -> str:
    return memory.store(page.html, type="web_content", media_type="text/html", source=f"readability/{page.name}")


def store_paragraph(memory: AgentMemory, paragraph: Paragraph) -> str:
    return memory.store(paragraph.text, type=PARAGRAPH_TYPE, title=paragraph.title, source="hotpotqa")


def open_memory(root: Path, name: str, *, index_on_store: bool) -> AgentMemory:
    """A fresh memory with its index opened (so the first timed store does not pay for it)."""
    memory = AgentMemory(name, root / name, config=MemoryConfig(index_on_store=index_on_store))
    _ = memory.index
    return memory


def dense_view(memory: AgentMemory) -> AgentMemory | None:
    """The same memory directory opened with ``hybrid_search=False`` (dense ranking only), or
    ``None`` when this version of MemoryConfig has no keyword ranking to turn off."""
    if "hybrid_search" not in MemoryConfig.model_fields or not memory.config.hybrid_search:
        return None
    config = memory.config.model_copy(update={"hybrid_search": False})
    return AgentMemory(memory.agent_id, memory.memory_dir, config=config)


def chroma_collection(memory: AgentMemory) -> Any | None:
    """The chromadb collection behind ``memory`` (for counts and the exhaustive check), or ``None``
    when the index is not the built-in Chroma one. Reaches into internals: diagnostics only."""
    index = memory.index
    collection = getattr(index, "collection", None)
    if collection is None and callable(getattr(index, "_using", None)):
        with index._using() as current:  # the collection object outlives the call: single-threaded here
            collection = current
    return collection


def index_chunks(memory: AgentMemory) -> int | None:
    collection = chroma_collection(memory)
    return int(collection.count()) if collection is not None else None


def evaluate(memory: AgentMemory, questions: Sequence[Question], label: str, **filters: Any) -> dict[str, Any]:
    """recall@5 and recall@10 of supporting titles and query latency, with ``filters`` (e.g.
    ``type=...``) applied inside the index.

    Three passes over the questions: ``limit=5`` (timed; recall@5), ``limit=10`` (recall@10), and
    ``limit=5`` again (timed). The first pass runs right after the bulk stores, while the index may
    still be settling; the last one shows the steady state.
    """
    recall5: list[float] = []
    complete5: list[float] = []
    recall10: list[float] = []
    first_pass: list[float] = []
    last_pass: list[float] = []

    def found(text: str, limit: int, question: Question, latencies: list[float] | None = None) -> set[str]:
        start = time.perf_counter()
        hits = memory.query(text=text, limit=limit, **filters)
        if latencies is not None:
            latencies.append(time.perf_counter() - start)
        return {hit.item.metadata.title for hit in hits} & question.supporting_titles

    with progress_bar() as progress:
        task = progress.add_task(f"query: {label}", total=3 * len(questions))
        for question in questions:
            top5 = found(question.text, QUERY_LIMIT, question, first_pass)
            recall5.append(len(top5) / len(question.supporting_titles))
            complete5.append(float(top5 == question.supporting_titles))
            progress.advance(task)
        for question in questions:
            top10 = found(question.text, WIDE_LIMIT, question)
            recall10.append(len(top10) / len(question.supporting_titles))
            progress.advance(task)
        for question in questions:
            found(question.text, QUERY_LIMIT, question, last_pass)
            progress.advance(task)
    return {
        "items": len(memory) if not filters else sum(
            1 for record in memory.records() if all(getattr(record, k) == v for k, v in filters.items())),
        "filters": filters,
        "questions": len(questions),
        "recall_at_5": round(statistics.fmean(recall5), 4),
        "recall_at_10": round(statistics.fmean(recall10), 4),
        "all_supporting_at_5": round(statistics.fmean(complete5), 4),
        "query_latency": summarize_ms(last_pass),
        "query_latency_first_pass": summarize_ms(first_pass),
    }


def exact_recall(memory: AgentMemory, questions: Sequence[Question], *, item_type: str | None = None) -> dict[str, Any]:
    """recall@5 / @10 of an exhaustive cosine search over the very vectors in the index (best
    chunk per item, as ``query`` ranks): separates the index's approximation (HNSW) from the
    embedding's quality. ``None`` values when the index is not the Chroma one."""
    import numpy as np

    collection = chroma_collection(memory)
    embedder = index_embedder(memory.config).embedder
    if collection is None:
        return {"recall_at_5": None, "recall_at_10": None}
    stored = collection.get(include=["embeddings", "metadatas"])
    titles = {record.id: record.metadata.title for record in memory.records()
              if item_type is None or record.type == item_type}
    keep = [i for i, meta in enumerate(stored["metadatas"]) if meta["item_id"] in titles]
    vectors = np.asarray(stored["embeddings"], dtype=np.float32)[keep]
    owners = [stored["metadatas"][i]["item_id"] for i in keep]
    queries = np.asarray(embedder.embed([q.text for q in questions]), dtype=np.float32)
    scores = queries @ vectors.T
    recalls: dict[int, list[float]] = {QUERY_LIMIT: [], WIDE_LIMIT: []}
    for row, question in zip(scores, questions, strict=True):
        ranked: list[str] = []
        for chunk in np.argsort(-row, kind="stable"):
            if owners[chunk] not in ranked:
                ranked.append(owners[chunk])
                if len(ranked) == WIDE_LIMIT:
                    break
        for k, values in recalls.items():
            found = {titles[item_id] for item_id in ranked[:k]} & question.supporting_titles
            values.append(len(found) / len(question.supporting_titles))
    return {f"recall_at_{k}": round(statistics.fmean(v), 4) for k, v in recalls.items()}


# -- report ----------------------------------------------------------------------------------------
def load_average() -> float | None:
    """1-minute load average: other processes on the machine inflate every latency."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def machine_info() -> dict[str, Any]:
    def version(package: str) -> str | None:
        try:
            return metadata.version(package)
        except metadata.PackageNotFoundError:
            return None

    cpu_model = None
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import torch

    return {
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu_model": cpu_model,
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": {name: version(name) for name in (
            "agent-memory", "chromadb", "sentence-transformers", "torch", "transformers", "tiktoken", "trafilatura",
        )},
        "env": {name: os.environ.get(name) for name in ("OPENBLAS_NUM_THREADS", "HF_HUB_OFFLINE")},
    }


def print_table(results: dict[str, Any]) -> None:
    """The figures as two rich tables on stdout: store latency, then retrieval."""
    store = results["store"]
    latency = Table(title="store latency per item (ms)", title_justify="left")
    latency.add_column("measure")
    latency.add_column(f"pages (n={store['with_embedding']['pages']['n']})", justify="right")
    latency.add_column(f"paragraphs (n={store['with_embedding']['paragraphs']['n']})", justify="right")
    for label, key in (("with embedding", "with_embedding"), ("without embedding", "without_embedding")):
        for stat in ("p50_ms", "p95_ms"):
            latency.add_row(f"store {label}, {stat[:3]}", f"{store[key]['pages'][stat]:.1f}",
                            f"{store[key]['paragraphs'][stat]:.1f}")
    flush = store["without_embedding"]["flush_index"]
    latency.add_row("flush_index after deferred stores",
                    f"{flush['seconds']:.1f} s for {flush['items']} items", f"{flush['items_per_s']:.1f} items/s")

    retrieval = Table(title="HotpotQA: supporting paragraphs among the hits of query(text=question); latencies in ms",
                      title_justify="left")
    for column in ("searched, ranking", "items", "r@5", "r@10", "both@5", "exact dense r@5", "p50", "p95", "1st-pass p95"):
        retrieval.add_column(column, justify="left" if column.startswith("searched") else "right", no_wrap=True)
    hybrid = results["config"].get("hybrid_search")
    mode = "hybrid" if hybrid else "dense"
    for label, key in (("pooled with pages", "pooled_with_pages"), ("paragraphs only", "paragraphs_only")):
        r = results["retrieval"][key]
        exact = r["exhaustive_dense"]["recall_at_5"]
        for name, run in ((f"{label}, {mode}", r), (f"{label}, dense", r.get("dense_only"))):
            if run is None:
                continue
            retrieval.add_row(name, str(run["items"]), f"{run['recall_at_5']:.3f}", f"{run['recall_at_10']:.3f}",
                              f"{run['all_supporting_at_5']:.3f}", "-" if exact is None else f"{exact:.3f}",
                              f"{run['query_latency']['p50_ms']:.1f}", f"{run['query_latency']['p95_ms']:.1f}",
                              f"{run['query_latency_first_pass']['p95_ms']:.1f}")
    out = Console(width=None if sys.stdout.isatty() else 120)
    out.print(latency)
    out.print(retrieval)
    out.print(
        f"Baselines (bm25s / all-MiniLM-L6-v2 / RRF, recall@5 pooled): BM25 {BASELINES['bm25']:.3f}, "
        f"dense {BASELINES['dense']:.3f}, "
        f"hybrid {BASELINES['hybrid']:.3f}; target >= {BASELINES['target']:.2f}. "
        f"Cold start {results['cold_start_s']:.1f} s. Load average (1 min) "
        f"{results['load_average_1min']['start']} at start, {results['load_average_1min']['end']} at end."
    )


# -- main ------------------------------------------------------------------------------------------
def run(data: Path, root: Path) -> dict[str, Any]:
    started = time.perf_counter()
    load_start = load_average()
    pages = load_pages(data)
    questions, paragraphs, hotpot_files = load_hotpotqa(data)
    if not pages or not questions:
        raise SystemExit(f"no input under {data}: need {PAGES_GLOB} and {HOTPOTQA_GLOB}")
    console.print(f"{len(pages)} pages, {len(questions)} questions, {len(paragraphs)} distinct paragraphs")

    # Cold start (torch import, model load, tiktoken) is paid once per process: measure it apart.
    start = time.perf_counter()
    warm = open_memory(root, "warmup", index_on_store=True)
    warm.store("warm-up item", title="warm-up")
    warm.query(text="warm up")
    cold_start_s = time.perf_counter() - start

    forget_extractions()
    embedded = open_memory(root, "with-embedding", index_on_store=True)
    with_pages = timed_stores(embedded, "store pages, with embedding", pages, store_page)
    with_paragraphs = timed_stores(embedded, "store paragraphs, with embedding", paragraphs, store_paragraph)

    forget_extractions()
    deferred = open_memory(root, "without-embedding", index_on_store=False)
    without_pages = timed_stores(deferred, "store pages, without embedding", pages, store_page)
    without_paragraphs = timed_stores(deferred, "store paragraphs, without embedding", paragraphs, store_paragraph)
    forget_extractions()
    with console.status("flush_index of the deferred memory"):
        start = time.perf_counter()
        flushed = deferred.flush_index()
        flush_s = time.perf_counter() - start

    pooled = evaluate(embedded, questions, "paragraphs + pages")
    paragraphs_only = evaluate(embedded, questions, "paragraphs only", type=PARAGRAPH_TYPE)
    dense = dense_view(embedded)
    if dense is not None:  # the same indexes, queried without the keyword ranking
        pooled["dense_only"] = evaluate(dense, questions, "paragraphs + pages, dense only")
        paragraphs_only["dense_only"] = evaluate(dense, questions, "paragraphs only, dense only", type=PARAGRAPH_TYPE)
    pooled["exhaustive_dense"] = exact_recall(embedded, questions)
    paragraphs_only["exhaustive_dense"] = exact_recall(embedded, questions, item_type=PARAGRAPH_TYPE)

    return {
        "benchmark": "agent-memory store / query on real data",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "data_dir": str(data),
        "machine": machine_info(),
        "config": json.loads(MemoryConfig().model_dump_json()),
        "dataset": {
            "pages_glob": PAGES_GLOB,
            "pages": len(pages),
            "pages_bytes": sum(len(p.html.encode("utf-8")) for p in pages),
            "hotpotqa_glob": HOTPOTQA_GLOB,
            "hotpotqa_files": hotpot_files,
            "questions": len(questions),
            "paragraphs": len(paragraphs),
            "supporting_titles_per_question": round(
                statistics.fmean(len(q.supporting_titles) for q in questions), 3),
        },
        "cold_start_s": round(cold_start_s, 3),
        "store": {
            "with_embedding": {
                "pages": summarize_ms(with_pages),
                "paragraphs": summarize_ms(with_paragraphs),
                "index_chunks": index_chunks(embedded),
            },
            "without_embedding": {
                "pages": summarize_ms(without_pages),
                "paragraphs": summarize_ms(without_paragraphs),
                "flush_index": {
                    "items": flushed,
                    "seconds": round(flush_s, 3),
                    "items_per_s": round(flushed / flush_s, 2) if flush_s else None,
                    "index_chunks": index_chunks(deferred),
                },
            },
        },
        "retrieval": {
            "query_limit": QUERY_LIMIT,
            "pooled_with_pages": pooled,
            "paragraphs_only": paragraphs_only,
            "baselines_recall_at_5": BASELINES,
        },
        "load_average_1min": {"start": load_start, "end": load_average()},
        "runtime_s": round(time.perf_counter() - started, 1),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("AGENT_MEMORY_DATA", DEFAULT_DATA)),
                        help="data directory with the layout of ../shared/data (default: $AGENT_MEMORY_DATA "
                        "or ../shared/data)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"results JSON (default: {DEFAULT_OUT})")
    parser.add_argument("--keep", action="store_true", help="keep the temporary memories and print their path")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        console.print(f"[red]no data directory at {args.data}[/red]")
        return 2
    root = Path(tempfile.mkdtemp(prefix="agent-memory-bench-"))
    try:
        results = run(args.data.resolve(), root)
    finally:
        if args.keep:
            console.print(f"memories kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print_table(results)
    console.print(f"results written to {args.out} ({results['runtime_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
