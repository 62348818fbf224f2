"""Store in Memory (``store_memory``): the model saves text out of its context for later.

One call stores at most :data:`MAX_CONTENT_CHARS` characters. Longer text comes in parts, as an
*upload*; the handle in each answer names the part to send next::

    store_memory(content=<part 1>, more=true)                          -> upload "up_3f9a0c41b2de-2"
    store_memory(content=<part 2>, upload="up_3f9a0c41b2de-2", more=true)  -> upload "up_3f9a0c41b2de-3"
    store_memory(content=<part 3>, upload="up_3f9a0c41b2de-3")         -> "Stored as mem_…"

The parts are joined exactly as sent (no separator) and stored as one item when the part without
``more`` arrives. An upload lives on disk, in ``<agent_dir>/uploads/<token>/`` (one file per part,
each written atomically), so a server restarted between two parts loses nothing; for a memory in a
database, in a directory of the machine that serves the upload (:func:`uploads_dir`: an upload
belongs to one client's session with one server). A part sent
twice (a retried call) is kept once, and the last part sent twice stores one item (its id is
chosen and written down before the item is stored). Bounds: :data:`MAX_UPLOAD_PARTS` parts per
upload, :data:`MAX_OPEN_UPLOADS` unfinished uploads per agent; an upload not continued for
:data:`UPLOAD_TTL_S` seconds is deleted (finished ones too, after the same time).

Uploads are what :class:`StoreMemoryUploadAction` adds to :class:`StoreMemoryAction`; the MCP
server offers it (``agent-memory serve-mcp``), an agent loop ``MemoryToolkit(memory,
uploads=True)``. The plain action, which an agent loop offers by default (its tool results are
stored already, so the model stores notes), keeps the smaller schema: ``more`` and ``upload`` and
the sentence on them cost 54 o200k tokens on every call.

With a directory the user allows (``serve-mcp --allow-read DIR``, ``MemoryToolkit(memory,
read_dir=DIR)``) the tool also takes ``path``: a file under that directory, read by the tool
itself (symlinks resolved; anything outside the directory is refused before it is looked at) and
stored as ``agent-memory store`` stores a file (:func:`agent_memory.ingest.read_file`). Without
one, ``path`` is not in the schema and a call with it is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from stat import S_ISREG
from typing import Annotated, Any

from filelock import FileLock, Timeout
from pydantic import Field, ValidationError

from actions.base import ActionArguments, InstanceSchemas, MemoryAction, ToolCallError, ToolResult, format_call
from agent_memory import AgentMemory
from agent_memory.errors import (
    ConfigurationError,
    IngestError,
    InvalidArgumentError,
    LockTimeoutError,
    StoreError,
    quoted,
)
from agent_memory.fileio import atomic_write_bytes
from agent_memory.ids import derived_memory_id, new_memory_id
from agent_memory.ingest import read_file
from agent_memory.limits import check_text
from agent_memory.records.prepare import counted_tokens

__all__ = [
    "MAX_CONTENT_CHARS",
    "MAX_FILE_BYTES",
    "MAX_HANDLE_CHARS",
    "MAX_OPEN_UPLOADS",
    "MAX_PATH_CHARS",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "MAX_TITLE_CHARS",
    "MAX_UPLOAD_PARTS",
    "StoreFileArguments",
    "StoreMemoryAction",
    "StoreMemoryArguments",
    "StoreMemoryUploadAction",
    "StorePartsArguments",
    "Tag",
    "UPLOADS_DIR",
    "note_memory_id",
    "uploads_dir",
    "UPLOAD_LOCK_TIMEOUT_S",
    "UPLOAD_TTL_S",
]

MAX_CONTENT_CHARS = 8_000
"""Longest text one ``store_memory`` call carries, in characters (~2k tokens of prose; storing it,
embedding included, takes ~0.5-1.3 s on 2 cores depending on load). Longer text comes in parts
(an upload, up to :data:`MAX_UPLOAD_PARTS` of them); the library API (``AgentMemory.store``) has
no such limit."""

MAX_TITLE_CHARS = 200
"""Longest title, in characters (it is shown in every query hit and embedded with every chunk)."""

MAX_TAGS = 10
"""Most tags per call (each becomes an index filter)."""

MAX_TAG_CHARS = 40
"""Longest tag, in characters."""

MAX_UPLOAD_PARTS = 100
"""Most parts of one upload: at most 800,000 characters (100 x :data:`MAX_CONTENT_CHARS`)."""

MAX_OPEN_UPLOADS = 20
"""Most unfinished uploads one agent's memory keeps; one more is refused until one finishes or
expires."""

UPLOAD_TTL_S = 24 * 3600
"""How long an upload is kept after its last part arrived, in seconds (24 hours): an abandoned
upload expires, and a finished one stops answering a retry of its last part."""

UPLOADS_DIR = "uploads"
"""Directory of the uploads in progress, in the agent's directory."""


def uploads_dir(memory: AgentMemory) -> Path:
    """Where the uploads in progress of ``memory`` are kept: ``uploads`` in the agent's directory
    when its backend keeps one on this machine (``local_dir``: a memory directory); else (a memory
    in a database), ``agent-memory-uploads/<hash of the store's URL>/<agent id>``
    in the system's temporary directory (the machine serving the upload keeps its parts)."""
    local = memory.backend.local_dir(memory.agent_id)
    if local is not None:
        return local / UPLOADS_DIR
    store = hashlib.sha256(memory.backend.url.encode("utf-8")).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / "agent-memory-uploads" / store / memory.agent_id

MAX_FILE_BYTES = 10_000_000
"""Largest file ``path`` may name, in bytes (10 MB)."""

MAX_PATH_CHARS = 1_000
"""Longest ``path``, in characters."""

_HANDLE = re.compile(r"up_([0-9a-f]{12})-([1-9][0-9]{0,3})")
"""An upload handle: ``up_`` + the upload's 12 hex digits + ``-`` + the number of the next part."""
MAX_HANDLE_CHARS = 24
"""Longest upload handle accepted (a valid one has at most 20 characters)."""
_FINISH_FILE = "finish.json"
_META_FILE = "meta.json"
_LOCK_FILE = "lock"
UPLOAD_LOCK_TIMEOUT_S = 60.0
"""Longest wait for another call on the same upload (a retried part), in seconds."""

Tag = Annotated[str, Field(max_length=MAX_TAG_CHARS)]
"""One label, as the memory tools take it."""


_UPLOAD_DESCRIPTION = (
    "Save text outside your context, to read or search later; returns an id. "
    f"Max {MAX_CONTENT_CHARS:,} characters a call: send longer text in parts, in order, with more=true and "
    "upload=<handle from the last answer>; the last part without more.{files} Example: {example}"
)
"""The description of :class:`StoreMemoryUploadAction`; ``files`` is the sentence on ``path``
(empty when no directory is readable)."""


class StoreMemoryArguments(ActionArguments):
    """Arguments of ``store_memory``."""

    content: str = Field(max_length=MAX_CONTENT_CHARS)
    title: str | None = Field(default=None, max_length=MAX_TITLE_CHARS)
    tags: list[Tag] = Field(default=[], max_length=MAX_TAGS)


class StorePartsArguments(StoreMemoryArguments):
    """Arguments of ``store_memory`` that takes longer text in parts (an upload)."""

    more: bool = False
    upload: str | None = Field(default=None, max_length=MAX_HANDLE_CHARS)


class StoreFileArguments(StorePartsArguments):
    """Arguments of ``store_memory`` that may also read a file: ``content`` or ``path``."""

    content: str | None = Field(default=None, max_length=MAX_CONTENT_CHARS)  # type: ignore[assignment]
    path: str | None = Field(default=None, max_length=MAX_PATH_CHARS)


def note_memory_id(agent_id: str, content: str, title: str | None, tags: list[str]) -> str:
    """The memory id of a note ``store_memory`` keeps: derived from the agent, the text, the title
    and the tags (:func:`~agent_memory.ids.derived_memory_id`), so the same note stored again (a
    model repeating itself, a script run twice) is the item stored the first time."""
    note = json.dumps([content, title, sorted(tags)], ensure_ascii=False)
    return derived_memory_id(f"note:{agent_id}/{hashlib.sha256(note.encode('utf-8')).hexdigest()}")


class StoreMemoryAction(MemoryAction[StoreMemoryArguments]):
    """``store_memory``: stores ``content`` (type ``custom``, source ``agent``, at most
    :data:`MAX_CONTENT_CHARS` characters) with its title and tags and answers with the new id and
    its size in tokens. A note with the same text, title and tags as one stored before is not
    stored again: the answer names the item kept (:func:`note_memory_id`). The form an agent loop
    offers (its tool results are stored already); an MCP server offers
    :class:`StoreMemoryUploadAction`, which also takes longer text in parts."""

    name = "store_memory"
    title = "Store in Memory"
    capability = "store"
    Arguments = StoreMemoryArguments
    example = {"content": "Q3 revenue $4.2M", "tags": ["finance"]}
    description = (
        f"Save notes outside your context (max {MAX_CONTENT_CHARS:,} characters); returns an id. Tool results are "
        f"saved already. Example: {format_call('store_memory', example)}"
    )

    def execute(self, memory: AgentMemory, args: StoreMemoryArguments) -> ToolResult:
        content = args.content or ""
        if not content.strip():
            raise ToolCallError("content is empty: give the text to keep. Nothing was stored.")
        item_id = note_memory_id(memory.agent_id, content, args.title, args.tags)
        if item_id in memory:
            return self._stored(memory, item_id, again=True)
        try:
            memory.store(content, type="custom", source="agent", title=args.title, tags=args.tags, item_id=item_id)
        except InvalidArgumentError:  # stored by another call meanwhile: the same note
            if item_id not in memory:
                raise
            return self._stored(memory, item_id, again=True)
        return self._stored(memory, item_id)

    def _stored(self, memory: AgentMemory, item_id: str, *, parts: int | None = None,
                again: bool = False) -> ToolResult:
        """The answer for a stored item (``parts``: how many parts it came in, if uploaded;
        ``again``: the same note was stored before, and this call stored nothing)."""
        item = memory.get(item_id)
        meta = item.metadata
        tokens, _ = counted_tokens(item, memory.tokens)
        how = f", {parts} parts" if parts is not None else ""
        data: dict[str, Any] = {
            "id": item_id,
            "tokens": tokens,
            "size_bytes": meta.size_bytes,
            "type": item.type,
            "source": meta.source,
            "title": meta.title,
            "tags": list(meta.tags),
        }
        if parts is not None:
            data["parts"] = parts
        data["stored_before"] = again
        return ToolResult.success(
            f"{'Already stored' if again else 'Stored'} as {item_id} ({tokens:,} tokens{how}). Read it with "
            f"{format_call(self.retrieve_call, {'id': item_id})}; a query finds it by meaning or tags.",
            data,
        )

    def _explain(self, exc: ValidationError) -> str:
        if any(err["type"] == "extra_forbidden" and tuple(err["loc"]) == ("path",) for err in exc.errors()):
            return self._no_files()
        return super()._explain(exc)

    def _no_files(self) -> str:
        longer = ("in parts if it is longer than" if issubclass(self.Arguments, StorePartsArguments)
                  else "at most")
        return (f"{self.name} reads no files here: the user allowed no directory (agent-memory serve-mcp "
                f"--allow-read DIR). Send the text as content instead, {longer} {MAX_CONTENT_CHARS:,} characters. "
                "Nothing was stored.")


class StoreMemoryUploadAction(InstanceSchemas[StoreMemoryArguments], StoreMemoryAction):
    """``store_memory`` that also takes text longer than one call carries, in parts (an upload,
    see the module docstring), and with ``read_dir`` a file of the user's by ``path``: what an
    MCP server offers (a desktop client's own tool results are not in memory, so whole pages
    come through this tool).

    Args:
        read_dir: the directory whose files the tool may store (and those of its
            subdirectories); symlinks are resolved, and a path that resolves outside it is refused
            as a tool error. ``None``: the tool reads no files and its schema has no ``path``.

    Raises:
        ConfigurationError: if ``read_dir`` is not an existing directory.
    """

    def __init__(self, read_dir: str | os.PathLike[str] | None = None) -> None:
        self.read_dir: Path | None = None
        files = ""
        if read_dir is not None:
            try:
                root = Path(read_dir).expanduser().resolve(strict=True)
            except (OSError, RuntimeError, ValueError) as exc:
                raise ConfigurationError(
                    f"the directory to read files from, {str(read_dir)!r}, cannot be used: {exc}") from exc
            if not root.is_dir():
                raise ConfigurationError(f"the directory to read files from, {str(root)!r}, is not a directory")
            self.read_dir = root
            files = (f' Or path="<file>": a file under {root} (at most {MAX_FILE_BYTES // 1_000_000} MB), read by '
                     "the tool.")
        self.Arguments = StoreFileArguments if self.read_dir is not None else StorePartsArguments
        self.description = _UPLOAD_DESCRIPTION.format(
            files=files, example=format_call(self.name, self.example))

    def __repr__(self) -> str:
        where = f", read_dir={str(self.read_dir)!r}" if self.read_dir is not None else ""
        return f"{type(self).__name__}(name={self.name!r}{where})"

    def execute(self, memory: AgentMemory, args: StoreMemoryArguments) -> ToolResult:
        assert isinstance(args, StorePartsArguments)  # self.Arguments is one of its two kinds
        path = getattr(args, "path", None)
        if path is not None:
            if args.content is not None or args.upload is not None or args.more:
                raise ToolCallError("path stores a whole file: give it alone (with title or tags), without content, "
                                    "upload or more. Nothing was stored.")
            return self._store_file(memory, path, args)
        if args.content is None:
            raise ToolCallError(f"give content (the text to keep) or path (a file under {self.read_dir}).")
        if args.upload is not None or args.more:
            return self._store_part(memory, args, args.content)
        return super().execute(memory, args)

    # -- files -----------------------------------------------------------------------------------
    def _store_file(self, memory: AgentMemory, path: str, args: StoreMemoryArguments) -> ToolResult:
        file = self.resolve(path)
        try:
            payload = read_file(file)
        except (OSError, IngestError) as exc:
            raise ToolCallError(f"{quoted(path)} could not be read ({exc.__class__.__name__}). Nothing was stored.",
                                code="not_found") from None
        item_id = memory.store(
            payload.content, type=payload.default_type, source=payload.default_source,
            title=args.title or payload.default_title, tags=args.tags, media_type=payload.media_type,
            extra=payload.extra,
        )
        return self._stored(memory, item_id)

    # -- uploads ---------------------------------------------------------------------------------
    def _store_part(self, memory: AgentMemory, args: StorePartsArguments, content: str) -> ToolResult:
        """Receive one part of an upload; the part without ``more`` stores the whole text."""
        try:
            for what, text in (("content", content), ("title", args.title or ""), *(("a tag", t) for t in args.tags)):
                check_text(text, what)
        except ValueError as exc:
            raise ToolCallError(f"{exc}. Nothing was stored.") from None
        uploads = _Uploads(uploads_dir(memory))
        uploads.expire()
        if args.upload is None:
            if not content:
                raise ToolCallError("content is empty: the first part must hold text. Nothing was stored.")
            upload = uploads.start()
            number = 1
        else:
            match = _HANDLE.fullmatch(args.upload)
            if match is None:
                raise ToolCallError(
                    f"{quoted(args.upload)} is not an upload handle: copy it exactly from the answer to the "
                    'previous part (like "up_3f9a0c41b2de-2"), or start again with more=true.'
                )
            upload, number = uploads.open(match.group(1)), int(match.group(2))
        with upload.locked():
            return self._receive(memory, upload, number, content, args)

    def _receive(self, memory: AgentMemory, upload: _Upload, number: int, content: str,
                 args: StorePartsArguments) -> ToolResult:
        """Part ``number`` of ``upload`` arrived (under the upload's lock). A refused part changes
        nothing; an accepted one sets the title and tags it gives."""
        finished = upload.finished()
        if finished is not None:
            item_id, parts = finished
            if number != parts:
                raise ToolCallError(
                    f"this upload is finished: its {parts} parts were stored as {item_id}. Start a new upload "
                    "with more=true."
                )
            return self._finish(memory, upload, item_id, parts)  # a retried last part: stored once
        received = upload.part_count()
        if number > received + 1:
            raise ToolCallError(f"part {received + 1} of this upload has not arrived yet; send it first, "
                                f'with upload="{upload.handle(received + 1)}".')
        if number <= received:  # a part sent again (a retried call)
            if upload.read_part(number) != content:
                raise ToolCallError(
                    f"part {number} was received already, with other text; nothing was changed. The next part "
                    f'is {received + 1}: send it with upload="{upload.handle(received + 1)}".'
                )
            if number < received or args.more:
                return self._received(upload, received)
        else:
            if number > MAX_UPLOAD_PARTS:
                raise ToolCallError(
                    f"an upload has at most {MAX_UPLOAD_PARTS} parts ({MAX_UPLOAD_PARTS * MAX_CONTENT_CHARS:,} "
                    f"characters); this part was not kept. To store the {received} parts received, send part "
                    f'{received} again, the same text, with upload="{upload.handle(received)}" and without more.'
                )
            upload.describe(title=args.title, tags=args.tags)
            upload.write_part(number, content)
            if args.more:
                return self._received(upload, number)
        upload.describe(title=args.title, tags=args.tags)
        total = upload.joined()
        if not total.strip():
            raise ToolCallError("the uploaded text is empty or only whitespace. Nothing was stored.")
        item_id = upload.reserve(new_memory_id(lambda candidate: candidate in memory), parts=number)
        return self._finish(memory, upload, item_id, number, text=total)

    def _received(self, upload: _Upload, parts: int) -> ToolResult:
        handle = upload.handle(parts + 1)
        chars = upload.char_count()
        return ToolResult.success(
            f"Received part {parts} ({chars:,} characters so far); the text is stored when its last part "
            f'arrives. Send part {parts + 1} with upload="{handle}" and more=true, or without more if it is '
            f"the last. Upload parts are kept {UPLOAD_TTL_S // 3600} hours.",
            {"upload": handle, "part": parts, "chars": chars},
        )

    def _finish(self, memory: AgentMemory, upload: _Upload, item_id: str, parts: int,
                text: str | None = None) -> ToolResult:
        """Store the upload's text as ``item_id`` (unless that is done), drop its parts, answer."""
        if item_id not in memory:
            if text is None:
                if upload.part_count() < parts:
                    raise ToolCallError(
                        f"this upload was stored as {item_id}, which has since been forgotten. Nothing was stored.",
                        code="not_found",
                    )
                text = upload.joined()
            title, tags = upload.description()
            try:
                memory.store(text, type="custom", source="agent", title=title, tags=tags, item_id=item_id)
            except BaseException:
                if item_id not in memory:
                    upload.unreserve()
                raise
        upload.drop_parts()
        return self._stored(memory, item_id, parts=parts)

    def resolve(self, path: str) -> Path:
        """The file ``path`` names (relative to :attr:`read_dir`, or absolute), symlinks resolved.

        Raises:
            ToolCallError: if it does not exist (``not_found``), resolves outside :attr:`read_dir`,
                is not a regular file, or is larger than :data:`MAX_FILE_BYTES`; or if no
                directory is readable.
        """
        if self.read_dir is None:
            raise ToolCallError(self._no_files())
        try:
            check_text(path, "path")
            target = (self.read_dir / Path(path).expanduser()).resolve()
        except (OSError, RuntimeError, ValueError):  # a NUL byte, a lone surrogate, a symlink loop
            raise ToolCallError(f"{quoted(path)} is not a readable path. Nothing was stored.") from None
        if not target.is_relative_to(self.read_dir):  # before any look at it: nothing outside is probed
            raise ToolCallError(f"{quoted(path)} is outside {self.read_dir}, the only directory this tool may read "
                                "(symlinks are followed). Nothing was stored.")
        try:
            stat = target.stat()
        except FileNotFoundError:
            raise ToolCallError(f"there is no file {quoted(path)} under {self.read_dir}. Nothing was stored.",
                                code="not_found") from None
        except OSError:  # no permission, not a directory on the way
            stat = None
        if stat is None or not S_ISREG(stat.st_mode):
            raise ToolCallError(f"{quoted(path)} is not a readable file. Nothing was stored.")
        if stat.st_size > MAX_FILE_BYTES:
            raise ToolCallError(f"{quoted(path)} has {stat.st_size:,} bytes; the limit is {MAX_FILE_BYTES:,}. Nothing was stored.")
        return target


class _Upload:
    """One upload on disk: ``meta.json`` (title, tags), ``part-NNNN.txt`` (each part, UTF-8),
    ``finish.json`` (the id it is stored under, once its last part arrived)."""

    def __init__(self, token: str, path: Path) -> None:
        self.token = token
        self.path = path

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold this upload's lock (a retried call waits for the one it repeats).

        Raises:
            LockTimeoutError: after :data:`UPLOAD_LOCK_TIMEOUT_S` seconds.
        """
        lock = FileLock(str(self.path / _LOCK_FILE), timeout=UPLOAD_LOCK_TIMEOUT_S)
        try:
            lock.acquire()
        except Timeout as exc:
            raise LockTimeoutError(f"upload {self.token} is busy: its lock was held over "
                                   f"{UPLOAD_LOCK_TIMEOUT_S:g} s") from exc
        try:
            yield
        finally:
            lock.release()

    def handle(self, number: int) -> str:
        """The handle that sends part ``number`` of this upload."""
        return f"up_{self.token}-{number}"

    def _part(self, number: int) -> Path:
        return self.path / f"part-{number:04d}.txt"

    def part_count(self) -> int:
        """How many parts arrived (parts 1..n are all there)."""
        number = 0
        while self._part(number + 1).is_file():
            number += 1
        return number

    def read_part(self, number: int) -> str:
        return self._part(number).read_bytes().decode("utf-8")

    def write_part(self, number: int, text: str) -> None:
        atomic_write_bytes(self._part(number), text.encode("utf-8"))

    def joined(self) -> str:
        """Every part received, joined in order."""
        return "".join(self.read_part(number) for number in range(1, self.part_count() + 1))

    def char_count(self) -> int:
        return len(self.joined())

    def describe(self, *, title: str | None, tags: list[str]) -> None:
        """Set the title and tags the stored item gets (a part that gives them overrides; one that
        gives neither changes nothing)."""
        if title is None and not tags:
            return
        old_title, old_tags = self.description()
        meta = {"title": title if title is not None else old_title, "tags": list(tags) if tags else old_tags}
        atomic_write_bytes(self.path / _META_FILE, json.dumps(meta, ensure_ascii=False).encode("utf-8"))

    def description(self) -> tuple[str | None, list[str]]:
        try:
            meta = json.loads((self.path / _META_FILE).read_bytes())
        except FileNotFoundError:
            return None, []
        except (OSError, ValueError) as exc:
            raise StoreError(f"upload {self.token}: {_META_FILE} is unreadable ({exc})") from exc
        return meta.get("title"), list(meta.get("tags") or [])

    def finished(self) -> tuple[str, int] | None:
        """``(item id, parts)`` once the last part arrived, else ``None``."""
        try:
            data = json.loads((self.path / _FINISH_FILE).read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise StoreError(f"upload {self.token}: {_FINISH_FILE} is unreadable ({exc})") from exc
        return str(data["id"]), int(data["parts"])

    def reserve(self, item_id: str, *, parts: int) -> str:
        """Write down the id the text is stored under, before storing it; returns it."""
        atomic_write_bytes(self.path / _FINISH_FILE, json.dumps({"id": item_id, "parts": parts}).encode("utf-8"))
        return item_id

    def unreserve(self) -> None:
        (self.path / _FINISH_FILE).unlink(missing_ok=True)

    def drop_parts(self) -> None:
        """Delete the parts of a stored upload (its ``finish.json`` answers retries until it expires)."""
        for part in self.path.glob("part-*.txt"):
            part.unlink(missing_ok=True)


class _Uploads:
    """The uploads of one agent, under ``<agent_dir>/uploads/``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def start(self) -> _Upload:
        """A new, empty upload.

        Raises:
            ToolCallError: if :data:`MAX_OPEN_UPLOADS` uploads are unfinished.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        open_uploads = [path for path in self.root.iterdir() if path.is_dir() and not (path / _FINISH_FILE).exists()]
        if len(open_uploads) >= MAX_OPEN_UPLOADS:
            raise ToolCallError(
                f"{len(open_uploads)} uploads are unfinished, the most this memory keeps: finish one (send its last "
                f"part without more) or wait, an upload not continued for {UPLOAD_TTL_S // 3600} hours is dropped. "
                "Nothing was stored."
            )
        while True:
            token = secrets.token_hex(6)
            try:
                (self.root / token).mkdir()
            except FileExistsError:
                continue
            return _Upload(token, self.root / token)

    def open(self, token: str) -> _Upload:
        """The upload ``token`` (12 hex digits, checked by the caller).

        Raises:
            ToolCallError: (``not_found``) if there is no such upload.
        """
        path = self.root / token
        if not path.is_dir():
            raise ToolCallError(
                f"there is no upload up_{token} (a wrong handle, or it expired after {UPLOAD_TTL_S // 3600} hours "
                "without a part). Start again: send the first part with more=true.",
                code="not_found",
            )
        return _Upload(token, path)

    def expire(self, *, now: float | None = None) -> int:
        """Delete the uploads not touched for :data:`UPLOAD_TTL_S` seconds; returns how many."""
        if not self.root.is_dir():
            return 0
        cutoff = (time.time() if now is None else now) - UPLOAD_TTL_S
        dropped = 0
        for path in self.root.iterdir():
            try:
                if path.is_dir() and path.stat().st_mtime < cutoff:
                    shutil.rmtree(path)
                    dropped += 1
            except OSError:  # another process dropped it first
                continue
        return dropped
