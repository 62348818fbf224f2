"""The export file: every item of a memory with its content, one JSON object per line, oldest
first, in the form a :class:`~agent_memory.models.items.MemorySnapshot` holds its items (bytes as
base64; ``metadata.content_encoding`` says how to read the content back). ``agent-memory export``
writes it, ``agent-memory import`` reads it (or a ``MemorySnapshot.save`` file) back."""

from __future__ import annotations

import json
from collections.abc import Iterator

from pydantic import ValidationError

from agent_memory.errors import InvalidArgumentError
from agent_memory.memory import AgentMemory
from agent_memory.models.items import MemoryItem, MemorySnapshot

__all__ = ["export_lines", "read_export"]


def export_lines(memory: AgentMemory) -> Iterator[bytes]:
    """The export file of ``memory``, a line (UTF-8, ending in a newline) at a time: one item is
    read at a time, so a large memory is never held whole.

    Raises:
        StoreError, ItemNotFoundError: as :meth:`AgentMemory.get` (an item forgotten meanwhile).
    """
    for record in memory.records():
        item = memory.get(record.id)
        yield (json.dumps(item.model_dump_json_safe(), ensure_ascii=False) + "\n").encode("utf-8")


def read_export(data: bytes, *, source: str) -> list[MemoryItem]:
    """The items of an export file, or of a ``MemorySnapshot.save`` file (one JSON object with
    ``items``).

    Args:
        data: the file's bytes.
        source: names the file in errors.

    Raises:
        InvalidArgumentError: if ``data`` is not UTF-8, or a line is not an exported item (the
            message names the line); nothing is read then.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(f"{source}: not UTF-8 text ({exc})") from None
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if len(lines) == 1 and lines[0][1].lstrip().startswith("{") and '"items"' in lines[0][1]:
        try:
            return list(MemorySnapshot.model_validate_json(lines[0][1]).items)
        except ValidationError:
            pass  # not a snapshot: read it as one exported item
    items = []
    for line_no, line in lines:
        try:
            items.append(MemoryItem.model_validate_json(line))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise InvalidArgumentError(
                f"{source}:{line_no}: not an exported item ({where + ': ' if where else ''}{first['msg']}); "
                "nothing was imported") from None
    return items
