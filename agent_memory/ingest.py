"""Reading files, directories, JSONL lines and standard input into items to store.

Used by ``agent-memory store`` and usable by any bulk loader: :func:`plan_sources` expands paths
into :class:`Source` objects whose ``read`` gives a :class:`Payload` (content plus the metadata the
source suggests); files are read only when their turn comes. Text files are stored as text,
``.json`` as JSON data, ``.html``/``.htm`` as ``web_content`` with media type ``text/html``,
undecodable files as bytes; each line of a ``.jsonl`` file is an item (``{"content": ...,
"type"?, "source"?, "tags"?, "title"?}``, or any other object stored as JSON).
"""

from __future__ import annotations

import json
import mimetypes
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, NoReturn, get_args

from agent_memory.errors import IngestError
from agent_memory.limits import MAX_SOURCE_CHARS, MAX_TITLE_CHARS, shorten
from agent_memory.models.items import MemoryType

__all__ = ["Payload", "Source", "plan_sources", "read_file", "read_stdin"]

MEMORY_TYPES: tuple[str, ...] = get_args(MemoryType)
JSONL_ENVELOPE_KEYS = frozenset({"content", "type", "source", "tags", "title", "media_type"})
"""Keys of a JSONL line that describes an item (``content`` plus metadata). A line with ``content``
and only these keys is such an envelope; any other JSON object is stored whole, as JSON data."""
_HTML_SUFFIXES = (".html", ".htm")
_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


def _fail(message: str) -> NoReturn:
    raise IngestError(message)


@dataclass(frozen=True, slots=True)
class Payload:
    """What one source turns into: content, metadata guessed from the source, and metadata the
    item states itself (a JSONL envelope), which beats the command's options."""

    content: Any
    default_type: MemoryType
    """Type when neither the item nor ``--type`` gives one."""
    default_source: str
    """Source when neither the item nor ``--source`` gives one."""
    default_title: str | None = None
    """Title when neither the item nor ``--title`` gives one."""
    media_type: str | None = None
    own: dict[str, Any] = field(default_factory=dict)
    """``type``, ``source``, ``title`` stated by the item itself."""
    tags: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A page title or a path longer than the store accepts is shortened, not refused.
        object.__setattr__(self, "default_source", shorten(self.default_source, MAX_SOURCE_CHARS))
        if self.default_title:
            object.__setattr__(self, "default_title", shorten(self.default_title, MAX_TITLE_CHARS))


@dataclass(frozen=True, slots=True)
class Source:
    """One item to store; ``read`` loads it (files are read only when their turn comes)."""

    label: str
    read: Callable[[], Payload]


def decode_html(data: bytes) -> str:
    """HTML bytes as text: UTF-8, else the charset the page declares, else Latin-1."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    declared = _CHARSET.search(data[:4096])
    if declared:
        try:
            return data.decode(declared.group(1).decode("ascii"), errors="replace")
        except LookupError:
            pass
    return data.decode("latin-1")


def read_file(path: Path, *, warn: Callable[[str], None] = lambda text: None) -> Payload:
    """A file as content: JSON data for ``.json``, a page for ``.html``/``.htm``, else text, or
    bytes when it is not UTF-8."""
    data = path.read_bytes()
    suffix = path.suffix.lower()
    extra = {"path": str(path.resolve())}
    if suffix in _HTML_SUFFIXES:
        from agent_memory.html import extract_page

        text = decode_html(data)
        title = extract_page(text).title or path.name
        return Payload(text, "web_content", str(path), title, "text/html", extra=extra)
    guessed = mimetypes.guess_type(path.name)[0]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Payload(data, "file", str(path), path.name, guessed or "application/octet-stream", extra=extra)
    if suffix == ".json":
        try:
            return Payload(json.loads(text), "file", str(path), path.name, "application/json", extra=extra)
        except json.JSONDecodeError as exc:
            warn(f"{path} is not valid JSON ({exc}); stored as text")
    return Payload(text, "file", str(path), path.name, guessed or "text/plain", extra=extra)


def read_stdin(data: bytes) -> Payload:
    """Standard input: JSON data when it parses as an object or array, an HTML page when it looks
    like one, else text (bytes when not UTF-8)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Payload(data, "custom", "stdin", media_type="application/octet-stream")
    if text.lstrip()[:1] in ("{", "["):
        try:
            return Payload(json.loads(text), "custom", "stdin", media_type="application/json")
        except json.JSONDecodeError:
            pass
    from agent_memory.html import extract_page, looks_like_html

    if looks_like_html(text):
        return Payload(text, "web_content", "stdin", extract_page(text).title, "text/html")
    return Payload(text, "custom", "stdin")


def jsonl_line(path: Path, line_no: int, line: str) -> Payload:
    """One JSONL line: an envelope ``{"content", "type"?, "source"?, "tags"?, "title"?,
    "media_type"?}`` or any other JSON object, stored whole as JSON data."""
    where = f"{path}:{line_no}"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        _fail(f"{where}: not valid JSON ({exc.msg})")
    if not isinstance(obj, dict):
        _fail(f"{where}: each line must be a JSON object, not {type(obj).__name__}")
    extra = {"path": str(path.resolve()), "line": line_no}
    if "content" not in obj or not set(obj) <= JSONL_ENVELOPE_KEYS:
        return Payload(obj, "custom", str(path), media_type="application/json", extra=extra)
    if obj["content"] is None:
        _fail(f"{where}: content is null")
    kind = obj.get("type")
    if kind is not None and kind not in MEMORY_TYPES:
        _fail(f"{where}: type {kind!r} is not one of {', '.join(MEMORY_TYPES)}")
    for key in ("source", "title", "media_type"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            _fail(f"{where}: {key} must be a string")
    tags = obj.get("tags") or ()
    tags = (tags,) if isinstance(tags, str) else tags
    if not isinstance(tags, list | tuple) or not all(isinstance(tag, str) for tag in tags):
        _fail(f"{where}: tags must be a list of strings")
    own = {key: obj[key] for key in ("type", "source", "title") if obj.get(key)}
    return Payload(obj["content"], "custom", str(path), None, obj.get("media_type"), own, tuple(tags), extra)


def _ready(payload: Payload) -> Callable[[], Payload]:
    """A ``read`` of a payload already read."""
    return lambda: payload


def jsonl_sources(path: Path) -> list[Source]:
    """Every non-blank line of a JSONL file, checked before anything is stored."""
    sources = []
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if line.strip():
                payload = jsonl_line(path, line_no, line)
                sources.append(Source(f"{path}:{line_no}", _ready(payload)))
    return sources


def plan_sources(paths: list[str], *, stdin: Callable[[], bytes], warn: Callable[[str], None]) -> list[Source]:
    """Expand the arguments of ``store`` into the items to store, in order."""
    sources: list[Source] = []
    stdin_read = False
    for arg in paths:
        if arg == "-":
            if stdin_read:
                _fail("'-' (standard input) can be given once")
            stdin_read = True
            data = stdin()
            sources.append(Source("<stdin>", partial(read_stdin, data)))
            continue
        path = Path(arg)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file())
            if not files:
                warn(f"no files under {path}")
        elif path.is_file():
            files = [path]
        else:
            _fail(f"no such file or directory: {arg}")
        for file in files:
            if file.suffix.lower() == ".jsonl":
                sources.extend(jsonl_sources(file))
            else:
                sources.append(Source(str(file), partial(read_file, file, warn=warn)))
    return sources


