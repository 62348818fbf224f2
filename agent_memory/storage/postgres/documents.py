"""Postgres documents: ``am_documents`` (one row per agent and name, with a revision number).

The token is the revision (``absent`` before the first write); a write with ``expect`` changes the
row only if its revision is still that one (one ``UPDATE ... WHERE rev = ...``, or an ``INSERT``
that finds no row), so two processes never both win.
"""

from __future__ import annotations

from agent_memory.errors import ConflictError
from agent_memory.storage.contracts import ChangeToken
from agent_memory.storage.postgres.database import Database

__all__ = ["PostgresDocumentSlot"]

ABSENT: ChangeToken = "absent"
"""The token of a document never written."""


class PostgresDocumentSlot:
    """:class:`~agent_memory.storage.contracts.DocumentSlot` of one agent and name in ``database``."""

    def __init__(self, database: Database, agent_id: str, name: str) -> None:
        self.database = database
        self.agent_id = agent_id
        self.name = name

    def __repr__(self) -> str:
        return f"PostgresDocumentSlot({self.agent_id!r}, {self.name!r})"

    def token(self) -> ChangeToken:
        with self.database.connection() as conn:
            row = conn.execute("SELECT rev FROM am_documents WHERE agent_id = %s AND name = %s",
                               (self.agent_id, self.name)).fetchone()
        return str(row[0]) if row is not None else ABSENT

    def get(self) -> tuple[bytes | None, ChangeToken]:
        with self.database.connection() as conn:
            row = conn.execute("SELECT data, rev FROM am_documents WHERE agent_id = %s AND name = %s",
                               (self.agent_id, self.name)).fetchone()
        return (bytes(row[0]), str(row[1])) if row is not None else (None, ABSENT)

    def put(self, data: bytes, *, expect: ChangeToken | None = None) -> ChangeToken:
        with self.database.transaction() as conn:
            if expect is None:
                row = conn.execute(
                    "INSERT INTO am_documents (agent_id, name, rev, data) VALUES (%s, %s, 1, %s) "
                    "ON CONFLICT (agent_id, name) DO UPDATE SET rev = am_documents.rev + 1, data = EXCLUDED.data "
                    "RETURNING rev", (self.agent_id, self.name, data)).fetchone()
            elif expect == ABSENT:
                row = conn.execute(
                    "INSERT INTO am_documents (agent_id, name, rev, data) VALUES (%s, %s, 1, %s) "
                    "ON CONFLICT DO NOTHING RETURNING rev", (self.agent_id, self.name, data)).fetchone()
            else:
                row = conn.execute(
                    "UPDATE am_documents SET rev = rev + 1, data = %s WHERE agent_id = %s AND name = %s AND rev = %s "
                    "RETURNING rev", (data, self.agent_id, self.name, int(expect) if expect.isdigit() else -1)).fetchone()
            if row is None:
                raise ConflictError(f"document {self.name!r} of {self.agent_id!r} changed since it was read")
            return str(row[0])
