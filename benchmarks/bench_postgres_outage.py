"""A Postgres outage as a client sees it (issue 27, item 5): a real Postgres with pgvector
(pgserver's, started here) is stopped for ``--outage`` seconds while a client stores an item every
0.2 s, then started again while the client keeps trying every 0.1 s. Measures how long each call
takes while the server is down (the issue: 30 s each, then a ``LockTimeoutError``), what it raises,
how long after the server is back the first write succeeds (the issue: 20 s after a 40 s outage),
the same after a restart no call saw (8 idle connections closed by it), and that every
acknowledged item is still there. Also the cost of checking a connection as it is handed out (one
empty query: what makes a connection closed by a restart never reach a caller).

    python benchmarks/bench_postgres_outage.py [--outage 40] [--out FILE]

Writes ``benchmarks/results/postgres_outage.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from psycopg_pool import ConnectionPool  # noqa: E402

from agent_memory import AgentMemory, MemoryConfig  # noqa: E402
from agent_memory.storage.postgres import PostgresBackend  # noqa: E402
from agent_memory.storage.postgres.database import Database  # noqa: E402
from agent_memory.testing import PostgresServer  # noqa: E402


def first_write_after(memory: AgentMemory, every_s: float) -> tuple[float, int]:
    """Seconds until a store succeeds, trying every ``every_s``; and how many tries it took."""
    started, tries = time.monotonic(), 0
    while True:
        tries += 1
        try:
            memory.store("Written after the server came back.")
            return time.monotonic() - started, tries
        except Exception:  # noqa: BLE001 - tried again until it works
            time.sleep(every_s)


def outage(server: PostgresServer, seconds: float) -> dict[str, Any]:
    """Stop the server for ``seconds`` under a client storing every 0.2 s, start it again."""
    memory = AgentMemory("harbour", backend=server.new_database(), config=MemoryConfig(index_on_store=False))
    acknowledged = [memory.store(f"Note {n} of the harbour log.") for n in range(20)]
    server.stop()
    down_at, durations, errors = time.monotonic(), [], set()
    sample = ""
    while time.monotonic() - down_at < seconds:
        started = time.monotonic()
        try:
            acknowledged.append(memory.store("Written while the server is down?"))
        except Exception as exc:  # noqa: BLE001 - what a caller sees is the measurement
            errors.add(type(exc).__name__)
            sample = sample or str(exc)
        durations.append(time.monotonic() - started)
        time.sleep(0.2)
    server.start()
    back_after_s, tries = first_write_after(memory, 0.1)
    lost = [item for item in acknowledged if item not in memory]
    memory.close()
    return {"outage_s": seconds, "calls_while_down": len(durations), "errors": sorted(errors),
            "error_sample": sample[:400], "slowest_call_while_down_ms": round(max(durations) * 1000, 1),
            "median_call_while_down_ms": round(statistics.median(durations) * 1000, 2),
            "first_write_after_return_s": round(back_after_s, 2), "tries_after_return": tries,
            "acknowledged": len(acknowledged), "lost": len(lost)}


def quiet_restart(server: PostgresServer) -> dict[str, Any]:
    """Restart the server while no call runs, with 8 idle connections in the pool; one store."""
    memory = AgentMemory("quiet", backend=server.new_database(), config=MemoryConfig(index_on_store=False))
    with ThreadPoolExecutor(8) as pool:
        acknowledged = list(pool.map(lambda n: memory.store(f"Note {n}."), range(64)))
    backend = memory.backend
    assert isinstance(backend, PostgresBackend)
    idle = backend.database.pool.get_stats().get("pool_available", 0)
    server.stop()
    server.start()
    started = time.monotonic()
    memory.store("Written after a restart no call saw.")  # raises if a closed connection were handed out
    first = time.monotonic() - started
    lost = [item for item in acknowledged if item not in memory]
    memory.close()
    return {"idle_connections": idle, "first_store_s": round(first, 3), "lost": len(lost)}


def check_cost(server: PostgresServer, rounds: int = 5, n: int = 3_000) -> dict[str, Any]:
    """Microseconds per ``Database.connection()`` + ``SELECT 1``, and of the check alone."""
    database = Database(server.new_database())
    original = ConnectionPool.check_connection

    def per_call() -> float:
        started = time.perf_counter()
        for _ in range(n):
            with database.connection() as conn:
                conn.execute("SELECT 1").fetchone()
        return (time.perf_counter() - started) / n * 1e6

    checked, unchecked = [], []
    try:
        for _ in range(rounds):
            checked.append(per_call())
            ConnectionPool.check_connection = staticmethod(lambda conn: None)  # type: ignore[method-assign]
            unchecked.append(per_call())
            ConnectionPool.check_connection = original  # type: ignore[method-assign]
    finally:
        ConnectionPool.check_connection = original  # type: ignore[method-assign]
    conn = database.getconn()
    started = time.perf_counter()
    for _ in range(n):
        original(conn)
    alone = (time.perf_counter() - started) / n * 1e6
    database.putconn(conn)
    database.close()
    return {"connection_and_select_us": round(statistics.median(checked), 1),
            "without_the_check_us": round(statistics.median(unchecked), 1), "check_alone_us": round(alone, 1),
            "socket": "Unix (one machine); on a network each check is one round trip"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outage", type=float, default=40.0, help="seconds the server stays down")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "postgres_outage.json")
    args = parser.parse_args(argv)
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)  # a warning per failed attempt otherwise
    results: dict[str, Any] = {"load_avg_before": os.getloadavg()[0]}
    with PostgresServer() as server:
        results["outage"] = outage(server, args.outage)
        results["quiet_restart"] = quiet_restart(server)
        results["check_cost"] = check_cost(server)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=1))
    return 0 if results["outage"]["lost"] == 0 and results["quiet_restart"]["lost"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
