"""The exception tree of agent-memory.

Every error the library raises on purpose derives from :class:`AgentMemoryError`; errors of
dependencies (chromadb, tiktoken, JSON decoding, the file system) are converted at the boundary
with ``raise ... from exc`` so callers catch one root::

    AgentMemoryError
    ├── ContextOverflowError        what must stay verbatim does not fit the model's input budget
    ├── ConfigurationError          misconfiguration by the developer (bad path, missing model,
    │   │                           MemoryConfig values out of range)
    │   └── MissingExtraError (ImportError)  a part of the library whose extra is not installed
    ├── InvalidArgumentError (ValueError, TypeError)
    │                               an argument of the wrong type, out of its documented bounds
    │                               (``agent_memory.limits``), or not valid Unicode
    ├── InvalidIdError (ValueError) an agent id or memory id that is malformed or would escape
    │                               the memory directory
    ├── ItemNotFoundError (KeyError) no memory item with that id
    ├── IngestError (ValueError)    a file, directory or JSONL line that cannot be read into an item
    ├── TransformError (ValueError) a retrieve transform that cannot apply to the item
    │                               (bad regex, JSON path on text, page past the end)
    ├── StoreError                  reading or writing the JSONL / content files failed
    │   ├── CorruptRecordError      a record that cannot be parsed (other than a torn last line)
    │   ├── UnsupportedRecordError  an item record this version cannot read (a newer schema
    │   │                           version, an unknown field or type); kept as it is, refused
    │   ├── LockTimeoutError (TimeoutError)  another process held a file lock too long
    │   ├── BackendUnavailableError  the storage server (Postgres) cannot be reached: down,
    │   │                           restarting or cut off (which server, since when)
    │   └── ConflictError           a write that depended on a read found the state changed (retry)
    ├── VectorIndexError            the vector index (chromadb, embeddings) failed
    │   ├── EmbeddingError          the embedding model could not be loaded or run
    │   └── KeywordIndexError       the keyword index (SQLite FTS5) failed; a damaged file is rebuilt
    ├── MemoryClosedError (RuntimeError)  an AgentMemory used after ``close()``
    ├── EventFailedError            a journaled memory event the manager refused, when another
    │                               process applied it (the processor that applies an event
    │                               re-raises the manager's own error)
    └── LLMError                    a call to a language model (an OpenAI-compatible server) failed
        ├── LLMTimeoutError (TimeoutError)  no answer within the call's timeout
        ├── LLMConnectionError      the server could not be reached (refused, reset, DNS)
        ├── LLMStatusError          the server answered with an HTTP error status (429, 500, ...)
        └── LLMOutputError (ValueError)  an answer that is empty, not JSON, or fails validation

Dependency and builtin errors are mapped at the public boundary by :func:`map_exceptions` (as httpx
maps httpcore's): pydantic ``ValidationError``, ``TypeError``, ``ValueError``, ``UnicodeError`` and
``RecursionError`` become :class:`InvalidArgumentError`; ``filelock.Timeout`` (a ``TimeoutError``)
becomes :class:`LockTimeoutError`; other ``OSError`` s become :class:`StoreError`; always
``raise ... from exc``. Messages quote at most :data:`MAX_QUOTED_CHARS` characters of a bad value
(:func:`quoted`), so a 10 MB argument never comes back inside an error.

Errors of an LLM used *inside* the library (the LLM citation writer) are not raised to the agent either:
the compactor falls back to a deterministic citation and reports the :class:`LLMError`.

Errors a *model* makes (a tool call with a wrong id or argument) are not raised out of the memory
actions: the actions catch these exceptions and return an error result that tells the model what
to do next. Developers calling :class:`~agent_memory.memory.AgentMemory` directly get the
exceptions.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from pydantic import ValidationError

from agent_memory.limits import shorten

__all__ = [
    "AgentMemoryError",
    "BackendUnavailableError",
    "ConfigurationError",
    "ConflictError",
    "ContextOverflowError",
    "CorruptRecordError",
    "EmbeddingError",
    "EventFailedError",
    "IngestError",
    "InvalidArgumentError",
    "InvalidIdError",
    "ItemNotFoundError",
    "KeywordIndexError",
    "LLMConnectionError",
    "LLMError",
    "LLMOutputError",
    "LLMStatusError",
    "LLMTimeoutError",
    "LockTimeoutError",
    "MAX_QUOTED_CHARS",
    "MemoryClosedError",
    "MissingExtraError",
    "StoreError",
    "TransformError",
    "UnsupportedRecordError",
    "VectorIndexError",
    "map_exceptions",
    "outage_behind",
    "quoted",
    "validation_summary",
]

MAX_QUOTED_CHARS = 60
"""Characters of a bad value an error message quotes at most; the rest is elided (with its length)."""

MAX_MESSAGE_CHARS = 400
"""Longest message text taken over from a dependency's exception, in characters."""


def quoted(value: object, max_chars: int = MAX_QUOTED_CHARS) -> str:
    """``repr`` of a short prefix of ``value`` for an error message: ``'abc'`` whole, a long string
    as ``'aaaa…' (10,000,000 chars)``, anything else by its ``repr`` cut the same way."""
    if isinstance(value, str):
        if len(value) <= max_chars:
            return repr(value)
        return f"{value[:max_chars]!r}… ({len(value):,} chars)"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a broken __repr__ must not hide the real error
        text = f"<{type(value).__name__}>"
    return text if len(text) <= max_chars else f"{text[:max_chars]}… ({type(value).__name__})"


def validation_summary(exc: ValidationError, *, max_errors: int = 3) -> str:
    """pydantic's errors as one short line, ``field: problem; field: problem``, without the input
    values (which may be megabytes long)."""
    parts = []
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    for err in errors[:max_errors]:
        where = ".".join(str(part) for part in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(shorten(f"{where}: {msg}" if where else msg, 200))
    if len(errors) > max_errors:
        parts.append(f"and {len(errors) - max_errors} more")
    return "; ".join(parts)


class AgentMemoryError(Exception):
    """Root of every error agent-memory raises on purpose."""


class ConfigurationError(AgentMemoryError):
    """The library was set up wrongly (a missing model path, an unusable directory, bad settings)."""


class MissingExtraError(ConfigurationError, ImportError):
    """A part of the library was used whose optional dependencies (its extra) are not installed;
    the message names the extra and the ``pip install`` that adds it
    (:func:`agent_memory.extras.require_extra`). An ``ImportError`` too, so ``try: import ...
    except ImportError`` keeps working."""


class InvalidArgumentError(AgentMemoryError, ValueError, TypeError):
    """An argument of a library call is of the wrong type, outside its documented bounds
    (:mod:`agent_memory.limits`), nested too deeply, or not valid Unicode (a lone surrogate).

    Raised before anything is written. A ``ValueError`` and a ``TypeError``, so code that caught
    those from earlier versions (pydantic's ``ValidationError`` is a ``ValueError``) still works.

    Args:
        message: what is wrong, quoting at most a short prefix of the value.
        errors: pydantic's error list (``ValidationError.errors()`` without inputs), when the
            error came from validating a model, keyword-only; ``()`` otherwise.
    """

    def __init__(self, message: str, *, errors: Sequence[Mapping[str, Any]] = ()) -> None:
        super().__init__(message)
        self.errors = tuple(errors)

    @classmethod
    def from_validation_error(cls, exc: ValidationError, what: str) -> InvalidArgumentError:
        """The error for a pydantic ``ValidationError`` raised while validating ``what``."""
        errors = exc.errors(include_url=False, include_input=False)
        return cls(f"invalid {what}: {validation_summary(exc)}", errors=errors)


class InvalidIdError(AgentMemoryError, ValueError):
    """An agent id or memory id is malformed, or would name a path outside the memory directory.

    Args:
        message: what is wrong.
        value: the offending id, keyword-only.
    """

    def __init__(self, message: str, *, value: str) -> None:
        super().__init__(message)
        self.value = value


class ItemNotFoundError(AgentMemoryError, KeyError):
    """No memory item has this id.

    Args:
        message: what was looked up.
        item_id: the id that was not found, keyword-only.
    """

    def __init__(self, message: str, *, item_id: str) -> None:
        super().__init__(message)
        self.item_id = item_id

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class OutsideSnapshotError(ItemNotFoundError):
    """An isolated sub-agent asked for an item of its parent's memory that is not in its snapshot
    (stored after the fork): a refused read. A model sees it as an unknown id."""


class IsolationError(AgentMemoryError, PermissionError):
    """An isolated sub-agent tried to change its parent's memory (forget one of the parent's
    items, store under one of its ids): a refused write. Its own writes go to its own memory."""


class IngestError(AgentMemoryError, ValueError):
    """A file, directory, JSONL line or stdin that cannot be read into an item to store."""


class TransformError(AgentMemoryError, ValueError):
    """A retrieve transform cannot be applied (bad pattern, JSON path on text, page past the end)."""


class StoreError(AgentMemoryError):
    """Reading or writing the memory's files failed; the previous state is left intact."""


class CorruptRecordError(StoreError):
    """A JSONL record that cannot be parsed and is not a torn final line.

    Args:
        message: what is wrong.
        path: the file, keyword-only.
        line_no: 1-based line number of the bad record, keyword-only.
    """

    def __init__(self, message: str, *, path: str, line_no: int) -> None:
        super().__init__(message)
        self.path = path
        self.line_no = line_no


class UnsupportedRecordError(StoreError):
    """An item's record in ``items.jsonl`` is one this version cannot read: it carries a newer
    ``schema_version`` than :data:`~agent_memory.models.items.ITEM_SCHEMA_VERSION`, or it is a
    JSON object with a well-formed memory id that does not validate (an unknown field or type:
    written by a newer version, or edited by hand). The record is kept exactly where it is (no
    reader moves or rewrites it; forget, rewrite, clear and restore keep it byte for byte) and
    every other item stays readable; reading, changing or copying this item raises this error.
    Open the memory with the version that wrote it to use the item.

    Args:
        message: what is wrong.
        item_id: the item whose record cannot be read, keyword-only.
        path: the JSONL file, keyword-only.
        schema_version: the record's ``schema_version`` when it has a whole number there, else
            ``None``, keyword-only.
    """

    def __init__(self, message: str, *, item_id: str, path: str, schema_version: int | None = None) -> None:
        super().__init__(message)
        self.item_id = item_id
        self.path = path
        self.schema_version = schema_version


class LockTimeoutError(StoreError, TimeoutError):
    """Another thread or process held a file lock (``items.jsonl.lock``, ``index.lock``) longer
    than the wait allowed; nothing was changed by the call that gave up."""


class BackendUnavailableError(StoreError):
    """The server the memory is kept on (the Postgres backend's database server) cannot be
    reached: it is down, restarting, refusing connections, or cut off by the network. Raised at
    once while the outage lasts (a call does not wait for a connection that cannot come); the
    first call a second after the last try tries the server again (``RETRY_INTERVAL_S`` of
    :mod:`agent_memory.storage.postgres.database`), and calls work again as soon as it answers.
    A call that raised it before reaching the server wrote nothing; one cut off in the middle (the
    server went away during it) ran in a transaction, which the server either committed whole or
    not at all. Nothing written before the outage is lost: it is in the database.

    Args:
        message: what happened, naming the server and since when.
        host: where the server was looked for: ``host:port``, or the directory of its Unix socket,
            keyword-only.
        since: when the outage was first seen, in Unix time, seconds (``time.time()``),
            keyword-only; the same for every error of one outage.
    """

    def __init__(self, message: str, *, host: str, since: float) -> None:
        super().__init__(message)
        self.host = host
        self.since = since


class ConflictError(StoreError):
    """A write that depended on what was read found the stored state changed since (another
    process wrote in between): nothing was written; read again and retry. Raised by a backend's
    item log and documents when a write passes ``expect`` (see
    :mod:`agent_memory.storage.contracts`); the library retries by itself, so a caller sees it only
    from those objects directly."""


class MemoryClosedError(AgentMemoryError, RuntimeError):
    """An :class:`~agent_memory.memory.AgentMemory` was used after :meth:`close` (or after its
    ``with`` block); open a new one on the same directory instead."""


class EventFailedError(AgentMemoryError):
    """A journaled memory event was refused when it was applied (a bad argument: a tool result for
    an unknown call, an unknown item id) and marked ``failed`` in the event journal; raised to the
    process that dispatched it when another process applied it (the error's class is not known
    there, only its text). Failed events are not retried.

    Args:
        message: what went wrong.
        event_id: the event (``qevt_…``), keyword-only.
        error: the refusal as recorded (``"InvalidArgumentError: ..."``), keyword-only.
    """

    def __init__(self, message: str, *, event_id: str, error: str) -> None:
        super().__init__(message)
        self.event_id = event_id
        self.error = error


class ContextOverflowError(AgentMemoryError):
    """A prompt cannot be brought inside the model's input budget even after compaction and
    truncation: what must be kept verbatim (the system prompt, the tool definitions, the latest
    user message) does not fit on its own."""


class VectorIndexError(AgentMemoryError):
    """The vector index failed (chromadb or the embedding model); the JSONL store is unaffected."""


class EmbeddingError(VectorIndexError):
    """The embedding model could not be loaded or failed to embed."""


class KeywordIndexError(VectorIndexError):
    """The keyword index (SQLite FTS5, ``index/lexical.sqlite3``) failed. A damaged file
    (``index.lexical.is_corruption``) is recreated from the store by the memory itself."""


class LLMError(AgentMemoryError):
    """A call to a language model failed (converted from the openai SDK's errors).

    Attributes:
        kind: which failure, for reports and logs: ``"error"`` here, ``"timeout"``,
            ``"connection"``, ``"http_status"`` or ``"invalid_output"`` in the subclasses.
    """

    kind: str = "error"


class LLMTimeoutError(LLMError, TimeoutError):
    """The model did not answer within the call's ``timeout_s``."""

    kind = "timeout"


class LLMConnectionError(LLMError):
    """The model's server could not be reached (connection refused or reset, unknown host)."""

    kind = "connection"


class LLMStatusError(LLMError):
    """The model's server answered with an HTTP error status.

    Args:
        message: what the server said.
        status_code: the HTTP status (429 rate limit, 500 server error, ...), keyword-only.
    """

    kind = "http_status"

    def __init__(self, message: str, *, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class LLMOutputError(LLMError, ValueError):
    """The model answered, but not usably: no text, text that is not JSON, or JSON that fails
    validation.

    Args:
        message: what is wrong.
        text: the model's answer (``""`` when there was none), keyword-only.
    """

    kind = "invalid_output"

    def __init__(self, message: str, *, text: str = "") -> None:
        super().__init__(message)
        self.text = text


def outage_behind(exc: BaseException) -> BackendUnavailableError | None:
    """The :class:`BackendUnavailableError` ``exc`` is or was raised from (its chain of
    ``__cause__``, the ``raise ... from`` links), else ``None``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, BackendUnavailableError):
            return current
        seen.add(id(current))
        current = current.__cause__
    return None


@contextmanager
def map_exceptions(what: str) -> Iterator[None]:
    """Convert dependency and builtin errors raised inside the block into :class:`AgentMemoryError`
    subclasses, keeping the original as ``__cause__``; library errors pass through unchanged.

    ``what`` names the call in messages (``"AgentMemory.store"``). The mapping, first match wins:
    ``TimeoutError`` (``filelock.Timeout``) → :class:`LockTimeoutError`; ``OSError`` →
    :class:`StoreError`; pydantic ``ValidationError`` → :class:`InvalidArgumentError` with its
    error list; ``RecursionError`` (input nested too deeply), ``UnicodeError``, ``ValueError``,
    ``TypeError`` → :class:`InvalidArgumentError`. Anything else (a bug) propagates unchanged.
    A library error caused by an outage of the backend's server (:func:`outage_behind`: the index's
    ``VectorIndexError`` or an item's ``StoreError`` raised from a
    :class:`BackendUnavailableError`) is raised as a :class:`BackendUnavailableError` with the
    outage's message, ``host`` and ``since``: the caller learns that the server is down, not that
    the index failed.
    """
    try:
        yield
    except BackendUnavailableError:
        raise
    except AgentMemoryError as exc:
        outage = outage_behind(exc)
        if outage is not None:
            raise BackendUnavailableError(str(outage), host=outage.host, since=outage.since) from exc
        raise
    except TimeoutError as exc:
        raise LockTimeoutError(f"{what}: timed out waiting for a lock ({shorten(str(exc), MAX_MESSAGE_CHARS)})") from exc
    except OSError as exc:
        raise StoreError(f"{what}: {shorten(str(exc), MAX_MESSAGE_CHARS)}") from exc
    except ValidationError as exc:
        raise InvalidArgumentError.from_validation_error(exc, f"argument to {what}") from exc
    except RecursionError as exc:
        raise InvalidArgumentError(f"{what}: an argument is nested too deeply") from exc
    except UnicodeError as exc:
        raise InvalidArgumentError(
            f"{what}: text is not valid Unicode ({getattr(exc, 'reason', exc.__class__.__name__)}); "
            "lone surrogates (U+D800-U+DFFF) cannot be stored"
        ) from exc
    except (ValueError, TypeError) as exc:
        raise InvalidArgumentError(f"{what}: {shorten(str(exc), MAX_MESSAGE_CHARS)}") from exc
