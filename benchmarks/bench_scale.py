"""Latency as memory grows (issue #9, part 2; issue 16 for Postgres): store, query (text,
filtered, listing) and retrieve at N = 1k, 10k and 100k items of real text, on each backend: the
file backend (JSONL + embedded Chroma + SQLite FTS5) and Postgres with pgvector (pgserver's
server, started here, or the database ``--postgres-url`` names), side by side. At each size the
retrieval quality is measured too: recall@5 of the supporting paragraphs of the 60 HotpotQA
questions (every paragraph is in the memory from 1k items on, among the other texts).

The corpus is real: the HotpotQA paragraphs, the 1,400 Cranfield abstracts and the LoCoMo turns of
``../shared/data`` (5,435 unique texts), repeated with distinct ids up to N (a copy has the same
text and title, and its copy number in ``extra``).
Building a 100k-item memory is not what is measured, so the embeddings of the unique texts are
computed once and reused for their copies (a cache in front of the real embedding model; the
issue allows precomputed embeddings to build the corpus). Everything measured afterwards runs the
library as an agent does: ``AgentMemory.query`` embeds each query text with the real model,
``store`` writes the JSONL and the blob, ``retrieve`` reads and shapes the content.

    python benchmarks/bench_scale.py [--data DIR] [--sizes 1000 10000 100000] [--backends files postgres]
                                     [--postgres-url URL] [--out FILE]

Writes ``benchmarks/results/scale.json`` and ``scale.png`` (p95 latency against N, log scale, one
panel per backend) and prints the tables. Timings are wall-clock on this machine (2 cores); the
1-minute load average is recorded at the start and, for each size, before and after its timed
calls (``load_average_while_timed``): on a shared machine, a p95 measured under load says so.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from agent_memory import AgentMemory, MemoryConfig  # noqa: E402
from agent_memory.index.embedding import index_embedder  # noqa: E402

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = PROJECT_ROOT.parent / "shared" / "data"
DEFAULT_OUT = PROJECT_ROOT / "benchmarks" / "results" / "scale.json"
DEFAULT_SIZES = (1_000, 10_000, 100_000)
SAMPLES = 50
"""Timed calls per operation and size."""
TAG_GROUPS = 10
"""Items carry one of ``g0``..``g9``: a filter that keeps a tenth of the memory."""
SINGLE_QUERY = MemoryConfig(index_on_store=False, multi_hop=False)
"""The second configuration measured: one query per text (no multi-hop follow-up)."""
TARGETS_MS = {"query_text_p95": 50.0, "listing_p95": 10.0, "store_p95": 20.0}
"""Issue #9's targets at 100k items (store: without embedding, results under 10 KB)."""


OPERATIONS = ("query_text", "query_text_filtered", "query_text_single", "query_text_single_filtered",
              "listing", "listing_filtered", "retrieve", "store")
"""What is timed at each size (``query_text*``: the default multi-hop search, ``*_single``: one
query per text; ``*_filtered``: with a tag filter that keeps a tenth of the items)."""


def load_questions(data: Path) -> list[str]:
    """Every HotpotQA and LoCoMo question of ``data`` (1,000+): the text queries asked."""
    hotpotqa = data / "hotpotqa" / "hotpot_dev_distractor_60.json"
    questions = [q["question"] for q in json.loads(hotpotqa.read_text(encoding="utf-8"))]
    for conversation in json.loads((data / "locomo" / "locomo_dev.json").read_text(encoding="utf-8")):
        questions.extend(str(qa["question"]) for qa in conversation.get("qa", []) if qa.get("question"))
    return list(dict.fromkeys(questions))


def load_corpus(data: Path) -> list[tuple[str, str, str]]:
    """(kind, title, text) of every unique real text: HotpotQA paragraphs, Cranfield abstracts,
    LoCoMo turns (a blank one left out)."""
    corpus: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for question in json.loads((data / "hotpotqa" / "hotpot_dev_distractor_60.json").read_text(encoding="utf-8")):
        for title, sentences in question["context"]:
            if title not in seen:
                seen.add(title)
                corpus.append(("hotpotqa", title, " ".join(sentences)))
    raw = (data / "ir_cranfield" / "cran.all.1400").read_text(encoding="utf-8")
    for doc in re.split(r"^\.I \d+\s*$", raw, flags=re.MULTILINE)[1:]:
        title = re.search(r"^\.T\n(.*?)^\.", doc, re.MULTILINE | re.DOTALL)
        body = doc.split(".W\n", 1)[-1]
        corpus.append(("cranfield", " ".join((title.group(1) if title else "").split())[:200], " ".join(body.split())))
    for conversation in json.loads((data / "locomo" / "locomo_dev.json").read_text(encoding="utf-8")):
        sessions = conversation["conversation"]
        for key, turns in sessions.items():
            if re.fullmatch(r"session_\d+", key) and isinstance(turns, list):
                for turn in turns:
                    corpus.append(("locomo", f"{turn['dia_id']} {turn['speaker']}", f"{turn['speaker']}: {turn['text']}"))
    return [entry for entry in corpus if entry[2].strip()]  # a blank text is refused by store (issue 20)


class CachedEmbedder:
    """The real embedder with a cache: a text embedded once is not embedded again."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.cache: dict[str, list[float]] = {}
        self.computed = 0

    def embed(self, texts: list[str]) -> list[list[float]]:
        todo = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if todo:
            for text, vector in zip(todo, self.embedder.embed(todo), strict=True):
                self.cache[text] = vector
            self.computed += len(todo)
        return [self.cache[t] for t in texts]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.embedder, name)


def percentiles_ms(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)

    return {"p50": pick(0.50), "p95": pick(0.95), "max": round(1000 * ordered[-1], 2)}


def timed(calls: Sequence[Any]) -> list[float]:
    samples = []
    for call in calls:
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return samples


def build(store: str, n: int, corpus: list[tuple[str, str, str]], cached: CachedEmbedder | None) -> tuple[AgentMemory, float]:
    """A memory of ``n`` items in ``store`` (a directory or a database URL), indexed; returns it
    and the seconds building took."""
    started = time.perf_counter()
    memory = AgentMemory(f"scale-{n}", backend=store, config=MemoryConfig(index_on_store=False))
    function = index_embedder(memory.config)  # the library's embedder, shared by the process's memories
    real = function.embedder
    if cached is not None:
        cached.embedder = real
        function.embedder = cached
    for start in range(0, n, 2_000):
        entries = []
        for i in range(start, min(n, start + 2_000)):
            kind, title, text = corpus[i % len(corpus)]
            entries.append({"content": text, "title": title, "type": "custom", "source": kind,
                            "tags": [kind, f"g{i % TAG_GROUPS}"], "extra": {"copy": i // len(corpus)}})
        memory.store_many(entries)
    memory.flush_index()
    function.embedder = real  # what is measured embeds with the model itself, uncached
    function.clear()
    return memory, time.perf_counter() - started


def text_queries(memory: AgentMemory, questions: list[str], rng: random.Random) -> dict[str, Any]:
    """p50/p95/max of ``query(text=..., limit=5)``, unfiltered and with a tag filter, each over
    :data:`SAMPLES` questions asked once (no question is asked twice, so no query vector comes
    from the index's cache of recent queries)."""
    picks = rng.sample(questions, 2 * SAMPLES)
    groups = [rng.randrange(TAG_GROUPS) for _ in range(SAMPLES)]
    memory.query(text="warm up: the model is loaded and the index open", limit=5)
    return {
        "text": percentiles_ms(timed([lambda q=q: memory.query(text=q, limit=5) for q in picks[:SAMPLES]])),
        "filtered": percentiles_ms(timed([lambda q=q, g=g: memory.query(text=q, tags=[f"g{g}"], limit=5)
                                          for q, g in zip(picks[SAMPLES:], groups, strict=True)])),
    }


def load_hotpotqa(data: Path) -> list[tuple[str, set[str]]]:
    """(question, titles of its supporting paragraphs) of the 60 HotpotQA questions."""
    questions = json.loads((data / "hotpotqa" / "hotpot_dev_distractor_60.json").read_text(encoding="utf-8"))
    return [(q["question"], {title for title, _ in q["supporting_facts"]}) for q in questions]


def quality(memory: AgentMemory, hotpotqa: list[tuple[str, set[str]]], copies: int) -> dict[str, float]:
    """HotpotQA recall@5 over distinct texts: the share of supporting paragraphs whose title is
    among the first 5 distinct titles of the items ``query`` returns, over the 60 questions. Each
    text is in the memory ``copies`` times (ties among them are broken arbitrarily), so the query
    asks for ``5 * copies`` items (at most 100): the ranking of texts is measured, not of copies."""
    found = wanted = 0
    for question, titles in hotpotqa:
        distinct: list[str] = []
        for hit in memory.query(text=question, limit=min(100, 5 * copies)):
            title = hit.item.metadata.title or ""
            if title not in distinct:
                distinct.append(title)
        found += len(titles & set(distinct[:5]))
        wanted += len(titles)
    return {"hotpotqa_recall@5": round(found / wanted, 4)}


def measure(memory: AgentMemory, questions: list[str], rng: random.Random) -> dict[str, Any]:
    ids = [record.id for record in memory.records()]
    default = text_queries(memory, questions, rng)
    with AgentMemory(memory.agent_id, backend=memory.backend, config=SINGLE_QUERY) as single_memory:
        single = text_queries(single_memory, questions, rng)
    result = {
        "query_text": default["text"],
        "query_text_filtered": default["filtered"],
        "query_text_single": single["text"],
        "query_text_single_filtered": single["filtered"],
        "listing": percentiles_ms(timed([lambda: memory.query(limit=10) for _ in range(SAMPLES)])),
        "listing_filtered": percentiles_ms(timed([
            lambda g=g: memory.query(tags=[f"g{g}"], limit=10) for g in (rng.randrange(TAG_GROUPS) for _ in range(SAMPLES))])),
        "retrieve": percentiles_ms(timed([
            lambda i=i: memory.retrieve(i, max_tokens=500) for i in (rng.choice(ids) for _ in range(SAMPLES))])),
    }
    # Last, as it changes the memory: stores without embedding (results of 1-9 KB).
    texts = [f"note {n}: " + "observed value " * rng.randrange(60, 600) for n in range(SAMPLES)]
    result["store"] = percentiles_ms(timed([lambda t=t: memory.store(t, title="note") for t in texts]))
    return result


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backends = list(results["backends"])
    fig, axes = plt.subplots(1, len(backends), figsize=(7 * len(backends), 4.5), squeeze=False, sharey=True)
    for ax, name in zip(axes[0], backends, strict=True):
        rows = results["backends"][name]["sizes"]
        sizes = sorted(int(n) for n in rows)
        for op in OPERATIONS:
            ax.plot(sizes, [rows[str(n)]["latency_ms"][op]["p95"] for n in sizes], marker="o", label=op)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("items in memory")
        ax.set_ylabel("p95 latency (ms)")
        ax.set_title(f"{name}: p95 latency against memory size")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def print_table(results: dict[str, Any]) -> None:
    for name, backend in results["backends"].items():
        rows = backend["sizes"]
        sizes = sorted(rows, key=int)
        print(f"{name}\np50 / p95 ms   " + "  ".join(f"{int(n):>17,}" for n in sizes) + "   items")
        for op in OPERATIONS:
            cells = "  ".join(f"{rows[n]['latency_ms'][op]['p50']:>7.1f} / {rows[n]['latency_ms'][op]['p95']:>7.1f}"
                              for n in sizes)
            print(f"{op:<27}{cells}")
        print("recall@5" + " " * 19 + "  ".join(f"{rows[n]['quality']['hotpotqa_recall@5']:>17.3f}" for n in sizes))
        print("build s" + " " * 20 + "  ".join(f"{rows[n]['build_s']:>17.0f}" for n in sizes))
        print("load while timed" + " " * 11 + "  ".join(
            "{:>17}".format(" → ".join(f"{x:.1f}" for x in rows[n].get("load_average_while_timed", []))) for n in sizes))


def run_backend(name: str, store: Callable[[], str], sizes: Sequence[int], corpus: list[tuple[str, str, str]],
                questions: list[str], hotpotqa: list[tuple[str, set[str]]], cached: CachedEmbedder) -> dict[str, Any]:
    """Every size on one backend, each in a new store (``store()``), removed after it was measured."""
    rows: dict[str, Any] = {}
    rng = random.Random(7)
    for n in sizes:
        memory, build_s = build(store(), n, corpus, cached)
        copies = -(-n // len(corpus))
        before = os.getloadavg()[0]
        latency = measure(memory, questions, rng)
        rows[str(n)] = {"build_s": round(build_s, 1), "latency_ms": latency,
                        "load_average_while_timed": [round(before, 2), round(os.getloadavg()[0], 2)],
                        "quality": quality(memory, hotpotqa, copies), "embeddings_computed": cached.computed}
        memory.clear()
        memory.close()
        print(f"{name}: {n:,} items built in {build_s:.0f} s", file=sys.stderr)
    return {"backend": "a temporary directory" if name == "files" else "postgres, a new database per size",
            "sizes": rows}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("AGENT_MEMORY_DATA", DEFAULT_DATA)))
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--backends", nargs="+", choices=("files", "postgres"), default=["files", "postgres"])
    parser.add_argument("--postgres-url", default=None,
                        help="A database to measure in (emptied of the scale-* agents); default: a pgserver started here.")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    if len(args.backends) > 1:  # each backend in a process of its own: nothing of one slows the other
        results: dict[str, Any] = {}
        for name in args.backends:
            part = args.out.with_name(f".{args.out.stem}.{name}.json")
            command = [sys.executable, __file__, "--data", str(args.data), "--backends", name, "--out", str(part),
                       "--sizes", *map(str, args.sizes), *(["--postgres-url", args.postgres_url] if args.postgres_url else [])]
            subprocess.run(command, check=True)
            found = json.loads(part.read_text(encoding="utf-8"))
            part.unlink()
            part.with_suffix(".png").unlink(missing_ok=True)
            backends = {**results.get("backends", {}), **found["backends"]}
            results = {**found, "backends": backends, "load_average": max(found["load_average"],
                                                                           results.get("load_average", 0.0))}
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
        plot(results, args.out.with_suffix(".png"))
        print_table(results)
        print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
        return 0
    corpus = load_corpus(args.data)
    questions = load_questions(args.data)
    hotpotqa = load_hotpotqa(args.data)
    cached = CachedEmbedder(None)
    results = {"corpus_unique_texts": len(corpus), "samples": SAMPLES, "targets_ms_at_100k": TARGETS_MS,
               "load_average": os.getloadavg()[0], "backends": {}}
    root = Path(tempfile.mkdtemp(prefix="agent-memory-scale-"))
    server = None
    try:
        for name in args.backends:
            store: Callable[[], str]
            if name == "files":
                store = lambda: str(root / "memory")  # noqa: E731 - one directory, an agent per size
            elif args.postgres_url:
                store = lambda: args.postgres_url  # noqa: E731
            else:
                from agent_memory.testing import PostgresServer

                server = PostgresServer(root / "postgres").start()
                store = lambda: server.new_database("am_scale")  # noqa: E731 - a new one per size
            results["backends"][name] = run_backend(name, store, args.sizes, corpus, questions, hotpotqa, cached)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    plot(results, args.out.with_suffix(".png"))
    print_table(results)
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
