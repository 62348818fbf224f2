"""What only the Postgres backend has to get right beside the conformance suite: the keyword
statistics BM25 ranks with stay equal to the rows after every kind of write, and a schema newer
than this library is refused. A real Postgres with pgvector (conftest's ``postgres_server``)."""

from __future__ import annotations

import psycopg
import pytest

from agent_memory import AgentMemory, ConfigurationError, MemoryConfig
from agent_memory.storage.postgres.database import SCHEMA_VERSION, Database
from agent_memory.testing import PostgresServer


def _stats(url: str, agent: str) -> tuple[dict[str, int], dict[str, int], tuple[int, int], tuple[int, int]]:
    """(kept document frequencies, recomputed ones, kept (chunks, lexemes), recomputed)."""
    with psycopg.connect(url) as conn:
        kept = dict(conn.execute("SELECT term, df FROM am_keyword_terms WHERE agent_id = %s AND df > 0",
                                 (agent,)).fetchall())
        real = dict(conn.execute("SELECT term, count(*) FROM am_keywords, unnest(tsvector_to_array(words)) AS term "
                                 "WHERE agent_id = %s GROUP BY term", (agent,)).fetchall())
        row = conn.execute("SELECT chunks, lexemes FROM am_keyword_stats WHERE agent_id = %s", (agent,)).fetchone()
        whole = conn.execute("SELECT count(*), coalesce(sum(length(words)), 0) FROM am_keywords WHERE agent_id = %s",
                             (agent,)).fetchone()
    return kept, real, (int(row[0]), int(row[1])) if row else (0, 0), (int(whole[0]), int(whole[1]))


def test_keyword_statistics_follow_every_write(postgres_server: PostgresServer) -> None:
    url = postgres_server.new_database()
    memory = AgentMemory("stats", backend=url)
    other = AgentMemory("other", backend=url)
    other.store("Violins of Cremona and their varnish.")  # another agent's words never count here
    other.flush_index()
    ids = [memory.store(text) for text in (
        "The Danube flows through ten countries.", "Danube cruises stop in Vienna and Budapest.",
        "Sourdough bread rises through wild yeast." * 40)]  # several chunks
    memory.rewrite(ids[0], "The Rhine flows through six countries.")  # a replace
    memory.forget(ids[1])
    memory.flush_index()  # the indexing thread writes the keywords of what was stored and rewritten
    kept, real, counted, whole = _stats(url, "stats")
    assert kept == real and counted == whole and "rhine" in kept and "danub" not in kept
    assert memory.query(text="Rhine countries", limit=1)[0].item.id == ids[0]
    memory.rebuild_index()
    assert _stats(url, "stats")[:2] == (real, real)
    memory.clear()
    kept, real, counted, whole = _stats(url, "stats")
    assert kept == real == {} and counted == whole == (0, 0)
    assert _stats(url, "other")[0] == _stats(url, "other")[1] != {}


def test_a_newer_schema_is_refused_and_not_written(postgres_server: PostgresServer) -> None:
    url = postgres_server.new_database()
    Database(url).close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO am_schema (version) VALUES (%s)", (SCHEMA_VERSION + 1,))
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'am_%'").fetchone()
    with pytest.raises(ConfigurationError, match="newer|upgrade"):
        AgentMemory("a", backend=url, config=MemoryConfig(index_on_store=False))
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'am_%'").fetchone() == tables


def test_the_keyword_index_keeps_its_pending_list_small(postgres_server: PostgresServer) -> None:
    """Every keyword search reads the GIN index's whole pending list (fastupdate), which grew to
    4 MB after a burst of writes and made searches twice as slow: the index keeps it under 64 kB,
    in a new database and in one of schema 2, which the migration also empties."""
    from agent_memory.storage.postgres.database import MIGRATIONS

    def options(url: str) -> tuple[list[str] | None, int]:
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT reloptions FROM pg_class WHERE relname = 'am_keywords_words'").fetchone()
            version = conn.execute("SELECT max(version) FROM am_schema").fetchone()
        assert row is not None and version is not None
        return row[0], int(version[0])

    fresh = postgres_server.new_database()
    Database(fresh).close()
    assert options(fresh) == (["gin_pending_list_limit=64"], SCHEMA_VERSION)
    old = postgres_server.new_database()
    with psycopg.connect(old, autocommit=True) as conn:
        conn.execute("CREATE TABLE am_schema (version integer NOT NULL)")
        for version, migration in enumerate(MIGRATIONS[:2], start=1):
            conn.execute(migration)
            conn.execute("INSERT INTO am_schema (version) VALUES (%s)", (version,))
    assert options(old)[0] is None  # the default: 4 MB
    memory = AgentMemory("a", backend=old, config=MemoryConfig(index_on_store=False))  # migrates
    assert options(old) == (["gin_pending_list_limit=64"], SCHEMA_VERSION)
    item = memory.store("The Danube flows through ten countries.")
    assert memory.query("Danube countries", limit=1)[0].item.id == item
    memory.close()
