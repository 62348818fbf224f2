"""One AgentMemory shared by threads, as a web service shares it (issue 18, the probe's finding):
8 threads storing, querying and retrieving for 60 s on the file backend, and on Postgres with
``--postgres``. Counts errors and lost items (every acknowledged store must be found by ``get`` and
in ``records()`` afterwards) and the throughput.

    python benchmarks/bench_threads.py [--threads 8] [--seconds 60] [--seed 7] [--postgres] [--out FILE]

The texts are real (HotpotQA paragraphs of ``../shared/data``); each thread draws its operations
from its own seeded random generator: 40% store, 40% query (text, limit 5), 20% retrieve of an item
it stored. Writes ``benchmarks/results/threads.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_memory import AgentMemory  # noqa: E402


def paragraphs(data: Path, n: int = 2_000) -> list[str]:
    """Real texts: HotpotQA context paragraphs."""
    out: list[str] = []
    for path in sorted((data / "hotpotqa").glob("*.json")):
        for row in json.loads(path.read_text(encoding="utf-8")):
            for title, sentences in row.get("context", []):
                out.append(f"{title}: {' '.join(sentences)}")
                if len(out) >= n:
                    return out
    return out


def hammer(memory: AgentMemory, texts: list[str], *, threads: int, seconds: float, seed: int) -> dict[str, Any]:
    """Run the mixed workload; return counts, errors and what each thread stored."""
    stop = time.monotonic() + seconds
    stored: list[list[str]] = [[] for _ in range(threads)]
    counts = {"store": 0, "query": 0, "retrieve": 0}
    errors: list[str] = []
    lock = threading.Lock()

    def work(n: int) -> None:
        rng = random.Random(seed * 1_000 + n)
        while time.monotonic() < stop:
            roll = rng.random()
            try:
                if roll < 0.4 or not stored[n]:
                    stored[n].append(memory.store(rng.choice(texts), tags=[f"t{n}"]))
                    kind = "store"
                elif roll < 0.8:
                    memory.query(text=" ".join(rng.choice(texts).split()[:8]), limit=5)
                    kind = "query"
                else:
                    memory.retrieve(rng.choice(stored[n]), "full", max_tokens=300)
                    kind = "retrieve"
                with lock:
                    counts[kind] += 1
            except Exception as exc:  # noqa: BLE001 - every failure is counted and reported
                with lock:
                    errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    started = time.monotonic()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.monotonic() - started
    acknowledged = [item for items in stored for item in items]
    listed = {record.id for record in memory.records()}
    lost = [item for item in acknowledged if item not in listed or item not in memory]
    return {"threads": threads, "seconds": round(elapsed, 1), "counts": counts, "errors": len(errors),
            "error_samples": sorted(set(errors))[:5], "acknowledged_stores": len(acknowledged), "lost": len(lost),
            "ops_per_s": round(sum(counts.values()) / elapsed, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--postgres", action="store_true", help="also run on Postgres (pgserver's, started here)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "threads.json")
    args = parser.parse_args(argv)
    texts = paragraphs(args.data)
    results: dict[str, Any] = {"load_avg_before": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="bench-threads-") as tmp:
        with AgentMemory("service", Path(tmp) / "files") as memory:
            results["files"] = hammer(memory, texts, threads=args.threads, seconds=args.seconds, seed=args.seed)
        if args.postgres:
            from agent_memory.testing import PostgresServer

            with PostgresServer(Path(tmp) / "pg") as server, AgentMemory("service", backend=server.new_database()) as memory:
                results["postgres"] = hammer(memory, texts, threads=args.threads, seconds=args.seconds, seed=args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    for backend in ("files", "postgres"):
        if backend in results:
            r = results[backend]
            print(f"{backend}: {r['threads']} threads x {r['seconds']} s: {r['counts']} ({r['ops_per_s']} ops/s), "
                  f"errors {r['errors']}, stores acknowledged {r['acknowledged_stores']}, lost {r['lost']}")
            for sample in r["error_samples"]:
                print("   ", sample)
    return 0 if all(results[b]["errors"] == 0 and results[b]["lost"] == 0 for b in ("files", "postgres") if b in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
