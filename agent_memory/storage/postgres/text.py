"""What a Postgres ``text`` column can hold.

Postgres refuses the NUL character (U+0000) in ``text`` values ("invalid byte sequence for
encoding UTF8: 0x00", psycopg's ``DataError``; see the Postgres documentation, "Character Types":
https://www.postgresql.org/docs/current/datatype-character.html, "The character with code zero
cannot be stored"). Item records, blobs and documents are ``bytea`` and JSON text escapes it, so
only the derived columns need care: the indexes' chunk text and item facts, and free-text error
messages. Each such value passes through :func:`pg_text`, and so does every value a query compares
them with, so a filter on a source that holds a NUL still finds its items.
"""

from __future__ import annotations

__all__ = ["NUL_REPLACEMENT", "pg_text", "pg_texts"]

NUL_REPLACEMENT = "\ufffd"
"""What stands for a NUL in a ``text`` column: U+FFFD, the Unicode replacement character (the
character the Unicode Standard gives for a value that cannot be represented, §3.9)."""


def pg_text(value: str) -> str:
    """``value`` with every NUL replaced by :data:`NUL_REPLACEMENT` (the same length in characters,
    so chunk offsets keep their meaning); other text unchanged."""
    return value.replace("\x00", NUL_REPLACEMENT) if "\x00" in value else value


def pg_texts(values: tuple[str, ...] | list[str]) -> list[str]:
    """:func:`pg_text` of each value (a ``text[]`` column: tags)."""
    return [pg_text(value) for value in values]
