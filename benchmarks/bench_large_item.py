"""One large result: what ``MemoryConfig.max_embedded_chars`` costs and saves.

A research agent stores whatever its tools return, and some results are large (a long document, a
database dump). Embedding every chunk of such an item blocks ``store`` for a minute; past
``max_embedded_chars`` (default 100,000 characters of its text) chunks are indexed for keyword
search only. This script stores one ~800 KB item of real text (HotpotQA paragraphs, then LoCoMo
turns, from ``../shared/data``) beside 300 Cranfield abstracts, once with the default and once
with everything embedded (``max_embedded_chars`` = ``max_index_chars``), and reports:

- the wall-clock seconds of that one ``store`` (the 300 abstracts are indexed before, untimed);
- for 30 sentences taken from the item past its first 100,000 characters, the share of text
  queries (the sentence itself) that find the item in the top 5: what the budget gives up, and
  those queries' latency (p50 / p95, ms).

The default is measured on the file backend and on ``memory://`` (the in-process backend, which
must cost no more than files: same embedding bound, exact search in numpy).

    python benchmarks/bench_large_item.py [--data DIR] [--out FILE]

Writes ``benchmarks/results/large_item.json``. About 3 minutes on 2 cores, mostly the
all-embedded store.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from bench_scale import load_corpus  # noqa: E402 - a sibling script (benchmarks/ is on sys.path)

from agent_memory import AgentMemory, MemoryConfig  # noqa: E402

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = PROJECT_ROOT.parent / "shared" / "data"
DEFAULT_OUT = PROJECT_ROOT / "benchmarks" / "results" / "large_item.json"
ITEM_CHARS = 800_000
"""Size of the large item, in characters of text."""
NEIGHBOURS = 300
"""Other items in the memory (Cranfield abstracts, not in the large item)."""
PROBES = 30
"""Sentences from the item's tail used as queries."""


def build_texts(data: Path) -> tuple[str, list[tuple[str, str]]]:
    """The large item's text and the neighbours' (title, text)."""
    corpus = load_corpus(data)
    hotpot_and_locomo = [text for kind, _, text in corpus if kind in ("hotpotqa", "locomo")]
    others = [(title, text) for kind, title, text in corpus if kind == "cranfield"][:NEIGHBOURS]
    parts, size = [], 0
    for text in hotpot_and_locomo:
        if size >= ITEM_CHARS:
            break
        parts.append(text)
        size += len(text) + 2
    return "\n\n".join(parts), others


def probes(text: str, limit: int) -> list[str]:
    """``PROBES`` sentences of 8+ words that start past ``limit`` characters (fixed seed)."""
    tail = text[limit:]
    sentences = [s.strip() for s in tail.replace("\n", " ").split(". ") if len(s.split()) >= 8]
    return random.Random(7).sample(sentences, min(PROBES, len(sentences)))


def measure(where: str, config: MemoryConfig, text: str, others: list[tuple[str, str]],
            queries: list[str]) -> dict[str, float]:
    """Store the neighbours (untimed), then the large item (timed) into a memory at ``where`` (a
    directory or a backend URL); ask every probe (timed)."""
    memory = AgentMemory("large", where, config=config)
    for title, body in others:
        memory.store(body, title=title)
    memory.query(text="warm up the model and the index")
    started = time.perf_counter()
    item_id = memory.store(text, title="one large result")
    seconds = time.perf_counter() - started
    found, latencies = 0, []
    for query in queries:
        started = time.perf_counter()
        hits = memory.query(text=query, limit=5)
        latencies.append((time.perf_counter() - started) * 1000)
        found += item_id in {hit.item.id for hit in hits}
    memory.close()
    latencies.sort()
    return {"store_s": round(seconds, 2), "found_at_5": round(found / len(queries), 3), "probes": len(queries),
            "query_ms_p50": round(latencies[len(latencies) // 2], 1),
            "query_ms_p95": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))], 1)}


def main(argv: list[str] | None = None) -> int:
    """Measure both configurations and write the results JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("AGENT_MEMORY_DATA", DEFAULT_DATA)))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    text, others = build_texts(args.data)
    default = MemoryConfig()
    queries = probes(text, default.max_embedded_chars)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench-large-") as tmp:
        for name, where, config in (
            ("default", str(Path(tmp) / "default"), default),
            ("default_in_process", f"memory://bench-large-{os.getpid()}", default),
            ("all_embedded", str(Path(tmp) / "all_embedded"), MemoryConfig(max_embedded_chars=default.max_index_chars)),
        ):
            rows[name] = measure(where, config, text, others, queries)
            print(f"{name:18} store {rows[name]['store_s']:7.2f} s   tail sentences found in the top 5: "
                  f"{rows[name]['found_at_5']:.0%}   query p50 {rows[name]['query_ms_p50']} ms", file=sys.stderr)
    result = {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "item_chars": len(text),
        "neighbours": len(others),
        "max_embedded_chars": default.max_embedded_chars,
        "load_average_1min": os.getloadavg()[0],
        **rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
