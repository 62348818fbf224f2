"""The Postgres item log: ``am_items`` (one row per record) and ``am_blobs`` (content by sha256).

Each agent has a row in ``am_item_logs``: ``generation`` and ``last_seq``, the token of its log
(``<generation>:<last_seq>``). Every write locks that row (``SELECT ... FOR UPDATE``), so writes of
one agent are serial and each sees the one before; an addition gives its records the next
``seq`` numbers, and any other change (a record replaced or deleted) also starts a new generation.
A reader reads the token and the records in one snapshot (``REPEATABLE READ``): the records with a
``seq`` above its token's when the generation is the same (only the additions), else all of them
(``reset``). Records keep their place (``position``) when replaced.
"""

from __future__ import annotations

import hashlib
from typing import Any

import psycopg

from agent_memory.errors import ConflictError, StoreError
from agent_memory.storage.contracts import ChangeToken, LogChange, LogRead
from agent_memory.storage.postgres.database import Database

__all__ = ["PostgresItemLog"]


class PostgresItemLog:
    """:class:`~agent_memory.storage.contracts.ItemLog` of one agent in ``database``.

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
                        rows = conn.execute("SELECT item_id, record FROM am_items WHERE agent_id = %s AND seq > %s "
                                            "ORDER BY seq", (self.agent_id, seq)).fetchall()
            finally:
                conn.isolation_level = None
        return LogRead([(str(item_id), bytes(record)) for item_id, record in rows], _token(*current), reset)

    def write(self, change: LogChange, *, expect: ChangeToken | None = None) -> ChangeToken:
        with self.database.transaction() as conn:
            conn.execute("INSERT INTO am_item_logs (agent_id) VALUES (%s) ON CONFLICT DO NOTHING", (self.agent_id,))
            row = conn.execute("SELECT generation, last_seq FROM am_item_logs WHERE agent_id = %s FOR UPDATE",
                               (self.agent_id,)).fetchone()
            assert row is not None
            generation, last_seq = int(row[0]), int(row[1])
            if expect is not None and expect != _token(generation, last_seq):
                raise ConflictError(f"the items of {self.agent_id!r} changed since they were read")
            blobs = [(self.agent_id, hashlib.sha256(e.blob).hexdigest(), e.blob) for e in change.put if e.blob is not None]
            if blobs:
                with conn.cursor() as cursor:
                    cursor.executemany("INSERT INTO am_blobs (agent_id, digest, data) VALUES (%s, %s, %s) "
                                       "ON CONFLICT DO NOTHING", blobs)
            rewritten = change.replace_all or bool(change.delete)
            if change.replace_all:
                conn.execute("DELETE FROM am_items WHERE agent_id = %s", (self.agent_id,))
            elif change.delete:
                conn.execute("DELETE FROM am_items WHERE agent_id = %s AND item_id = ANY(%s)",
                             (self.agent_id, list(change.delete)))
            rows = []
            for entry in change.put:
                last_seq += 1
                rows.append((self.agent_id, entry.id, last_seq, last_seq, entry.record))
            if rows:
                with conn.cursor() as cursor:
                    cursor.executemany(
                        "INSERT INTO am_items (agent_id, item_id, position, seq, record) VALUES (%s, %s, %s, %s, %s) "
                        "ON CONFLICT (agent_id, item_id) DO UPDATE SET seq = EXCLUDED.seq, record = EXCLUDED.record",
                        rows)
                    replaced = not change.replace_all and _any_replaced(cursor, self.agent_id, [r[1] for r in rows],
                                                                        rows[0][2])
                rewritten = rewritten or replaced
            if change.release:
                conn.execute("DELETE FROM am_blobs WHERE agent_id = %s AND digest = ANY(%s)",
                             (self.agent_id, list(change.release)))
            if rewritten:
                generation += 1
            conn.execute("UPDATE am_item_logs SET generation = %s, last_seq = %s WHERE agent_id = %s",
                         (generation, last_seq, self.agent_id))
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


def _any_replaced(cursor: psycopg.Cursor[Any], agent_id: str, item_ids: list[str], first_seq: int) -> bool:
    """Whether one of the records just put replaced an earlier one: its ``position`` is older than
    this write (an insert takes its new ``seq`` as position)."""
    row = cursor.execute("SELECT count(*) FROM am_items WHERE agent_id = %s AND item_id = ANY(%s) AND position < %s",
                         (agent_id, item_ids, first_seq)).fetchone()
    return bool(row and row[0])


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
