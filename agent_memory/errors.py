"""The exception tree of agent-memory.

Every error the library raises on purpose derives from :class:`AgentMemoryError`; errors of
dependencies (chromadb, tiktoken, JSON decoding, the file system) are converted at the boundary
with ``raise ... from exc`` so callers catch one root::

    AgentMemoryError
    ├── ConfigurationError          misconfiguration by the developer (bad path, missing model)
    ├── InvalidIdError (ValueError) an agent id or memory id that is malformed or would escape
    │                               the memory directory
    ├── ItemNotFoundError (KeyError) no memory item with that id
    ├── IngestError (ValueError)    a file, directory or JSONL line that cannot be read into an item
    ├── TransformError (ValueError) a retrieve transform that cannot apply to the item
    │                               (bad regex, JSON path on text, page past the end)
    ├── StoreError                  reading or writing the JSONL / content files failed
    │   └── CorruptRecordError      a record that cannot be parsed (other than a torn last line)
    ├── VectorIndexError            the vector index (chromadb, embeddings) failed
    │   └── EmbeddingError          the embedding model could not be loaded or run
    └── LLMError                    a call to a language model (an OpenAI-compatible server) failed
        ├── LLMTimeoutError (TimeoutError)  no answer within the call's timeout
        ├── LLMConnectionError      the server could not be reached (refused, reset, DNS)
        ├── LLMStatusError          the server answered with an HTTP error status (429, 500, ...)
        └── LLMOutputError (ValueError)  an answer that is empty, not JSON, or fails validation

Errors of an LLM used *inside* the library (the LLM compactor) are not raised to the agent either:
the compactor falls back to a deterministic citation and reports the :class:`LLMError`.

Errors a *model* makes (a tool call with a wrong id or argument) are not raised out of the memory
actions: the actions catch these exceptions and return an error result that tells the model what
to do next. Developers calling :class:`~agent_memory.memory.AgentMemory` directly get the
exceptions.
"""

from __future__ import annotations

__all__ = [
    "AgentMemoryError",
    "ConfigurationError",
    "CorruptRecordError",
    "EmbeddingError",
    "IngestError",
    "InvalidIdError",
    "ItemNotFoundError",
    "LLMConnectionError",
    "LLMError",
    "LLMOutputError",
    "LLMStatusError",
    "LLMTimeoutError",
    "StoreError",
    "TransformError",
    "VectorIndexError",
]


class AgentMemoryError(Exception):
    """Root of every error agent-memory raises on purpose."""


class ConfigurationError(AgentMemoryError):
    """The library was set up wrongly (a missing model path, an unusable directory, bad settings)."""


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


class VectorIndexError(AgentMemoryError):
    """The vector index failed (chromadb or the embedding model); the JSONL store is unaffected."""


class EmbeddingError(VectorIndexError):
    """The embedding model could not be loaded or failed to embed."""


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
