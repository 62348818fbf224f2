"""Claude's memory tool (``memory_20250818``) kept in agent-memory (extra ``anthropic``, a core
dependency already).

Claude's native memory tool is client-side: the model sends file commands on paths under
``/memories`` (``view``, ``create``, ``str_replace``, ``insert``, ``delete``, ``rename``) and the
application executes them. :class:`AgentMemoryTool` executes them on an
:class:`~agent_memory.memory.AgentMemory`: each memory file is one item (type ``custom``, tag
``memory_file``, ``source`` its path, ``text/plain``), so Claude's notes persist in any backend
(files or Postgres), are found by Query Memory like every other item, and are shared with the
agents that share the memory (a sub-agent's snapshot included). Directories are the paths' folders:
one exists while a file lies under it (``/memories`` always exists).

It is the Anthropic SDK's own ``BetaAbstractMemoryTool``: pass it in ``tools`` to the SDK's tool
runner (``client.beta.messages.tool_runner(..., tools=[AgentMemoryTool(memory)])``), or answer
``tool_use`` blocks by hand with :meth:`AgentMemoryTool.tool_result`. Answers and error texts follow
the SDK's reference implementation (``BetaLocalFilesystemMemoryTool``), which follows Anthropic's
documentation. A path outside ``/memories`` (``..``, a percent-encoded ``..``, a backslash, a NUL)
is refused with a ``ToolError``: the model gets an error result, nothing is read or written.

Three lines::

    tool = AgentMemoryTool(AgentMemory("assistant"))
    runner = client.beta.messages.tool_runner(model="claude-sonnet-4-6", max_tokens=1024,
                                              messages=[...], tools=[tool])
"""

from __future__ import annotations

import posixpath
import threading
import urllib.parse
from collections.abc import Mapping
from typing import Any

from anthropic.lib.tools import BetaAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from agent_memory.memory import AgentMemory
from agent_memory.models.items import ItemRecord, MemoryCriteria

__all__ = ["MEMORY_FILE_TAG", "MEMORY_ROOT", "AgentMemoryTool"]

MEMORY_ROOT = "/memories"
"""The directory Claude's memory tool works in (Anthropic's documentation)."""

MEMORY_FILE_TAG = "memory_file"
"""The tag of every item that holds a memory file."""

LINE_NUMBER_WIDTH = 6
"""Width of the line numbers in a file view (the SDK's reference: up to 999,999 lines)."""

MAX_FILE_CHARS = 1_000_000
"""Largest memory file, in characters (a create or edit beyond it is refused)."""


def _size(size_bytes: int) -> str:
    """A size in bytes as the reference listing shows it (``512``, ``4.0K``, ``1.2M``)."""
    if size_bytes < 1024:
        return str(size_bytes)
    if size_bytes < 1024 * 1024:
        return f"{size_bytes / 1024:.1f}K"
    return f"{size_bytes / (1024 * 1024):.1f}M"


def _is_dir(path: str, files: Mapping[str, object]) -> bool:
    """Whether ``path`` is a directory: ``/memories``, or a folder some file lies under."""
    return path == MEMORY_ROOT or any(name.startswith(path + "/") for name in files)


def _numbered(lines: list[str], start: int) -> str:
    return "\n".join(f"{str(n + start).rjust(LINE_NUMBER_WIDTH)}\t{line}" for n, line in enumerate(lines))


class AgentMemoryTool(BetaAbstractMemoryTool):
    """The ``memory_20250818`` tool on an :class:`AgentMemory` (module docstring).

    Args:
        memory: where the memory files are kept.
        cache_control: the tool definition's ``cache_control`` (the SDK's argument); ``None``: none.

    Every command answers text or raises the SDK's ``ToolError`` (a tool error result for the
    model). A failure of the memory itself (a disk error) raises
    :class:`~agent_memory.errors.AgentMemoryError` to the developer.
    """

    def __init__(self, memory: AgentMemory, *, cache_control: Any = None) -> None:
        super().__init__(cache_control=cache_control)
        self.memory = memory
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"AgentMemoryTool({self.memory!r})"

    # -- paths and files ------------------------------------------------------------------------
    @staticmethod
    def _path(path: str) -> str:
        """``path`` normalised, if it names ``/memories`` or something under it.

        Raises:
            ToolError: for anything else (traversal, encoded traversal, backslashes, NUL).
        """
        if not isinstance(path, str) or not path:
            raise ToolError("A path is required, starting with /memories")
        decoded = urllib.parse.unquote(path)
        if "\x00" in decoded or "\\" in decoded:
            raise ToolError(f"Path {path} is not allowed: no backslashes or NUL characters")
        if not (decoded == MEMORY_ROOT or decoded.startswith(MEMORY_ROOT + "/")):
            raise ToolError(f"Path must start with {MEMORY_ROOT}, got: {path}")
        normal = posixpath.normpath(decoded)
        if any(part == ".." for part in decoded.split("/")) or not (
                normal == MEMORY_ROOT or normal.startswith(MEMORY_ROOT + "/")):
            raise ToolError(f"Path {path} would escape {MEMORY_ROOT} directory")
        return normal

    def files(self) -> dict[str, str]:
        """Every memory file: path → memory id (the newest item for a path, if a crash left two)."""
        return {path: record.id for path, record in self._records().items()}

    def _records(self) -> dict[str, ItemRecord]:
        """Every memory file's record by path (one read of the item log per command)."""
        found: dict[str, ItemRecord] = {}
        for record in self.memory.records():
            if MEMORY_FILE_TAG in record.metadata.tags and record.metadata.source.startswith(MEMORY_ROOT + "/"):
                found[record.metadata.source] = record
        return found

    def _text(self, item_id: str) -> str:
        content = self.memory.get(item_id).content
        return content if isinstance(content, str) else str(content)

    def _file(self, path: str) -> tuple[str, str]:
        """(memory id, text) of the file at ``path``.

        Raises:
            ToolError: if there is no file there (a directory, or nothing).
        """
        files = self.files()
        item_id = files.get(path)
        if item_id is None:
            if _is_dir(path, files):
                raise ToolError(f"The path {path} is not a file.")
            raise ToolError(f"The path {path} does not exist. Please provide a valid path.")
        return item_id, self._text(item_id)

    def _write(self, path: str, text: str, *, item_id: str | None = None) -> None:
        if len(text) > MAX_FILE_CHARS:
            raise ToolError(f"The file would be {len(text):,} characters; a memory file holds at most {MAX_FILE_CHARS:,}")
        if item_id is not None:
            self.memory.rewrite(item_id, text)
        else:
            self.memory.store(text, type="custom", source=path, title=posixpath.basename(path), tags=[MEMORY_FILE_TAG],
                              media_type="text/plain", allow_empty=True)

    # -- the commands -----------------------------------------------------------------------------
    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        """A directory's files and folders up to 2 levels deep with their sizes, or a file's lines
        numbered (``view_range``: ``[first, last]``, 1-based, ``-1`` for the end)."""
        path = self._path(command.path)
        records = self._records()
        if path in records:
            lines = self._text(records[path].id).split("\n")
            start, end = 1, len(lines)
            if command.view_range:
                if len(command.view_range) != 2:
                    raise ToolError("view_range must be [first_line, last_line]")
                start, end = command.view_range[0], command.view_range[1]
                end = len(lines) if end == -1 else end
                if start < 1 or start > len(lines) or end < start or end > len(lines):
                    raise ToolError(f"Invalid view_range {command.view_range}: the file has {len(lines)} lines")
            return f"Here's the content of {command.path} with line numbers:\n" + _numbered(lines[start - 1:end], start)
        if not _is_dir(path, records):
            raise ToolError(f"The path {command.path} does not exist. Please provide a valid path.")
        sizes: dict[str, int] = {}
        for name, record in records.items():
            if not name.startswith(path + "/"):
                continue
            parts = name[len(path) + 1:].split("/")
            if any(part.startswith(".") for part in parts):
                continue
            chars = record.metadata.size_bytes  # the stored size: no file is read to list a directory
            for depth in range(1, min(len(parts), 2) + 1):
                entry = "/".join(parts[:depth]) + ("/" if depth < len(parts) else "")
                sizes[entry] = sizes.get(entry, 0) + chars
        header = f"Here're the files and directories up to 2 levels deep in {command.path}, excluding hidden items:"
        lines = [f"{_size(sum(v for k, v in sizes.items() if '/' not in k.rstrip('/')))}\t{command.path}"]
        lines += [f"{_size(chars)}\t{path}/{entry}" for entry, chars in sorted(sizes.items())]
        return header + "\n" + "\n".join(lines)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        """A new file (an existing file is not overwritten: edit it, or delete it first)."""
        path = self._path(command.path)
        if path == MEMORY_ROOT:
            raise ToolError(f"{MEMORY_ROOT} is a directory")
        with self._lock:
            files = self.files()
            if path in files or _is_dir(path, files):
                raise ToolError(f"File {command.path} already exists")
            self._write(path, command.file_text)
        return f"File created successfully at: {command.path}"

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        """Replace the one occurrence of ``old_str`` with ``new_str``."""
        path = self._path(command.path)
        with self._lock:
            item_id, text = self._file(path)
            count = text.count(command.old_str) if command.old_str else 0
            if count == 0:
                raise ToolError(f"No replacement was performed, old_str `{command.old_str}` did not appear verbatim "
                                f"in {command.path}.")
            if count > 1:
                where = [n + 1 for n, line in enumerate(text.split("\n")) if command.old_str in line]
                raise ToolError(f"No replacement was performed. Multiple occurrences of old_str `{command.old_str}` in "
                                f"lines: {', '.join(map(str, where))}. Please ensure it is unique")
            new = text.replace(command.old_str, command.new_str, 1)
            self._write(path, new, item_id=item_id)
        changed = text[: text.index(command.old_str)].count("\n")
        lines = new.split("\n")
        first, last = max(0, changed - 4), min(len(lines), changed + command.new_str.count("\n") + 5)
        return ("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
                + _numbered(lines[first:last], first + 1))

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        """Insert ``insert_text`` after line ``insert_line`` (0: at the top)."""
        path = self._path(command.path)
        with self._lock:
            item_id, text = self._file(path)
            lines = text.split("\n")
            if not 0 <= command.insert_line <= len(lines):
                raise ToolError(f"Invalid `insert_line` parameter: {command.insert_line}. It should be within the "
                                f"range [0, {len(lines)}].")
            new_lines = command.insert_text.split("\n")
            if command.insert_text.endswith("\n"):
                new_lines = new_lines[:-1]
            self._write(path, "\n".join(lines[: command.insert_line] + new_lines + lines[command.insert_line:]),
                        item_id=item_id)
        return f"The file {command.path} has been edited."

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        """Delete a file, or a directory and everything under it (forgotten for good)."""
        path = self._path(command.path)
        if path == MEMORY_ROOT:
            raise ToolError(f"Cannot delete the {MEMORY_ROOT} directory itself")
        with self._lock:
            doomed = [item_id for name, item_id in self.files().items() if name == path or name.startswith(path + "/")]
            if not doomed:
                raise ToolError(f"The path {command.path} does not exist")
            for item_id in doomed:
                self.memory.forget(item_id)
        return f"Successfully deleted {command.path}"

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        """Move a file or a directory. The new file is written before the old one is forgotten:
        a crash between the two leaves both, never neither."""
        old, new = self._path(command.old_path), self._path(command.new_path)
        if MEMORY_ROOT in (old, new):
            raise ToolError(f"Cannot rename the {MEMORY_ROOT} directory itself")
        if new.startswith(old + "/"):
            raise ToolError(f"Cannot move {command.old_path} into itself")
        with self._lock:
            files = self.files()
            moving = {name: item_id for name, item_id in files.items() if name == old or name.startswith(old + "/")}
            if not moving:
                raise ToolError(f"The path {command.old_path} does not exist")
            if new in files or _is_dir(new, files):
                raise ToolError(f"The destination {command.new_path} already exists")
            for name, item_id in moving.items():
                self._write(new + name[len(old):], self._text(item_id))
                self.memory.forget(item_id)
        return f"Successfully renamed {command.old_path} to {command.new_path}"

    def clear_all_memory(self) -> str:
        """Delete every memory file (other items of the memory stay)."""
        with self._lock:
            for item_id in self.files().values():
                self.memory.forget(item_id)
        return "All memory cleared"

    # -- by hand --------------------------------------------------------------------------------
    def tool_result(self, block: Any) -> dict[str, Any]:
        """The ``tool_result`` block answering a ``tool_use`` block of the ``memory`` tool (an SDK
        object or its dict): the command's text, or its error with ``is_error``."""
        data = block if isinstance(block, dict) else block.model_dump()
        try:
            content = self.call(data.get("input") or {})
            error = False
        except ToolError as exc:
            content, error = str(exc), True
        except (TypeError, ValueError, AttributeError, NotImplementedError) as exc:  # a malformed command
            content, error = f"Invalid memory command: {exc}", True
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": data.get("id"), "content": str(content)}
        if error:
            result["is_error"] = True
        return result

    def search(self, text: str, *, limit: int = 5) -> list[str]:
        """Paths of the memory files that best match ``text`` (Query Memory over the files)."""
        hits = self.memory.query(MemoryCriteria(text=text, tags=(MEMORY_FILE_TAG,), limit=limit))
        return [hit.item.metadata.source for hit in hits]
