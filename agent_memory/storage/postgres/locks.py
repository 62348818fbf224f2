"""Postgres locks: session-level advisory locks, one key per agent and name.

A hold takes a connection of its own from the pool for as long as it lasts and asks the server for
the lock on it (``pg_advisory_lock`` under a ``lock_timeout``); the server releases the lock when
that session ends, however it ends (a killed process's connection closes), so a dead holder never
blocks anyone. Sessions exclude each other whatever process or thread they serve, and any thread
may end a hold. Beside the lock, ``am_lock_holders`` records who took it (pid, host, when, a
note), read by :meth:`PostgresLocks.probe` only while the lock is held.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import errors

from agent_memory.errors import AgentMemoryError, BackendUnavailableError, LockTimeoutError
from agent_memory.storage.contracts import LockHolder
from agent_memory.storage.postgres.database import Database, advisory_key

__all__ = ["DEFAULT_LOCK_TIMEOUT_S", "PostgresLocks"]

DEFAULT_LOCK_TIMEOUT_S = 60.0
"""How long :meth:`PostgresLocks.hold` waits by default, in seconds."""


class PostgresLocks:
    """:class:`~agent_memory.storage.contracts.Locks` of one agent in ``database``."""

    def __init__(self, database: Database, agent_id: str) -> None:
        self.database = database
        self.agent_id = agent_id

    def __repr__(self) -> str:
        return f"PostgresLocks({self.agent_id!r})"

    def _key(self, name: str) -> int:
        return advisory_key("lock", self.agent_id, name)

    @contextmanager
    def hold(self, name: str, *, timeout_s: float | None = None, note: str = "") -> Iterator[None]:
        wait = DEFAULT_LOCK_TIMEOUT_S if timeout_s is None else timeout_s
        key = self._key(name)
        try:
            conn = self.database.getconn()
        except BackendUnavailableError:
            raise
        except AgentMemoryError as exc:  # every connection busy, a closed pool
            raise LockTimeoutError(f"no connection for the {name} lock of {self.agent_id!r}: {exc}") from exc
        try:
            try:
                if wait == 0:
                    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
                    if not (row and row[0]):
                        raise errors.LockNotAvailable("held")
                else:
                    limit = "0" if wait == float("inf") else f"{max(1, int(wait * 1000))}ms"
                    conn.execute("SELECT set_config('lock_timeout', %s, false)", (limit,))
                    try:
                        conn.execute("SELECT pg_advisory_lock(%s)", (key,))
                    finally:
                        conn.execute("SELECT set_config('lock_timeout', '0', false)")
            except errors.LockNotAvailable as exc:
                holder = self.probe(name)
                who = f" by pid {holder.pid} on {holder.host}" if holder is not None and holder.pid else ""
                raise LockTimeoutError(f"the {name} lock of {self.agent_id!r} is held{who}; waited {wait:g} s") from exc
            try:
                conn.execute(
                    "INSERT INTO am_lock_holders (agent_id, name, pid, host, since, note) VALUES (%s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (agent_id, name) DO UPDATE SET pid = EXCLUDED.pid, host = EXCLUDED.host, "
                    "since = EXCLUDED.since, note = EXCLUDED.note",
                    (self.agent_id, name, os.getpid(), socket.gethostname(), time.time(), note))
                yield
            finally:
                try:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
                except psycopg.Error:
                    conn.close()  # a broken session holds nothing: the server dropped its locks
        except psycopg.Error as exc:
            raise self.database.error_for(exc, conn, f"the {name} lock of {self.agent_id!r}") from exc
        finally:
            self.database.putconn(conn)

    def probe(self, name: str) -> LockHolder | None:
        key = self._key(name)
        with self.database.connection() as conn:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if row and row[0]:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
                return None
            found = conn.execute("SELECT pid, host, since, note FROM am_lock_holders WHERE agent_id = %s AND name = %s",
                                 (self.agent_id, name)).fetchone()
        if found is None:
            return LockHolder(pid=0, host="", since=0.0)
        return LockHolder(pid=int(found[0]), host=str(found[1]), since=float(found[2]), note=str(found[3]))
