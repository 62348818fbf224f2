"""Embedding throughput on real chunks: the previous path (sentence-transformers on torch, batch 32)
against the same model (all-MiniLM-L6-v2 from its local package) run other ways.

Run from the project root::

    .venv/bin/python benchmarks/bench_embedding.py --data ../shared/data --out benchmarks/results/embedding.json

The chunks are what the library embeds of the readability pages (``webpages/readability/*/source.html``)
and the HotpotQA paragraphs (``hotpotqa/*.json``): each item cut by ``AgentMemory``'s own chunking and
``chunks_to_embed``. Every variant embeds the same chunks (every ``--step``-th), in ``--rounds``
interleaved rounds (a loaded machine slows whatever runs at the time: interleaving spreads it);
the figure is the median round. Per variant: chunks per second (wall), CPU milliseconds per
chunk (this process), and the cosine of its vectors with the previous path's (min / mean).

Variants: ``torch_batch32`` (before: ``SentenceTransformerEmbedder``, torch's own threads, 32
texts per call), ``torch_1thread_batch4``, ``onnx_float32`` and ``onnx_int8`` (``OnnxEmbedder``:
each text alone, on 1 or 2 worker threads; ``onnx_int8_2workers`` is the library's default). With
``--retrieval FILE`` (a results file of benchmarks/bench_retrieval.py run on this code) the
retrieval figures are copied in beside those of the previous main (:data:`BEFORE_RETRIEVAL`).
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_memory import load_average, load_hotpotqa, load_pages, machine_info  # noqa: E402

from agent_memory import AgentMemory, MemoryConfig  # noqa: E402
from agent_memory.embeddings import OnnxEmbedder, SentenceTransformerEmbedder, torch_threads  # noqa: E402
from agent_memory.index.chunking import chunks_to_embed  # noqa: E402
from agent_memory.storage.vector import IndexChunk  # noqa: E402

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = PROJECT_ROOT.parent / "shared" / "data"
DEFAULT_OUT = PROJECT_ROOT / "benchmarks" / "results" / "embedding.json"

BEFORE = "torch_batch32"
"""The previous path, the denominator of every ratio."""

DEFAULT = "onnx_int8_2workers"
"""The library's default (``MemoryConfig.embedding_runtime="onnx-int8"``, 2 cores)."""

BEFORE_RETRIEVAL = {"hotpotqa": {"recall@5": 0.8583}, "cranfield": {"ndcg@10": 0.4267},
                    "locomo_dated": {"recall@10": 0.6388}}
"""``ours:default`` of benchmarks/bench_retrieval.py on the previous main (commit 5c86e11, torch
vectors), as benchmarks/results/retrieval.json holds them."""


def real_chunks(data: Path) -> tuple[list[IndexChunk], list[IndexChunk]]:
    """The chunks the library embeds of the pages and of the HotpotQA paragraphs."""
    out: list[list[IndexChunk]] = []
    with tempfile.TemporaryDirectory() as directory:
        memory = AgentMemory("chunks", directory, config=MemoryConfig(index_on_store=False))
        pages = [{"content": page.html, "media_type": "text/html", "source": page.name} for page in load_pages(data)]
        paragraphs = [{"content": p.text, "type": "search_results"} for p in load_hotpotqa(data)[1]]
        for entries in (pages, paragraphs):
            chunks: list[IndexChunk] = []
            for item_id in memory.store_many(entries):
                record = next(r for r in memory.records() if r.id == item_id)
                chunks += memory._upkeep.chunks(record, memory.get(item_id).content)
            out.append(chunks_to_embed(chunks, max_start_char=memory.config.max_embedded_chars))
        memory.close()
    return out[0], out[1]


def variants() -> dict[str, Callable[[list[str]], Any]]:
    torch_default = SentenceTransformerEmbedder(batch_size=32)
    torch_small = SentenceTransformerEmbedder(batch_size=4)

    def small_batches(texts: list[str]) -> Any:
        with torch_threads(1):
            return torch_small.embed(texts)

    found: dict[str, Callable[[list[str]], Any]] = {BEFORE: torch_default.embed,
                                                   "torch_1thread_batch4": small_batches}
    for precision in ("float32", "int8"):
        for workers in (1, 2):
            embedder = OnnxEmbedder(precision=precision, workers=workers)  # type: ignore[arg-type]
            embedder.embed(["warm up"])
            suffix = "worker" if workers == 1 else "workers"
            found[f"onnx_{precision}_{workers}{suffix}"] = embedder.embed
    return found


def within_item_cosines(chunks: list[IndexChunk], embed: Callable[[list[str]], Any]) -> dict[str, Any]:
    """Per item of several chunks, the highest cosine of a chunk to an earlier chunk of the item."""
    highest: list[float] = []
    start = 0
    while start < len(chunks):
        end = start
        while end < len(chunks) and chunks[end].item_id == chunks[start].item_id:
            end += 1
        if end - start > 1:
            vectors = np.asarray(embed([c.text for c in chunks[start:end]]), dtype=np.float32)
            sims = vectors @ vectors.T
            highest.append(max(float(sims[n, :n].max()) for n in range(1, end - start)))
        start = end
    return {"items": len(highest), "max": round(max(highest), 4), "p95": round(float(np.percentile(highest, 95)), 4),
            "over_0.98": sum(h >= 0.98 for h in highest)}


def run(data: Path, step: int, rounds: int, retrieval: Path | None) -> dict[str, Any]:
    started, load_start = time.perf_counter(), load_average()
    pages, paragraphs = real_chunks(data)
    texts = [c.text for c in pages + paragraphs][::step]
    embedders = variants()
    reference = np.asarray(embedders[BEFORE](texts), dtype=np.float32)
    rates: dict[str, list[float]] = {name: [] for name in embedders}
    cpu: dict[str, list[float]] = {name: [] for name in embedders}
    cosines: dict[str, dict[str, float]] = {}
    for _ in range(rounds):
        for name, embed in embedders.items():
            wall, process = time.perf_counter(), time.process_time()
            vectors = np.asarray(embed(texts), dtype=np.float32)
            wall, process = time.perf_counter() - wall, time.process_time() - process
            rates[name].append(len(texts) / wall)
            cpu[name].append(1000 * process / len(texts))
            sims = np.sum(vectors * reference, axis=1)
            cosines[name] = {"min": round(float(sims.min()), 4), "mean": round(float(sims.mean()), 5)}
            print(f"{name:24s} {len(texts) / wall:6.1f} chunks/s  {1000 * process / len(texts):6.1f} ms CPU/chunk  "
                  f"load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    base = statistics.median(rates[BEFORE])
    results = {name: {"chunks_per_s": round(statistics.median(rates[name]), 2),
                      "cpu_ms_per_chunk": round(statistics.median(cpu[name]), 1),
                      "ratio_to_before": round(statistics.median(rates[name]) / base, 2),
                      "cpu_ratio_to_before": round(statistics.median(cpu[BEFORE]) / statistics.median(cpu[name]), 2),
                      "cosine_to_before": cosines[name], "rounds_chunks_per_s": [round(r, 2) for r in rates[name]]}
               for name in embedders}
    after: dict[str, Any] | None = None
    if retrieval is not None:
        found = json.loads(retrieval.read_text(encoding="utf-8"))["datasets"]
        after = {task: {metric: found[task]["methods"]["ours:default"]["all"][metric] for metric in metrics}
                 for task, metrics in BEFORE_RETRIEVAL.items()}
    return {
        "benchmark": "embedding throughput on real chunks: the previous path (torch) against the same model run "
                     "other ways",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine_info(),
        "chunks": {"pages": len(pages), "hotpotqa_paragraphs": len(paragraphs), "measured": len(texts),
                   "step": step, "rounds": rounds},
        "before": BEFORE, "default": DEFAULT, "variants": results,
        "default_ratio_to_before": results[DEFAULT]["ratio_to_before"],
        "within_item_max_cosine_pages": {name: within_item_cosines(pages, embedders[name])
                                         for name in (BEFORE, DEFAULT)},
        "retrieval_ours_default": {"before": BEFORE_RETRIEVAL, "after": after,
                                   "after_source": str(retrieval) if retrieval else None},
        "load_average_1min": {"start": load_start, "end": load_average()},
        "runtime_s": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("AGENT_MEMORY_DATA", DEFAULT_DATA)))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--step", type=int, default=4, help="embed every STEP-th chunk (default 4)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per variant (default 3)")
    parser.add_argument("--retrieval", type=Path, default=None,
                        help="bench_retrieval.py results of this code, copied in beside the previous main's")
    args = parser.parse_args(argv)
    results = run(args.data, args.step, args.rounds, args.retrieval)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    for name, row in results["variants"].items():
        print(f"{name:24s} {row['chunks_per_s']:7.1f} chunks/s  x{row['ratio_to_before']:.2f}  "
              f"{row['cpu_ms_per_chunk']:6.1f} ms CPU/chunk  cosine min {row['cosine_to_before']['min']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
