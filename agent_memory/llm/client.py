"""LLMClient: one stateless chat completion against a language model.

:class:`LLMClient` is the plugin point (a Protocol): anything with a :meth:`~LLMClient.complete`
method can serve the LLM citation writer. :class:`OpenAIChatClient` implements it on the ``openai`` SDK
for any OpenAI-compatible server (OpenAI, vLLM, llama.cpp's ``llama_cpp.server``, ...). Each call
sends the explicit message list it is given and keeps no conversation state. The SDK's exceptions
are converted at this boundary into :class:`~agent_memory.errors.LLMError` and its subclasses, so
callers catch one tree; :func:`map_sdk_errors` does it, for the chat models of
:mod:`agent_memory.llm.chat` too. The ``openai`` package is imported when a client is built, not when this
module is imported.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from agent_memory.errors import (
    ConfigurationError,
    LLMConnectionError,
    LLMError,
    LLMOutputError,
    LLMStatusError,
    LLMTimeoutError,
)
from agent_memory.lazy_imports import HEAVY_IMPORTS

__all__ = ["DEFAULT_LLM_TIMEOUT_S", "LLMClient", "LLMResponse", "NO_MODEL_HINT", "OpenAIChatClient", "import_openai",
           "map_sdk_errors"]

NO_MODEL_HINT = ("without a key or a model server of your own, run the stand-in model on loopback: python -m "
                 "agent_memory.testing.stand_in, then the two exports it prints (docs/memory.md)")
"""What an error about a missing key, or about a loopback server that does not answer, adds: the
way the docs' blocks run without a key."""

DEFAULT_LLM_TIMEOUT_S = 30.0
"""Longest wait for one completion, in seconds, when neither the client nor the call sets one."""


class LLMResponse(BaseModel):
    """The text of one completion and what it cost."""

    model_config = ConfigDict(frozen=True)

    text: str
    """The assistant message's text (never ``None``; an empty answer raises instead)."""
    prompt_tokens: int | None = None
    """Tokens of the prompt as the server counted them; ``None`` when it did not say."""
    completion_tokens: int | None = None
    """Tokens of the answer as the server counted them; ``None`` when it did not say."""
    finish_reason: str | None = None
    """Why generation stopped (``"stop"``, ``"length"``, ...); ``None`` when not reported."""


@runtime_checkable
class LLMClient(Protocol):
    """A language model answering one explicit list of chat messages at a time."""

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int,
        temperature: float,
        response_format: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> LLMResponse:
        """One completion of ``messages`` (OpenAI chat format: ``{"role": ..., "content": ...}``,
        oldest first).

        Args:
            messages: the whole conversation of this call; nothing is remembered between calls.
            max_tokens: most tokens the answer may have.
            temperature: sampling temperature (0: as deterministic as the server allows).
            response_format: OpenAI ``response_format`` (``{"type": "json_object"}``); ``None``:
                free text.
            timeout_s: longest wait for this call, in seconds; ``None``: the client's default.

        Raises:
            LLMTimeoutError: no answer within the timeout.
            LLMConnectionError: the server could not be reached.
            LLMStatusError: the server answered with an HTTP error status.
            LLMOutputError: the answer had no text.
            LLMError: any other failure of the call.
        """
        ...


def import_openai(owner: str) -> ModuleType:
    """The ``openai`` module, imported with ``httpx`` complete beside it (when installed).

    The SDK looks up ``sys.modules["httpx"]`` on every request (``_loaded_legacy_httpx`` in
    openai/_httpx2.py) without waiting for an import of it to finish, and chromadb imports httpx
    when a memory first opens its index on files, in the memory's indexing thread: a request made
    meanwhile met a half-initialised module (``AttributeError: partially initialized module 'httpx'
    has no attribute 'Timeout'``). Imported here, in the thread that builds the client and under
    :data:`~agent_memory.lazy_imports.HEAVY_IMPORTS` (which the library's lazy imports hold), httpx
    is whole before any request, and no later import of it can be half done.

    Args:
        owner: the class that needs the SDK (named in the error).

    Raises:
        ConfigurationError: if the ``openai`` package is not installed.
    """
    with HEAVY_IMPORTS:
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - openai is a dependency
            raise ConfigurationError(f"{owner} needs the openai package (pip install openai)") from exc
        try:
            import httpx  # noqa: F401 - imported whole now (see above)
        except ImportError:  # pragma: no cover - chromadb's dependency, not ours
            pass
    return openai


class OpenAIChatClient:
    """:class:`LLMClient` on the ``openai`` SDK's chat completions, for any OpenAI-compatible server.

    Args:
        base_url: the API root, e.g. ``"http://127.0.0.1:8080/v1"``.
        api_key: sent as the bearer token; local servers accept any value.
        model: the model name sent with each request.
        timeout_s: default longest wait for one call, in seconds.
        max_retries: retries the SDK makes on connection errors, 408/409/429 and 5xx statuses
            (0: none; the compactor prefers a fast fallback to a slow retry).

    Raises:
        ConfigurationError: if the ``openai`` package is missing.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str = "x",
        model: str,
        timeout_s: float = DEFAULT_LLM_TIMEOUT_S,
        max_retries: int = 0,
    ) -> None:
        import_openai("OpenAIChatClient")  # httpx whole before any request (see there)
        import openai

        self.base_url = base_url
        self.model = model
        self.timeout_s = timeout_s
        self._openai = openai
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=max_retries)

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int,
        temperature: float,
        response_format: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> LLMResponse:
        """One chat completion; see :meth:`LLMClient.complete`."""
        extra: dict[str, Any] = {} if response_format is None else {"response_format": response_format}
        with map_sdk_errors(self._openai, self.base_url):
            completion = self._client.chat.completions.create(
                model=self.model,
                messages=messages,  # type: ignore[arg-type]
                max_tokens=max_tokens,
                temperature=temperature,
                timeout=self.timeout_s if timeout_s is None else timeout_s,
                **extra,
            )
        choices = getattr(completion, "choices", None) or []
        if not choices or not isinstance(choices[0].message.content, str) or not choices[0].message.content:
            raise LLMOutputError(f"{self.base_url}: the answer has no text")
        usage = completion.usage
        return LLMResponse(
            text=choices[0].message.content,
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
            finish_reason=choices[0].finish_reason,
        )

    def __repr__(self) -> str:
        return f"OpenAIChatClient(base_url={self.base_url!r}, model={self.model!r})"


@contextmanager
def map_sdk_errors(sdk: ModuleType, where: str) -> Iterator[None]:
    """Convert the errors of an LLM SDK (the ``openai`` or ``anthropic`` module, which share their
    exception names) raised inside the block into :class:`~agent_memory.errors.LLMError` s, keeping
    the SDK's error as ``__cause__``; ``where`` (the server's URL) starts each message.

    ``APITimeoutError`` → :class:`LLMTimeoutError`; ``APIConnectionError`` →
    :class:`LLMConnectionError`; ``APIStatusError`` → :class:`LLMStatusError` (with the status
    and the server's message); any other error of the SDK (response validation, an unexpected
    answer) → :class:`LLMError`. Errors that are not the SDK's propagate unchanged.
    """
    base = getattr(sdk, "OpenAIError", None) or sdk.AnthropicError
    try:
        yield
    except sdk.APITimeoutError as exc:  # before APIConnectionError, its base class
        raise LLMTimeoutError(f"{where}: no answer within the timeout ({exc})") from exc
    except sdk.APIConnectionError as exc:
        loopback = any(host in where for host in ("://127.", "://localhost", "://[::1]"))
        raise LLMConnectionError(f"{where}: cannot connect ({exc})" + (f"; {NO_MODEL_HINT}" if loopback else "")) from exc
    except sdk.APIStatusError as exc:
        message = f"{where}: HTTP {exc.status_code}: {_error_message(exc)}"
        raise LLMStatusError(message, status_code=exc.status_code) from exc
    except base as exc:
        raise LLMError(f"{where}: {type(exc).__name__}: {exc}") from exc


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:500]
    return str(getattr(exc, "message", exc))[:500]
