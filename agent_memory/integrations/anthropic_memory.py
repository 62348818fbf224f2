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
``tool_use`` blocks by hand with :meth:`AgentMemoryTool.tool_result`. With ``AsyncAnthropic``,
:class:`AsyncAgentMemoryTool` is the SDK's ``BetaAsyncAbstractMemoryTool``: the same tool, each
command run in a worker thread. Answers and error texts follow the SDK's reference implementation
(``BetaLocalFilesystemMemoryTool``), which follows Anthropic's documentation, except where they
would break the rules below: ``insert`` leaves the file ending with a newline, as the reference
does, and an ``old_str`` found more than once lists the line of each occurrence.

Every answer is capped at the memory's ``retrieve_max_tokens`` (4,000 tokens by default), as a
``retrieve_memory`` answer is: ``view`` of a long file shows whole lines up to the cap and ends
with the ``view_range`` that shows the next ones (a line longer than the cap alone shows its start
and says how long it is); ``view`` of a large directory pages its entries the same way
(``view_range`` counts the listing's entries there); an edit's snippet and an error that lists
line numbers are cut the same way, and a model's argument quoted back is shortened.

A path is taken as written, on every command: a path outside ``/memories`` (``..``, a
backslash, a NUL or another control character) is refused with a ``ToolError``, and so is a
percent escape (``%2e``, ``%20``), which is not decoded (decoded once, ``%252e`` made a name no
later command could name; the characters themselves are welcome); a file cannot lie under a file (``/memories/a.txt/b.txt`` while
``/memories/a.txt`` is a file). An argument of the wrong type (a list as ``file_text``) is a
``ToolError`` too, never stored. Refused commands read and write nothing.

A directory ``delete`` forgets all its files in one batch (:meth:`AgentMemory.forget_many
<agent_memory.memory.AgentMemory.forget_many>`), so it costs about what one forget costs.

Three lines::

    tool = AgentMemoryTool(AgentMemory("assistant"))
    runner = client.beta.messages.tool_runner(model="claude-sonnet-4-6", max_tokens=1024,
                                              messages=[...], tools=[tool])
"""

from __future__ import annotations

import asyncio
import posixpath
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agent_memory.extras import require_extra

require_extra("anthropic", "agent_memory.integrations.anthropic_memory")

from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError  # noqa: E402
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from agent_memory.limits import MAX_SOURCE_CHARS, MAX_TITLE_CHARS, shorten
from agent_memory.memory import AgentMemory
from agent_memory.models.items import ItemRecord, MemoryCriteria
from agent_memory.transforms import PAGE_NOTICE_TOKENS

__all__ = ["MEMORY_FILE_TAG", "MEMORY_ROOT", "AgentMemoryTool", "AsyncAgentMemoryTool"]

MEMORY_ROOT = "/memories"
"""The directory Claude's memory tool works in (Anthropic's documentation)."""

MEMORY_FILE_TAG = "memory_file"
"""The tag of every item that holds a memory file."""

LINE_NUMBER_WIDTH = 6
"""Width of the line numbers in a file view (the SDK's reference: up to 999,999 lines)."""

MAX_FILE_CHARS = 1_000_000
"""Largest memory file, in characters (a create or edit beyond it is refused)."""

MAX_PATH_CHARS = MAX_SOURCE_CHARS
"""Longest path, in characters: the path is the item's ``source``."""

MAX_QUOTE_CHARS = 200
"""Most characters of a model's argument (``old_str``, a path) quoted back in an answer."""

MAX_QUOTE_TOKENS = 60
"""Most tokens of such a quote (a short text of rare characters can be many tokens)."""

MAX_LISTED_LINES = 20
"""Most line numbers an error about several occurrences of ``old_str`` lists (then ``and N more``)."""

CHARS_PER_TOKEN_BOUND = 32
"""A line longer than this many characters per token of the room left cannot fit in it whole: it is
cut by characters before its tokens are counted (o200k averages about 4 characters per token of
text), so a line of a megabyte is never tokenized whole to be shown in part."""

_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


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


def _file_above(path: str, files: Mapping[str, object]) -> str | None:
    """The file ``path`` would lie under (``/memories/a.txt`` for ``/memories/a.txt/b.txt``), or ``None``."""
    parent = posixpath.dirname(path)
    while parent.startswith(MEMORY_ROOT + "/"):
        if parent in files:
            return parent
        parent = posixpath.dirname(parent)
    return None


def _kind(value: object) -> str:
    """What a JSON value is, in the model's words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _text_arg(name: str, value: object, what: str) -> str:
    """``value`` if it is a string, else a :class:`ToolError` naming the argument."""
    if not isinstance(value, str):
        raise ToolError(f"{name} must be a string ({what}), not {_kind(value)}")
    return value


def _occurrences(text: str, old: str, keep: int) -> tuple[list[int], int]:
    """The line numbers of the first ``keep`` occurrences of ``old`` in ``text`` and how many
    occurrences there are, counted as the SDK's reference lists them: every start, overlapping
    ones too, a line once per occurrence on it (one pass: each newline is counted once)."""
    shown: list[int] = []
    total, line, previous = 0, 1, 0
    position = text.find(old)
    while position != -1:
        line += text.count("\n", previous, position)
        previous = position
        total += 1
        if len(shown) < keep:
            shown.append(line)
        position = text.find(old, position + 1)
    return shown, total


class AgentMemoryTool(BetaAbstractMemoryTool):
    """The ``memory_20250818`` tool on an :class:`AgentMemory` (module docstring).

    Args:
        memory: where the memory files are kept; its ``config.retrieve_max_tokens`` caps every
            answer, counted with its token counter.
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
    def _path(path: object) -> str:
        """``path`` normalised, if it names ``/memories`` or something under it. No command
        decodes anything: the name a command is given is the name it stores, lists and finds.

        Raises:
            ToolError: for anything else (traversal, a backslash, a control character, a percent
                escape, a path over :data:`MAX_PATH_CHARS`).
        """
        if not isinstance(path, str) or not path:
            raise ToolError("A path is required, starting with /memories")
        shown = shorten(path, MAX_QUOTE_CHARS, mark_length=True)
        if "\\" in path or _CONTROL.search(path):
            raise ToolError(f"Path {shown!r} is not allowed: no backslashes, NUL or other control characters")
        if _ESCAPE.search(path):
            raise ToolError(f"Path {shown} is not allowed: percent escapes such as %2e or %20 are not decoded in "
                            "memory paths; write the characters themselves")
        if not (path == MEMORY_ROOT or path.startswith(MEMORY_ROOT + "/")):
            raise ToolError(f"Path must start with {MEMORY_ROOT}, got: {shown}")
        normal = posixpath.normpath(path)
        if any(part == ".." for part in path.split("/")) or not (
                normal == MEMORY_ROOT or normal.startswith(MEMORY_ROOT + "/")):
            raise ToolError(f"Path {shown} would escape {MEMORY_ROOT} directory")
        if len(path) > MAX_PATH_CHARS:  # as given: answers repeat it
            raise ToolError(f"Path {shown} is too long: a memory path has at most {MAX_PATH_CHARS:,} characters")
        return normal

    def _quote(self, text: str) -> str:
        """A model's argument as an answer quotes it: at most :data:`MAX_QUOTE_CHARS` characters
        and :data:`MAX_QUOTE_TOKENS` tokens."""
        short = shorten(text, MAX_QUOTE_CHARS, mark_length=True)
        counter = self.memory.tokens
        if counter.count(short) <= MAX_QUOTE_TOKENS:
            return short
        mark = f"… [{len(text):,} chars]"
        return shorten(text[:MAX_QUOTE_CHARS], MAX_QUOTE_TOKENS - counter.count(mark), counter=counter, marker="") + mark

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
            self.memory.store(text, type="custom", source=path, title=shorten(posixpath.basename(path), MAX_TITLE_CHARS),
                              tags=[MEMORY_FILE_TAG], media_type="text/plain", allow_empty=True)

    # -- answers within the cap -----------------------------------------------------------------
    @property
    def max_answer_tokens(self) -> int:
        """The cap of every answer, in tokens: the memory's ``config.retrieve_max_tokens``."""
        return self.memory.config.retrieve_max_tokens

    def _fit(self, rows: Iterable[str], budget: int) -> tuple[list[str], bool]:
        """The first ``rows`` whose lines fit in ``budget`` tokens together, and ``False``; when
        not even the first fits, its start cut to the budget (marked ``…``), and ``True``."""
        counter = self.memory.tokens
        shown: list[str] = []
        used = 0
        for row in rows:
            room = budget - used
            cost = counter.count(row) + 1 if len(row) <= max(room, 0) * CHARS_PER_TOKEN_BOUND else room + 1
            if cost <= room:
                shown.append(row)
                used += cost
                continue
            if not shown:
                return [shorten(row[: max(budget, 0) * CHARS_PER_TOKEN_BOUND], budget, counter=counter, marker=" …")], True
            break
        return shown, False

    def _answer(self, head: str, body: list[str], notice: Callable[[int], str]) -> str:
        """``head``, the lines of ``body`` and, when some were left out, ``notice(shown)``: within
        :attr:`max_answer_tokens` (lines are dropped from the end until it fits)."""
        counter = self.memory.tokens
        rows = list(body)
        while True:
            tail = notice(len(rows))
            text = "\n".join([head, *rows, tail] if tail else [head, *rows])
            if counter.count(text) <= self.max_answer_tokens or not rows:
                return text
            rows.pop()

    def _numbered_page(self, head: str, lines: list[str], first: int, last: int, total: int, end_arg: int,
                       what: str) -> str:
        """``head`` and the numbered lines ``first``..``last`` (1-based, of ``lines`` = the whole
        file) that fit the cap; when they do not all fit, a last line with the ``view_range``
        that shows the next ones."""
        counter = self.memory.tokens
        budget = self.max_answer_tokens - counter.count(head) - PAGE_NOTICE_TOKENS
        rows = (f"{str(n).rjust(LINE_NUMBER_WIDTH)}\t{lines[n - 1]}" for n in range(first, last + 1))
        shown, cut = self._fit(rows, budget)

        def notice(count: int) -> str:
            end = first + count - 1
            follow = f' Next: view with "view_range": [{end + 1}, {end_arg}].' if end < last else ""
            if cut and count == 1:
                return (f"(Line {first:,} has {len(lines[first - 1]):,} characters: only its start is shown; an answer "
                        f"holds at most {self.max_answer_tokens:,} tokens and view cannot show the rest of one "
                        f"line.{follow})")
            if end < last:
                return (f"({what}: lines {first:,}-{end:,} of {total:,}; an answer holds at most "
                        f"{self.max_answer_tokens:,} tokens.{follow})")
            return ""

        return self._answer(head, shown, notice)

    @staticmethod
    def _range(value: object) -> tuple[int, int] | None:
        """``view_range`` as ``(first, last)``; ``None`` when not given.

        Raises:
            ToolError: if it is not two whole numbers.
        """
        if value is None or (isinstance(value, list | tuple) and not value):
            return None
        if (not isinstance(value, list | tuple) or len(value) != 2
                or not all(isinstance(n, int) and not isinstance(n, bool) for n in value)):
            raise ToolError("view_range must be [first_line, last_line]: two whole numbers, -1 for the end")
        return value[0], value[1]

    # -- the commands -----------------------------------------------------------------------------
    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        """A directory's files and folders up to 2 levels deep with their sizes, or a file's lines
        numbered (``view_range``: ``[first, last]``, 1-based, ``-1`` for the end; of a directory,
        its entries). Capped at :attr:`max_answer_tokens`: a cut answer ends with the
        ``view_range`` that shows the rest."""
        path = self._path(command.path)
        view_range = self._range(command.view_range)
        records = self._records()
        shown_path = self._quote(command.path)
        if path in records:
            lines = self._text(records[path].id).split("\n")
            start, end, end_arg = 1, len(lines), -1
            if view_range is not None:
                start, end = view_range
                end_arg = end
                end = len(lines) if end == -1 else end
                if start < 1 or start > len(lines) or end < start or end > len(lines):
                    raise ToolError(f"Invalid view_range {list(view_range)}: the file has {len(lines)} lines")
            return self._numbered_page(f"Here's the content of {shown_path} with line numbers:", lines, start, end,
                                       len(lines), end_arg, "Shown")
        if not _is_dir(path, records):
            raise ToolError(f"The path {shown_path} does not exist. Please provide a valid path.")
        return self._listing(shown_path, path, records, view_range)

    def _listing(self, shown_path: str, path: str, records: dict[str, ItemRecord],
                 view_range: tuple[int, int] | None) -> str:
        """A directory's entries, paged like a file's lines (``view_range`` counts entries)."""
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
        entries = [f"{_size(chars)}\t{path}/{entry}" for entry, chars in sorted(sizes.items())]
        start, end, end_arg = 1, len(entries), -1
        if view_range is not None:
            start, end = view_range
            end_arg = end
            end = len(entries) if end == -1 else end
            if start < 1 or start > len(entries) or end < start or end > len(entries):
                raise ToolError(f"Invalid view_range {list(view_range)}: the directory lists {len(entries)} entries")
        header = f"Here're the files and directories up to 2 levels deep in {shown_path}, excluding hidden items:"
        head = header + "\n" + f"{_size(sum(v for k, v in sizes.items() if '/' not in k.rstrip('/')))}\t{path}"
        budget = self.max_answer_tokens - self.memory.tokens.count(head) - PAGE_NOTICE_TOKENS
        shown, _ = self._fit(entries[start - 1:end], budget)

        def notice(count: int) -> str:
            last = start + count - 1
            if last >= end:
                return ""
            return (f"(Shown: entries {start:,}-{last:,} of {len(entries):,}; an answer holds at most "
                    f"{self.max_answer_tokens:,} tokens. Next: view with \"view_range\": [{last + 1}, {end_arg}] "
                    "(entries of the listing), or view a subdirectory.)")

        return self._answer(head, shown, notice)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        """A new file (an existing file is not overwritten: edit it, or delete it first)."""
        path = self._path(command.path)
        text = _text_arg("file_text", command.file_text, "the file's text")
        if path == MEMORY_ROOT:
            raise ToolError(f"{MEMORY_ROOT} is a directory")
        with self._lock:
            files = self.files()
            if path in files or _is_dir(path, files):
                raise ToolError(f"File {command.path} already exists")
            above = _file_above(path, files)
            if above is not None:
                raise ToolError(f"Cannot create {command.path}: {above} is a file, not a directory")
            self._write(path, text)
        return f"File created successfully at: {command.path}"

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        """Replace the one occurrence of ``old_str`` with ``new_str``; the answer shows the changed
        lines (within the cap)."""
        path = self._path(command.path)
        old = _text_arg("old_str", command.old_str, "the text to replace")
        new_str = _text_arg("new_str", command.new_str, "the replacement text")
        with self._lock:
            item_id, text = self._file(path)
            count = text.count(old) if old else 0
            if count == 0:
                raise ToolError(f"No replacement was performed, old_str `{self._quote(old)}` did not appear verbatim "
                                f"in {command.path}.")
            if count > 1:
                where, total = _occurrences(text, old, MAX_LISTED_LINES)
                listed = ", ".join(map(str, where))
                if total > len(where):
                    listed += f" and {total - len(where):,} more"
                raise ToolError(f"No replacement was performed. Multiple occurrences of old_str `{self._quote(old)}` in "
                                f"lines: {listed}. Please ensure it is unique")
            new = text.replace(old, new_str, 1)
            self._write(path, new, item_id=item_id)
        changed = text[: text.index(old)].count("\n")
        lines = new.split("\n")
        first, last = max(0, changed - 4), min(len(lines), changed + new_str.count("\n") + 5)
        return self._numbered_page(
            "The memory file has been edited. Here is the snippet showing the change (with line numbers):",
            lines, first + 1, last, len(lines), last, "Snippet shown")

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        """Insert ``insert_text`` after line ``insert_line`` (0: at the top), as the SDK's reference
        does: the file's lines are counted without the empty one a final newline leaves, the
        text's own final newlines are dropped, and the file ends with a newline afterwards."""
        path = self._path(command.path)
        inserted = _text_arg("insert_text", command.insert_text, "the text to insert")
        line = command.insert_line
        if not isinstance(line, int) or isinstance(line, bool):
            raise ToolError(f"insert_line must be a whole number (0: at the top), not {_kind(line)}")
        with self._lock:
            item_id, text = self._file(path)
            lines = text.split("\n")
            if lines[-1] == "":  # a final newline ends the last line; it does not start another
                lines.pop()
            if not 0 <= line <= len(lines):
                raise ToolError(f"Invalid `insert_line` parameter: {line}. It should be within the "
                                f"range [0, {len(lines)}].")
            lines.insert(line, inserted.rstrip("\n"))
            self._write(path, "\n".join(lines) + "\n", item_id=item_id)
        return f"The file {command.path} has been edited."

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        """Delete a file, or a directory and everything under it (forgotten for good, in one batch)."""
        path = self._path(command.path)
        if path == MEMORY_ROOT:
            raise ToolError(f"Cannot delete the {MEMORY_ROOT} directory itself")
        with self._lock:
            doomed = [item_id for name, item_id in self.files().items() if name == path or name.startswith(path + "/")]
            if not doomed:
                raise ToolError(f"The path {command.path} does not exist")
            self.memory.forget_many(doomed)
        return f"Successfully deleted {command.path}"

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        """Move a file or a directory. The new files are written before the old ones are forgotten
        (in one batch): a crash between the two leaves both, never neither."""
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
            above = _file_above(new, files)
            if above is not None:
                raise ToolError(f"Cannot move to {command.new_path}: {above} is a file, not a directory")
            for name, item_id in moving.items():
                self._write(new + name[len(old):], self._text(item_id))
            self.memory.forget_many(list(moving.values()))
        return f"Successfully renamed {command.old_path} to {command.new_path}"

    def clear_all_memory(self) -> str:
        """Delete every memory file (other items of the memory stay), in one batch."""
        with self._lock:
            self.memory.forget_many(list(self.files().values()))
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
            content, error = shorten(f"Invalid memory command: {exc}", MAX_QUOTE_CHARS * 5, mark_length=True), True
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": data.get("id"), "content": str(content)}
        if error:
            result["is_error"] = True
        return result

    def search(self, text: str, *, limit: int = 5) -> list[str]:
        """Paths of the memory files that best match ``text`` (Query Memory over the files)."""
        hits = self.memory.query(MemoryCriteria(text=text, tags=(MEMORY_FILE_TAG,), limit=limit))
        return [hit.item.metadata.source for hit in hits]


class AsyncAgentMemoryTool(BetaAsyncAbstractMemoryTool):
    """The ``memory_20250818`` tool for ``AsyncAnthropic``: the SDK's own
    ``BetaAsyncAbstractMemoryTool``, for its async tool runner
    (``AsyncAnthropic().beta.messages.tool_runner(..., tools=[AsyncAgentMemoryTool(memory)])``).

    Each command is run by an :class:`AgentMemoryTool` (:attr:`sync`) in a worker thread
    (``asyncio.to_thread``), so the event loop never waits on the memory's disk or database and
    the answers, errors, caps and the memory's layout are exactly the sync tool's. Commands of
    one tool run one at a time (the sync tool's lock), as they do on the sync tool.

    Args:
        memory: where the memory files are kept (as :class:`AgentMemoryTool`'s).
        cache_control: the tool definition's ``cache_control``; ``None``: none.

    Attributes:
        sync: the :class:`AgentMemoryTool` that does the work (a sync caller may use it too).
    """

    def __init__(self, memory: AgentMemory, *, cache_control: Any = None) -> None:
        super().__init__(cache_control=cache_control)
        self.sync = AgentMemoryTool(memory, cache_control=cache_control)

    def __repr__(self) -> str:
        return f"AsyncAgentMemoryTool({self.memory!r})"

    @property
    def memory(self) -> AgentMemory:
        """The memory the files are kept in."""
        return self.sync.memory

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        """:meth:`AgentMemoryTool.view`, in a worker thread."""
        return await asyncio.to_thread(self.sync.view, command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        """:meth:`AgentMemoryTool.create`, in a worker thread."""
        return await asyncio.to_thread(self.sync.create, command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        """:meth:`AgentMemoryTool.str_replace`, in a worker thread."""
        return await asyncio.to_thread(self.sync.str_replace, command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        """:meth:`AgentMemoryTool.insert`, in a worker thread."""
        return await asyncio.to_thread(self.sync.insert, command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        """:meth:`AgentMemoryTool.delete`, in a worker thread."""
        return await asyncio.to_thread(self.sync.delete, command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        """:meth:`AgentMemoryTool.rename`, in a worker thread."""
        return await asyncio.to_thread(self.sync.rename, command)

    async def clear_all_memory(self) -> str:
        """:meth:`AgentMemoryTool.clear_all_memory`, in a worker thread."""
        return await asyncio.to_thread(self.sync.clear_all_memory)

    async def files(self) -> dict[str, str]:
        """:meth:`AgentMemoryTool.files`, in a worker thread."""
        return await asyncio.to_thread(self.sync.files)

    async def tool_result(self, block: Any) -> dict[str, Any]:
        """:meth:`AgentMemoryTool.tool_result`, in a worker thread."""
        return await asyncio.to_thread(self.sync.tool_result, block)

    async def search(self, text: str, *, limit: int = 5) -> list[str]:
        """:meth:`AgentMemoryTool.search`, in a worker thread."""
        return await asyncio.to_thread(self.sync.search, text, limit=limit)
