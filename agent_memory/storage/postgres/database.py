"""One Postgres database as agent-memory uses it: a connection pool, the schema and its versions.

The schema is created and migrated by the library: :data:`MIGRATIONS` are applied in order, each
in one transaction under an advisory lock (so processes starting at once do not race), and the
version reached is kept in ``am_schema``. A database of a newer version than this library knows is
refused (:class:`~agent_memory.errors.ConfigurationError`), never written. Every table is keyed by
the agent id: one database serves any number of agents.

Connections come from one pool per process and URL (``psycopg_pool.ConnectionPool``), in autocommit
mode; a unit of work that must be atomic runs in :meth:`Database.transaction`.

An outage of the server is named, not waited out: a connection is checked before it is handed out
(``ConnectionPool.check_connection``, one empty query: a connection closed by a server restart is
replaced, never used), and when the server does not answer one connection attempt
(:data:`PROBE_TIMEOUT_S`) every call raises
:class:`~agent_memory.errors.BackendUnavailableError` at once (which server, since when) instead of
waiting :data:`POOL_TIMEOUT_S` for a connection that cannot come. The server is tried again by
the first call after :data:`RETRY_INTERVAL_S`; when it answers, calls work again, and the pool,
which gives up its own reconnection attempts after :data:`RECONNECT_TIMEOUT_S`, connects afresh
on demand. See psycopg's pool documentation, "Connection quality" and "Pool operations"
(https://www.psycopg.org/psycopg3/docs/advanced/pool.html).
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from agent_memory.errors import BackendUnavailableError, ConfigurationError, LockTimeoutError, StoreError
from agent_memory.limits import shorten
from agent_memory.storage.urls import checked_url, lowercase_scheme, redact_error, redacted_text, redacted_url

__all__ = ["EMBEDDING_DIMENSIONS", "MIGRATIONS", "SCHEMA_VERSION", "Database", "advisory_key"]

logger = logging.getLogger("agent_memory")

EMBEDDING_DIMENSIONS = 384
"""Dimensions of the vector column: the default embedding model's (all-MiniLM-L6-v2)."""

POOL_MAX_SIZE = 16
"""Most connections one process opens to one database (held locks each keep one)."""

POOL_TIMEOUT_S = 30.0
"""Longest wait for a free connection of the pool, in seconds (all of them busy)."""

FIRST_WAIT_S = 1.0
"""How long a call waits for a connection of the pool before it checks that the server answers
at all, in seconds: a server that does not answer makes the call raise
:class:`~agent_memory.errors.BackendUnavailableError` then; a busy pool makes it wait on, up to
:data:`POOL_TIMEOUT_S` in all."""

PROBE_TIMEOUT_S = 3
"""Longest wait for one connection attempt that checks whether the server answers, in whole
seconds (libpq's ``connect_timeout``; a refused connection or a missing socket fails at once)."""

RETRY_INTERVAL_S = 1.0
"""While the server cannot be reached, calls fail at once; the first call after this many seconds
since the last attempt tries the server again (one connection attempt, :data:`PROBE_TIMEOUT_S`)."""

RECONNECT_TIMEOUT_S = 2.0
"""How long the pool keeps retrying a connection it failed to open (with psycopg_pool's
exponential backoff from 1 s) before it gives up and connects again only when a call asks, in
seconds (psycopg_pool's ``reconnect_timeout``; its default, 300 s, backs off to half a minute and
more between attempts, so it would notice the server's return that late)."""

_OUTAGE_SQLSTATE_CLASSES = ("08", "57")
"""SQLSTATE classes of a server that went away or cannot take connections now: connection
exceptions and operator intervention (shutdown, crash, starting up; PostgreSQL's "Errcodes",
https://www.postgresql.org/docs/current/errcodes-appendix.html)."""

_OUTAGE_SQLSTATES = ("53300",)
"""Other SQLSTATEs that leave the server unusable for now: ``too_many_connections``."""

_CHUNK_COLUMNS = """agent_id text NOT NULL,
        item_id text NOT NULL,
        chunk_index integer NOT NULL,
        start_char integer NOT NULL,
        header_chars integer NOT NULL,
        type text NOT NULL,
        source text NOT NULL,
        timestamp_s double precision NOT NULL,
        tags text[] NOT NULL,
        text text NOT NULL,"""
"""The columns of a chunk both indexes keep (its item's facts, which filters test in SQL)."""

MIGRATION_LOCK = 0x616D5F736368656D  # "am_schem": the advisory lock key of schema changes

MIGRATIONS: tuple[str, ...] = (
    # 1: items, blobs, documents, traces, the journal, lock holders, the two indexes
    f"""
    CREATE EXTENSION IF NOT EXISTS vector;
    CREATE TABLE IF NOT EXISTS am_agents (
        agent_id text PRIMARY KEY,
        claimed_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE IF NOT EXISTS am_item_logs (
        agent_id text PRIMARY KEY,
        generation bigint NOT NULL DEFAULT 1,
        last_seq bigint NOT NULL DEFAULT 0
    );
    CREATE TABLE IF NOT EXISTS am_items (
        agent_id text NOT NULL,
        item_id text NOT NULL,
        position bigint NOT NULL,
        seq bigint NOT NULL,
        record bytea NOT NULL,
        PRIMARY KEY (agent_id, item_id)
    );
    CREATE INDEX IF NOT EXISTS am_items_seq ON am_items (agent_id, seq);
    CREATE INDEX IF NOT EXISTS am_items_position ON am_items (agent_id, position);
    CREATE TABLE IF NOT EXISTS am_blobs (
        agent_id text NOT NULL,
        digest text NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (agent_id, digest)
    );
    CREATE TABLE IF NOT EXISTS am_documents (
        agent_id text NOT NULL,
        name text NOT NULL,
        rev bigint NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (agent_id, name)
    );
    CREATE TABLE IF NOT EXISTS am_traces (
        agent_id text NOT NULL,
        kind text NOT NULL,
        seq bigserial,
        record text NOT NULL,
        PRIMARY KEY (agent_id, kind, seq)
    );
    CREATE TABLE IF NOT EXISTS am_journals (
        agent_id text PRIMARY KEY,
        last_seq bigint NOT NULL DEFAULT 0
    );
    CREATE TABLE IF NOT EXISTS am_events (
        agent_id text NOT NULL,
        seq bigint NOT NULL,
        id text NOT NULL UNIQUE,
        kind text NOT NULL,
        payload text NOT NULL,
        queued_at double precision NOT NULL,
        status text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'applying', 'applied', 'failed')),
        applied_at double precision,
        result text,
        error text,
        applied_by text,
        PRIMARY KEY (agent_id, seq)
    );
    CREATE INDEX IF NOT EXISTS am_events_open ON am_events (agent_id, seq) WHERE status IN ('queued', 'applying');
    CREATE TABLE IF NOT EXISTS am_lock_holders (
        agent_id text NOT NULL,
        name text NOT NULL,
        pid integer NOT NULL,
        host text NOT NULL,
        since double precision NOT NULL,
        note text NOT NULL,
        PRIMARY KEY (agent_id, name)
    );
    CREATE TABLE IF NOT EXISTS am_vectors (
        {_CHUNK_COLUMNS}
        embedding vector({EMBEDDING_DIMENSIONS}) NOT NULL,
        PRIMARY KEY (agent_id, item_id, chunk_index)
    );
    CREATE INDEX IF NOT EXISTS am_vectors_hnsw ON am_vectors USING hnsw (embedding vector_cosine_ops)
        WITH (m = 24, ef_construction = 200);
    CREATE INDEX IF NOT EXISTS am_vectors_listing ON am_vectors (agent_id, timestamp_s DESC) WHERE chunk_index = 0;
    CREATE TABLE IF NOT EXISTS am_keywords (
        {_CHUNK_COLUMNS}
        words tsvector NOT NULL,
        PRIMARY KEY (agent_id, item_id, chunk_index)
    );
    CREATE INDEX IF NOT EXISTS am_keywords_words ON am_keywords USING gin (words);
    CREATE TABLE IF NOT EXISTS am_keyword_terms (
        agent_id text NOT NULL,
        term text NOT NULL,
        df integer NOT NULL,
        PRIMARY KEY (agent_id, term)
    );
    CREATE TABLE IF NOT EXISTS am_keyword_stats (
        agent_id text PRIMARY KEY,
        chunks bigint NOT NULL DEFAULT 0,
        lexemes bigint NOT NULL DEFAULT 0
    );
    CREATE INDEX IF NOT EXISTS am_keywords_listing ON am_keywords (agent_id, timestamp_s DESC) WHERE chunk_index = 0;
    """,
    # 2: deletes an incremental read of the item log sees (a forget no longer starts a new generation)
    """
    ALTER TABLE am_item_logs ADD COLUMN live bigint;
    UPDATE am_item_logs AS l SET live = (SELECT count(*) FROM am_items AS i WHERE i.agent_id = l.agent_id);
    ALTER TABLE am_item_logs ALTER COLUMN live SET DEFAULT 0, ALTER COLUMN live SET NOT NULL;
    ALTER TABLE am_item_logs ADD COLUMN tombstones bigint NOT NULL DEFAULT 0;
    CREATE TABLE IF NOT EXISTS am_item_deletions (
        agent_id text NOT NULL,
        seq bigint NOT NULL,
        item_id text NOT NULL,
        PRIMARY KEY (agent_id, seq)
    );
    """,
    # 3: the keyword index's GIN pending list (fastupdate) kept under 64 kB, its least: every
    # keyword search reads the whole list, and after a burst of writes (up to the default 4 MB)
    # it made them about twice as slow until autovacuum merged it (bench_scale.py at 10k items:
    # p50 11.6 -> 5.2 ms once merged); writers, the indexing thread, merge it as they go
    """
    ALTER INDEX am_keywords_words SET (gin_pending_list_limit = 64);
    SELECT gin_clean_pending_list('am_keywords_words'::regclass);
    """,
    # 4: traces on the item logs (issue 39): each agent's am_traces rows of a kind become the
    # records of its log traces.<kind>, stored as every log is (am_items under the key
    # '<agent>/traces.<kind>'), in their order, the same bytes, keyed as
    # agent_memory.storage.traces.trace_key keys them (a repeated id with another turn or seq:
    # '<id>#<turn_id>/<seq>'; the same line again replaces the earlier one, in its place)
    """
    CREATE TEMPORARY TABLE am_traces_keyed ON COMMIT DROP AS
    SELECT log, seq, record,
           CASE WHEN (first_turn, first_seq) IS NOT DISTINCT FROM (turn, line) THEN id
                ELSE id || '#' || coalesce(turn, 'None') || '/' || coalesce(line, 'None') END AS item_id
    FROM (SELECT agent_id || '/traces.' || kind AS log, seq, record,
                 record::jsonb ->> 'id' AS id, record::jsonb ->> 'turn_id' AS turn, record::jsonb ->> 'seq' AS line,
                 first_value(record::jsonb ->> 'turn_id') OVER w AS first_turn,
                 first_value(record::jsonb ->> 'seq') OVER w AS first_seq
          FROM am_traces
          WINDOW w AS (PARTITION BY agent_id, kind, record::jsonb ->> 'id' ORDER BY seq)) AS rows;
    WITH spans AS (SELECT log, item_id, min(seq) AS first, max(seq) AS last FROM am_traces_keyed
                   GROUP BY log, item_id),
         ordered AS (SELECT log, item_id, last, row_number() OVER (PARTITION BY log ORDER BY first) AS position
                     FROM spans)
    INSERT INTO am_items (agent_id, item_id, position, seq, record)
    SELECT o.log, o.item_id, o.position, o.position, convert_to(k.record, 'UTF8')
    FROM ordered AS o JOIN am_traces_keyed AS k ON k.log = o.log AND k.seq = o.last;
    INSERT INTO am_item_logs (agent_id, generation, last_seq, live, tombstones)
    SELECT agent_id, 1, max(position), count(*), 0 FROM am_items
    WHERE agent_id IN (SELECT DISTINCT log FROM am_traces_keyed) GROUP BY agent_id;
    DROP TABLE am_traces;
    """,
)
"""The schema's versions: version ``n`` is reached by running ``MIGRATIONS[n - 1]`` after the
earlier ones. Append, never edit: a database at version ``n`` has run exactly the first ``n``."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this library creates and reads."""


def advisory_key(*parts: str) -> int:
    """A signed 64-bit advisory lock key for ``parts`` (sha256 of them, joined by NUL)."""
    digest = hashlib.sha256("\0".join(parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _configure(conn: psycopg.Connection[Any]) -> None:
    register_vector(conn)


def server_of(url: str) -> str:
    """Where the server of ``url`` is looked for: ``host:port``, or the directory of its Unix
    socket (``/run/postgresql``); libpq's ``PGHOST`` / ``PGPORT`` fill what the URL leaves out.
    A URL libpq cannot parse: ``"(unparsable URL)"``."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error:
        return "(unparsable URL)"
    host = str(params.get("host") or params.get("hostaddr") or os.environ.get("PGHOST") or "the default Unix socket")
    if host.startswith("/") or host == "the default Unix socket":
        return host
    return f"{host}:{params.get('port') or os.environ.get('PGPORT') or 5432}"


def _is_outage(exc: BaseException) -> bool:
    """Whether a psycopg error says the server went away or cannot take connections now (no
    SQLSTATE: the connection itself failed)."""
    state = getattr(exc, "sqlstate", None)
    return isinstance(exc, psycopg.OperationalError) and (
        state is None or state[:2] in _OUTAGE_SQLSTATE_CLASSES or state in _OUTAGE_SQLSTATES)


@dataclass
class _Outage:
    """The server is unreachable: since ``since`` (``time.time()``), last reason ``reason``; the
    next call tries it again after ``retry_at`` (``time.monotonic()``)."""

    since: float
    reason: str
    retry_at: float


class Database:
    """The pool and schema of one database URL (see the module docstring).

    Args:
        url: a ``postgresql://`` URL, its scheme in any case (it is lowercased for libpq, which
            knows only the lower case), or a libpq connection string.

    No error, note or log line shows the password: every message of psycopg or libpq (which
    quote a URL they cannot parse, or its password alone) is redacted first, and so is the
    psycopg error chained to the library's (:func:`~agent_memory.storage.urls.redact_error`).

    Raises:
        BackendUnavailableError: if the server does not answer (down, restarting, unreachable).
        ConfigurationError: if ``url`` is not a URL (:func:`~agent_memory.storage.urls.checked_url`)
            or libpq cannot parse it, the server refuses the connection (a wrong password, a
            database that does not exist), the ``vector`` extension cannot be created, or the
            database's schema is newer than this library's.
    """

    def __init__(self, url: str) -> None:
        checked_url(url)
        self.url = lowercase_scheme(url)
        self.server = redacted_text(server_of(self.url), self.url)
        """Where the server is looked for (:func:`server_of`): what an outage's error names."""
        self._closed = False
        self._lock = threading.Lock()
        self._outage: _Outage | None = None
        self._outage_lock = threading.Lock()
        self._probe_lock = threading.Lock()
        self._answered_at = float("-inf")  # time.monotonic() when the server last answered a check or probe
        self._migrate()
        self.pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            self.url, min_size=1, max_size=POOL_MAX_SIZE, timeout=POOL_TIMEOUT_S, open=True,
            kwargs={"autocommit": True}, configure=_configure, name="agent-memory",
            reconnect_timeout=RECONNECT_TIMEOUT_S,
        )

    def _migrate(self) -> None:
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
                try:
                    conn.execute("CREATE TABLE IF NOT EXISTS am_schema (version integer NOT NULL)")
                    row = conn.execute("SELECT max(version) FROM am_schema").fetchone()
                    version = int(row[0]) if row is not None and row[0] is not None else 0
                    if version > SCHEMA_VERSION:
                        raise ConfigurationError(
                            f"the database's agent-memory schema is version {version}; this library reads up to "
                            f"{SCHEMA_VERSION}: upgrade agent-memory")
                    for number in range(version + 1, SCHEMA_VERSION + 1):
                        with conn.transaction():
                            conn.execute(MIGRATIONS[number - 1])
                            conn.execute("INSERT INTO am_schema (version) VALUES (%s)", (number,))
                finally:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
        except psycopg.Error as exc:
            if _is_outage(exc):  # the server does not answer: the same error as for any later call
                raise self._went_down(exc) from exc
            raise ConfigurationError(
                f"cannot prepare the database {redacted_url(self.url)}: {self._shown(exc)}") from exc

    def _shown(self, exc: BaseException) -> str:
        """``exc``'s message without the URL's secrets: ``exc`` and its chain are redacted in place
        (:func:`~agent_memory.storage.urls.redact_error`), as they become the cause of our error."""
        return str(redact_error(exc, self.url))

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection of the pool (autocommit) for the ``with`` block (:meth:`getconn`, then
        :meth:`putconn`); errors of the database become
        :class:`~agent_memory.errors.StoreError` (:meth:`error_for`).

        Raises:
            BackendUnavailableError: the server cannot be reached (see the module docstring).
            LockTimeoutError: every connection stayed busy for :data:`POOL_TIMEOUT_S`.
            StoreError: the database refused a statement.
        """
        conn = self.getconn()
        try:
            try:
                with conn:
                    yield conn
            finally:
                self.putconn(conn)
        except psycopg.Error as exc:
            raise self.error_for(exc, conn) from exc

    def getconn(self) -> psycopg.Connection[Any]:
        """A working connection of the pool (autocommit), for a caller that must hold it past one
        ``with`` block (a lock's session); give it back with :meth:`putconn`. Prefer
        :meth:`connection`.

        Raises:
            BackendUnavailableError: the server cannot be reached: at once while an outage is
                known, or after at most :data:`FIRST_WAIT_S` plus one connection attempt.
            LockTimeoutError: every connection stayed busy for :data:`POOL_TIMEOUT_S`.
            StoreError: the pool is closed, or the server refuses connections (a wrong password).
        """
        self._refuse_during_outage()
        for _ in range(2):
            conn = self._wait_for_connection()
            try:
                ConnectionPool.check_connection(conn)
            except psycopg.Error as exc:  # closed by a restart of the server, or the server is gone
                self.pool.putconn(conn)  # a broken connection: the pool closes and replaces it
                self.pool.check()  # and every idle one the same restart closed, all at once
                self._probe(exc)
                continue
            self._answered_at = time.monotonic()
            return conn
        raise StoreError(f"the connections to the Postgres server at {self.server} keep breaking as they are "
                         "handed out")

    def putconn(self, conn: psycopg.Connection[Any]) -> None:
        """Give back a connection of :meth:`getconn` (a broken one is replaced by the pool)."""
        self.pool.putconn(conn)

    def error_for(self, exc: psycopg.Error, conn: psycopg.Connection[Any] | None = None,
                  what: str | None = None) -> StoreError:
        """The library error for ``exc``, met on ``conn`` (a connection of this database) while
        doing ``what`` (``None``: "database URL"): :class:`~agent_memory.errors.BackendUnavailableError`
        when the connection broke or the server is shutting down and the server does not answer
        a new connection, else :class:`~agent_memory.errors.StoreError` quoting ``exc``."""
        if _is_outage(exc) or (conn is not None and conn.broken):
            try:
                self._probe(exc)
            except BackendUnavailableError as down:
                return down
            except StoreError as refused:
                return refused
        where = what if what is not None else f"database {redacted_url(self.url)}"
        return StoreError(f"{where}: {type(exc).__name__}: {self._shown(exc)}")

    def _wait_for_connection(self) -> psycopg.Connection[Any]:
        """A connection of the pool: after :data:`FIRST_WAIT_S` without one, only if the server
        answers (:meth:`_answers`), and then for the rest of :data:`POOL_TIMEOUT_S`."""
        try:
            return self.pool.getconn(timeout=FIRST_WAIT_S)
        except PoolTimeout:
            pass
        except psycopg.Error as exc:  # PoolClosed
            raise StoreError(f"database {redacted_url(self.url)}: {type(exc).__name__}: {self._shown(exc)}") from exc
        self._answers()
        try:
            return self.pool.getconn(timeout=POOL_TIMEOUT_S - FIRST_WAIT_S)
        except PoolTimeout as exc:
            self._answers()
            raise LockTimeoutError(f"no free connection to {redacted_url(self.url)} within {POOL_TIMEOUT_S:g} s: all "
                                   f"{POOL_MAX_SIZE} are in use") from exc
        except psycopg.Error as exc:
            raise StoreError(f"database {redacted_url(self.url)}: {type(exc).__name__}: {self._shown(exc)}") from exc

    def _refuse_during_outage(self) -> None:
        """Raise the outage's error at once while the server is known to be unreachable and its
        retry time has not come; when it has, this call tries the server (the others keep failing
        at once meanwhile)."""
        with self._outage_lock:
            outage = self._outage
            if outage is None:
                return
            if time.monotonic() < outage.retry_at:
                raise self._unavailable(outage)
            outage.retry_at = time.monotonic() + RETRY_INTERVAL_S + PROBE_TIMEOUT_S
        self._probe(None)

    def _answers(self) -> None:
        """Return when the server answered within :data:`RETRY_INTERVAL_S` (a check of a connection
        or a probe), else probe it: one thread at a time, so a busy pool's waiting callers do not
        open a connection each.

        Raises:
            BackendUnavailableError, StoreError: as :meth:`_probe`.
        """
        with self._probe_lock:
            if time.monotonic() - self._answered_at >= RETRY_INTERVAL_S:
                self._probe(None)

    def _probe(self, cause: BaseException | None) -> None:
        """One new connection to the server, outside the pool. It answers: the outage (if any) is
        over. It does not: record the outage and raise its error (from ``cause`` when given).

        Raises:
            BackendUnavailableError: the server does not answer.
            StoreError: the server answers but refuses the connection (a wrong password, a
                database that does not exist).
        """
        if cause is not None:
            redact_error(cause, self.url)
        try:
            with psycopg.connect(self.url, connect_timeout=PROBE_TIMEOUT_S, autocommit=True):
                pass
        except psycopg.Error as exc:
            if not _is_outage(exc):
                raise StoreError(f"the Postgres server at {self.server} refuses connections: "
                                 f"{type(exc).__name__}: {shorten(self._shown(exc), 300)}") from exc
            raise self._went_down(exc) from (cause or exc)
        self._answered_at = time.monotonic()
        with self._outage_lock:
            outage, self._outage = self._outage, None
        if outage is not None:
            logger.warning("the Postgres server at %s answers again, after %.1f s", self.server,
                           time.time() - outage.since)

    def _went_down(self, exc: psycopg.Error) -> BackendUnavailableError:
        """Record that the server does not answer (``exc`` says why) and return the error."""
        reason = shorten(" ".join(self._shown(exc).split()), 300)
        with self._outage_lock:
            outage = self._outage
            if outage is None:
                outage = self._outage = _Outage(since=time.time(), reason=reason, retry_at=0.0)
                logger.warning("the Postgres server at %s cannot be reached: %s", self.server, reason)
            outage.reason = reason
            outage.retry_at = time.monotonic() + RETRY_INTERVAL_S
            return self._unavailable(outage)

    def _unavailable(self, outage: _Outage) -> BackendUnavailableError:
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(outage.since))
        return BackendUnavailableError(
            f"the Postgres server at {self.server} cannot be reached, since {since} "
            f"({max(0.0, time.time() - outage.since):.0f} s ago). Calls fail at once while it is down and work "
            f"again when it answers (it is tried again every {RETRY_INTERVAL_S:g} s); what was stored before is "
            f"kept in the database. The last attempt to connect: {outage.reason}",
            host=self.server, since=outage.since)

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection inside one transaction: committed when the block ends, rolled back (nothing
        written) when it raises."""
        with self.connection() as conn, conn.transaction():
            yield conn

    def close(self) -> None:
        """Close the pool. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.pool.close()
