"""The Postgres item log: ``am_items`` (one row per record), ``am_blobs`` (content by sha256) and
``am_item_deletions`` (the deletes an incremental reader has yet to see).

Each agent has a row in ``am_item_logs``: ``generation`` and ``last_seq``, the token of its log
(``<generation>:<last_seq>``), and the counts ``live`` (records) and ``tombstones`` (rows of
``am_item_deletions``). Every write locks that row (``SELECT ... FOR UPDATE``), so writes of one
agent are serial and each sees the one before. Every change but ``replace_all`` keeps the
generation and takes the next ``seq`` numbers: a record put (new, or replacing one in its place:
a record keeps its ``position``) gets one, a deleted record's row leaves ``am_items`` and its id is
kept in ``am_item_deletions`` under one. A reader reads the token and the changes in one snapshot
(``REPEATABLE READ``): the records and the deletions with a ``seq`` above its token's when the
generation is the same, else every record (``reset``). So a forget costs the same at any size, for
the writer and for every reader.

``replace_all`` starts a new generation; so does the write that finds more tombstones than records
(and at least :data:`PRUNE_MIN_TOMBSTONES`): it deletes them, and every reader reads the log whole
once (amortised over the deletes that made them, O(1) each).
"""

from __future__ import annotations

import hashlib

import psycopg

from agent_memory.errors import ConflictError, StoreError
from agent_memory.storage.contracts import ChangeToken, LogChange, LogEntry, LogRead
from agent_memory.storage.postgres.database import Database

__all__ = ["PRUNE_MIN_TOMBSTONES", "PostgresItemLog"]

PRUNE_MIN_TOMBSTONES = 1024
"""Fewest rows of ``am_item_deletions`` of one agent that a write prunes (when they also outnumber
its records): a small log is not read whole again for a few forgets."""


class PostgresItemLog:
    """:class:`~agent_memory.storage.contracts.Log` of one agent in ``database`` (see the
    module docstring).

    Args:
        database: the database.
        agent_id: the agent (validated by the caller).
    """

    def __init__(self, database: Database, agent_id: str) -> None:
        self.database = database
        self.agent_id = agent_id

    def __repr__(self) -> str:
        return f"PostgresItemLog({self.agent_id!r})"

    def read(self, since: ChangeToken | None = None) -> LogRead:
        generation, seq = _parse(since)
        deleted: list[str] = []
        with self.database.connection() as conn:
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            try:
                with conn.transaction():
                    row = conn.execute("SELECT generation, last_seq FROM am_item_logs WHERE agent_id = %s",
                                       (self.agent_id,)).fetchone()
                    current = (int(row[0]), int(row[1])) if row is not None else (0, 0)
                    reset = since is None or current[0] != generation
                    if not reset and current[1] == seq:
                        return LogRead([], since or _token(*current), False)
                    if reset:
                        rows = conn.execute("SELECT item_id, record FROM am_items WHERE agent_id = %s ORDER BY position",
                                            (self.agent_id,)).fetchall()
                    else:
                        # a record replaced since keeps its place: in position order, the reader
                        # updates those in place and puts the new ones last in their order
                        rows = conn.execute("SELECT item_id, record FROM am_items WHERE agent_id = %s AND seq > %s "
                                            "ORDER BY position", (self.agent_id, seq)).fetchall()
                        deleted = [str(found[0]) for found in conn.execute(
                            "SELECT item_id FROM am_item_deletions WHERE agent_id = %s AND seq > %s ORDER BY seq",
                            (self.agent_id, seq)).fetchall()]
            finally:
                conn.isolation_level = None
        return LogRead([(str(item_id), bytes(record)) for item_id, record in rows], _token(*current), reset,
                       list(dict.fromkeys(deleted)))

    def write(self, change: LogChange, *, expect: ChangeToken | None = None) -> ChangeToken:
        with self.database.transaction() as conn:
            created = conn.execute("INSERT INTO am_item_logs (agent_id) VALUES (%s) ON CONFLICT DO NOTHING "
                                   "RETURNING agent_id", (self.agent_id,)).fetchone() is not None
            row = conn.execute("SELECT generation, last_seq, live, tombstones FROM am_item_logs WHERE agent_id = %s "
                               "FOR UPDATE", (self.agent_id,)).fetchone()
            assert row is not None
            generation, last_seq, live, tombstones = (int(value) for value in row)
            # a log read before it existed has the token of (0, 0): still that state if just created
            now = _token(0, 0) if created else _token(generation, last_seq)
            if expect is not None and expect != now:
                raise ConflictError(f"the items of {self.agent_id!r} changed since they were read")
            blobs = [(self.agent_id, hashlib.sha256(e.blob).hexdigest(), e.blob) for e in change.put if e.blob is not None]
            if blobs:
                with conn.cursor() as cursor:
                    cursor.executemany("INSERT INTO am_blobs (agent_id, digest, data) VALUES (%s, %s, %s) "
                                       "ON CONFLICT DO NOTHING", blobs)
            if change.replace_all:
                conn.execute("DELETE FROM am_items WHERE agent_id = %s", (self.agent_id,))
                conn.execute("DELETE FROM am_item_deletions WHERE agent_id = %s", (self.agent_id,))
                generation, live, tombstones = generation + 1, 0, 0
            elif change.delete:
                gone = [str(found[0]) for found in conn.execute(
                    "DELETE FROM am_items WHERE agent_id = %s AND item_id = ANY(%s) RETURNING item_id",
                    (self.agent_id, list(dict.fromkeys(change.delete)))).fetchall()]
                if gone:
                    with conn.cursor() as cursor:
                        cursor.executemany("INSERT INTO am_item_deletions (agent_id, seq, item_id) VALUES (%s, %s, %s)",
                                           [(self.agent_id, last_seq + n, item_id) for n, item_id in enumerate(gone, 1)])
                    last_seq, live, tombstones = last_seq + len(gone), live - len(gone), tombstones + len(gone)
            puts: dict[str, LogEntry] = {}
            for entry in change.put:  # one row per id: the last record, in the place of the first
                puts[entry.id] = entry
            if puts:
                held = conn.execute("SELECT count(*) FROM am_items WHERE agent_id = %s AND item_id = ANY(%s)",
                                    (self.agent_id, list(puts))).fetchone()
                rows = [(self.agent_id, entry.id, last_seq + n, last_seq + n, entry.record)
                        for n, entry in enumerate(puts.values(), 1)]
                with conn.cursor() as cursor:
                    cursor.executemany(
                        "INSERT INTO am_items (agent_id, item_id, position, seq, record) VALUES (%s, %s, %s, %s, %s) "
                        "ON CONFLICT (agent_id, item_id) DO UPDATE SET seq = EXCLUDED.seq, record = EXCLUDED.record",
                        rows)
                last_seq, live = last_seq + len(rows), live + len(rows) - (int(held[0]) if held else 0)
            if change.release:
                conn.execute("DELETE FROM am_blobs WHERE agent_id = %s AND digest = ANY(%s)",
                             (self.agent_id, list(change.release)))
            if tombstones >= PRUNE_MIN_TOMBSTONES and tombstones > live:
                conn.execute("DELETE FROM am_item_deletions WHERE agent_id = %s", (self.agent_id,))
                generation, tombstones = generation + 1, 0
            conn.execute("UPDATE am_item_logs SET generation = %s, last_seq = %s, live = %s, tombstones = %s "
                         "WHERE agent_id = %s", (generation, last_seq, live, tombstones, self.agent_id))
            return _token(generation, last_seq)

    def blob(self, digest: str) -> bytes:
        with self.database.connection() as conn:
            row = conn.execute("SELECT data FROM am_blobs WHERE agent_id = %s AND digest = %s",
                               (self.agent_id, digest)).fetchone()
        if row is None:
            raise StoreError(f"content blob {digest} is missing")
        data = bytes(row[0])
        if hashlib.sha256(data).hexdigest() != digest:
            raise StoreError(f"content blob {digest} is damaged (hash mismatch)")
        return data


def _token(generation: int, seq: int) -> ChangeToken:
    return f"{generation}:{seq}"


def _parse(token: ChangeToken | None) -> tuple[int, int]:
    if not token:
        return -1, 0
    try:
        generation, seq = (int(part) for part in token.split(":"))
    except ValueError:
        return -1, 0
    return generation, seq
