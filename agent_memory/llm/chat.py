"""Chat models: messages and tools in, the assistant's message (with its tool calls) and the
provider's usage out (a stateless LLM, as in AutoByteus, github.com/AutoByteus/autobyteus: explicit
message lists in, no history kept by the model).

:class:`ChatModel` is the plugin point (a Protocol). Three implementations sit on the providers'
SDKs, each sending the explicit messages it is given through the matching
:mod:`~agent_memory.llm.renderers` renderer and keeping no conversation state:

- :class:`OpenAIChatModel`: Chat Completions, for OpenAI and any OpenAI-compatible server (vLLM,
  llama.cpp, ...);
- :class:`OpenAIResponsesModel`: OpenAI's Responses API;
- :class:`AnthropicChatModel`: Anthropic's Messages API.

Each answer becomes a :class:`ChatResult`: an ``assistant`` :class:`Message` (text, tool calls with
their raw and parsed arguments, reasoning text when the provider returns it), the :class:`Usage`
the provider reported (the prompt with its cache reads and, for Anthropic, cache writes) and the
finish reason in one vocabulary. :meth:`Usage.billed_tokens` turns a usage into the
:class:`~agent_memory.pricing.BilledTokens` that :meth:`~agent_memory.pricing.PriceModel.price`
prices. :class:`AnthropicChatModel` places Anthropic's prompt-cache breakpoints (see
:class:`~agent_memory.llm.renderers.AnthropicRenderer`; ``cache_breakpoints=False`` turns them
off); OpenAI caches prompt prefixes by itself.
The SDKs' exceptions become :class:`~agent_memory.errors.LLMError` s at this boundary
(:func:`~agent_memory.llm.client.map_sdk_errors`). The SDKs are imported when a model is built,
not when this module is imported.

A server that silently drops the tool definitions (a chat template without tools: llama-cpp-python
by default, llama.cpp's ``llama-server`` without ``--jinja``) is caught from the usage it reports:
a call that carried tools whose reported ``prompt_tokens`` is below :data:`TOOLS_SEEN_RATIO` of our
count of the tool definitions alone gives a
:class:`~agent_memory.diagnostics.ToolsDroppedWarning`, once per endpoint and model. The first
calls of a conversation, whose messages are short, show it; later ones may hide it.
:class:`ServerCompat` adapts requests to servers that depart from OpenAI's Chat Completions
(:data:`LLAMA_CPP_PYTHON` for ``python -m llama_cpp.server --chat_format chatml-function-calling``).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.extras import require_extra
from agent_memory.diagnostics import ToolsDroppedWarning, warn_once
from agent_memory.errors import ConfigurationError, InvalidArgumentError, LLMOutputError
from agent_memory.limits import replace_surrogates
from agent_memory.llm.client import DEFAULT_LLM_TIMEOUT_S, NO_MODEL_HINT, import_openai, map_sdk_errors
from agent_memory.llm.renderers import AnthropicRenderer, OpenAIChatRenderer, OpenAIResponsesRenderer, PromptRenderer
from agent_memory.models.messages import Message, ToolCall
from agent_memory.pricing import BilledTokens
from agent_memory.prompt_tokens import tool_tokens
from agent_memory.tokens import default_token_counter

__all__ = [
    "DEFAULT_ANTHROPIC_MAX_OUTPUT_TOKENS",
    "DEFAULT_MAX_RETRIES",
    "LLAMA_CPP_PYTHON",
    "SERVER_COMPATS",
    "TOOLS_SEEN_RATIO",
    "AnthropicChatModel",
    "ChatModel",
    "ChatResult",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "ServerCompat",
    "Usage",
]

DEFAULT_MAX_RETRIES = 2
"""Retries the SDK makes on connection errors, 408/409/429 and 5xx statuses (the SDKs' default)."""

DEFAULT_ANTHROPIC_MAX_OUTPUT_TOKENS = 4096
"""Anthropic's ``max_tokens`` when neither the model nor the call sets one (the API requires it)."""

TOOLS_SEEN_RATIO = 0.5
"""A call that carried tools and whose reported ``prompt_tokens`` is below this fraction of our
count of the tool definitions alone (their JSON, o200k) gives a
:class:`~agent_memory.diagnostics.ToolsDroppedWarning`. A server that shows the tools to the model
counts at least their tokens in its own format and tokenizer (OpenAI's compact rendering of a
schema stays above half its JSON); one whose chat template drops them counts only the messages."""

TOOLS_DROPPED_HINT = (
    "llama-cpp-python: start `python -m llama_cpp.server` with `--chat_format chatml-function-calling` and "
    "use OpenAIChatModel(..., compat='llama-cpp-python') (it sends tool_choice='auto', without which that "
    "format drops the tools too); llama.cpp's llama-server: start it with --jinja; Ollama, vLLM: serve a "
    "model whose chat template takes tools (vLLM: --enable-auto-tool-choice --tool-call-parser ...)"
)
"""How to fix a server that drops tools, as the warning says it."""


class Usage(BaseModel):
    """Tokens of one call as the provider counted them; ``None``: the provider did not report it.

    ``prompt_tokens`` is the whole prompt; ``cached_tokens`` (cache reads) and
    ``cache_write_tokens`` are parts of it, and the rest is uncached input. Read from:

    - Chat Completions: ``prompt_tokens``, ``prompt_tokens_details.cached_tokens``,
      ``completion_tokens``; no writes (OpenAI bills none).
    - Responses: ``input_tokens``, ``input_tokens_details.cached_tokens``, ``output_tokens``; no
      writes.
    - Anthropic Messages: ``input_tokens`` (the uncached part only) + ``cache_read_input_tokens``
      + ``cache_creation_input_tokens`` as the prompt, the last two as reads and writes,
      ``output_tokens``.
    """

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int | None = Field(default=None, ge=0)
    """The whole prompt, cached part included (Anthropic: ``input_tokens`` +
    ``cache_read_input_tokens`` + ``cache_creation_input_tokens``). What the token budget checks."""
    completion_tokens: int | None = Field(default=None, ge=0)
    """The answer, reasoning included."""
    cached_tokens: int | None = Field(default=None, ge=0)
    """Cache reads: the part of ``prompt_tokens`` read from the provider's prompt cache (OpenAI
    ``cached_tokens``, Anthropic ``cache_read_input_tokens``)."""
    cache_write_tokens: int | None = Field(default=None, ge=0)
    """Cache writes: the part of ``prompt_tokens`` written to the provider's prompt cache, billed
    above the base input price (Anthropic ``cache_creation_input_tokens``, 1.25x for the 5-minute
    cache); ``None`` for OpenAI, which reports (and bills) no writes."""

    def billed_tokens(self) -> BilledTokens | None:
        """The call's tokens as the provider bills them, for
        :meth:`PriceModel.price <agent_memory.pricing.PriceModel.price>`: cache reads
        (``cached_tokens``), cache writes (``cache_write_tokens``), the rest of the prompt as
        uncached input, and the output; an unreported read or write count is 0. Reads and writes
        above the prompt (a server that reports them inconsistently) are cut to the prompt, reads
        first. ``None`` when ``prompt_tokens`` or ``completion_tokens`` was not reported (the
        call cannot be priced)."""
        if self.prompt_tokens is None or self.completion_tokens is None:
            return None
        read = min(self.cached_tokens or 0, self.prompt_tokens)
        write = min(self.cache_write_tokens or 0, self.prompt_tokens - read)
        return BilledTokens(uncached_input_tokens=self.prompt_tokens - read - write, cache_write_tokens=write,
                            cache_read_tokens=read, output_tokens=self.completion_tokens)


class ChatResult(BaseModel):
    """One answer of a :class:`ChatModel`."""

    model_config = ConfigDict(frozen=True)

    message: Message
    """The assistant's message: ``content`` (``None`` when it only calls tools), ``tool_calls`` in
    the provider's order, ``reasoning`` when returned. ``id``, ``ts``, ``turn_id`` and ``seq`` are
    not set: the caller's memory assigns them."""
    usage: Usage
    """What the call cost, as reported."""
    finish_reason: str | None
    """Why generation stopped, in Chat Completions' words: ``"stop"``, ``"tool_calls"``,
    ``"length"`` (the output limit), ``"content_filter"``; another provider value verbatim;
    ``None`` when not reported."""
    model: str | None
    """The model that answered, as the provider named it; ``None`` when not reported."""
    response_id: str | None = None
    """The provider's id of the answer (``chatcmpl-...``, ``resp_...``, ``msg_...``), for logs."""


@runtime_checkable
class ChatModel(Protocol):
    """A language model answering one explicit conversation at a time (stateless)."""

    def generate(
        self,
        messages: Sequence[Message],
        *,
        tool_definitions: Sequence[Mapping[str, Any]] | None = None,
        max_output_tokens: int | None = None,
        timeout_s: float | None = None,
    ) -> ChatResult:
        """The model's next message after ``messages``.

        Args:
            messages: the whole conversation of this call, oldest first; nothing is remembered
                between calls. Tool results must be resolved (``content`` set).
            tool_definitions: tool definitions in OpenAI format (``{"type": "function", "function":
                {...}}``); ``None``: no tools.
            max_output_tokens: most tokens the answer may have; ``None``: the model's default.
            timeout_s: longest wait for this call, in seconds; ``None``: the model's default.

        Raises:
            InvalidArgumentError: messages or tools the provider cannot take (nothing is sent).
            LLMTimeoutError: no answer within the timeout.
            LLMConnectionError: the server could not be reached.
            LLMStatusError: the server answered with an HTTP error status.
            LLMOutputError: the answer has neither text nor tool calls, or no answer at all.
            LLMError: any other failure of the call.
        """
        ...

    async def agenerate(
        self,
        messages: Sequence[Message],
        *,
        tool_definitions: Sequence[Mapping[str, Any]] | None = None,
        max_output_tokens: int | None = None,
        timeout_s: float | None = None,
    ) -> ChatResult:
        """:meth:`generate` for async code (``await asyncio.to_thread(self.generate, ...)`` will do)."""
        ...


class ServerCompat(BaseModel):
    """How an OpenAI-compatible server departs from OpenAI's Chat Completions, for
    :class:`OpenAIChatModel` (``compat=``). The defaults send what OpenAI expects.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool_choice: Literal["auto", "required"] | None = None
    """Sent as ``tool_choice`` with every call that carries tools; ``None``: not sent (OpenAI then
    takes ``"auto"``; llama-cpp-python's ``chatml-function-calling`` format drops the tools)."""
    null_content: bool = True
    """Whether an assistant message that only calls tools is sent with ``"content": null`` (as
    OpenAI's API documents); ``False``: ``""`` (llama-cpp-python's server answers null with
    HTTP 500)."""
    tool_results_as_user: bool = False
    """Send each tool result as a ``user`` message that starts ``Result of <name>(<arguments>):``,
    for chat templates that drop ``tool`` messages (llama-cpp-python's
    ``chatml-function-calling`` shows a tool message's role and not its content)."""


LLAMA_CPP_PYTHON = ServerCompat(tool_choice="auto", null_content=False, tool_results_as_user=True)
"""For llama-cpp-python's ``python -m llama_cpp.server --chat_format chatml-function-calling``
(version 0.3): its grammar makes the model answer with either a message or tool calls."""

SERVER_COMPATS: dict[str, ServerCompat] = {"openai": ServerCompat(), "llama-cpp-python": LLAMA_CPP_PYTHON}
"""The known servers' departures by name, for ``OpenAIChatModel(..., compat="llama-cpp-python")``."""


def _adapt_messages(messages: list[dict[str, Any]], compat: ServerCompat) -> list[dict[str, Any]]:
    """Chat Completions messages as ``compat`` asks (new dicts where changed)."""
    calls: dict[str, tuple[str, str]] = {}
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or ():
                calls[call["id"]] = (call["function"]["name"], call["function"]["arguments"])
            if message.get("content") is None and not compat.null_content:
                message = {**message, "content": ""}
        elif message.get("role") == "tool" and compat.tool_results_as_user:
            name, arguments = calls.get(message.get("tool_call_id", ""), ("a tool", ""))
            message = {"role": "user", "content": f"Result of {name}({arguments}):\n{message.get('content') or ''}"}
        out.append(message)
    return out


def _finish(value: str | None, table: Mapping[str, str]) -> str | None:
    return None if value is None else table.get(value, value)


def _tool_calls(raw: Sequence[tuple[Any, Any, Any]]) -> tuple[ToolCall, ...]:
    """Tool calls from ``(id, name, arguments)`` as a provider sent them. ``arguments`` may be the
    raw string (kept verbatim, malformed or not) or already an object. A call without an id, or
    with an id an earlier call of the same answer has, gets a fresh ``call_<hex>`` id, so results
    can always be paired."""
    calls: list[ToolCall] = []
    seen: set[str] = set()
    for call_id, name, arguments in raw:
        if not isinstance(call_id, str) or not call_id or call_id in seen:
            call_id = f"call_{uuid.uuid4().hex[:24]}"
        seen.add(call_id)
        if not isinstance(arguments, str):
            arguments = "{}" if arguments is None else json.dumps(arguments, ensure_ascii=False)
        calls.append(ToolCall(id=call_id, name=name if isinstance(name, str) else "", arguments=arguments))
    return tuple(calls)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and value >= 0 else None


def _result(
    response: Any, content: str | None, calls: tuple[ToolCall, ...], reasoning: str | None, usage: Usage,
    finish_reason: str | None,
) -> ChatResult:
    """The :class:`ChatResult` of a provider's answer, with the model and id its response names.
    The text and reasoning are kept whatever they hold: a lone surrogate (a broken ``\\ud800``
    escape in the provider's JSON, which no file can write as UTF-8) becomes U+FFFD; the calls keep
    theirs as escapes (:class:`ToolCall`)."""
    content = replace_surrogates(content) if content else None if calls else content
    message = Message(role="assistant", content=content, tool_calls=calls,
                      reasoning=replace_surrogates(reasoning) if reasoning else reasoning)
    return ChatResult(message=message, usage=usage, finish_reason=finish_reason,
                      model=getattr(response, "model", None), response_id=getattr(response, "id", None))


def _openai_usage(usage: Any, prompt: str, completion: str) -> Usage:
    """The :class:`Usage` of an openai SDK answer whose counts are named ``prompt`` and
    ``completion`` (Chat Completions: ``prompt_tokens``, ``completion_tokens``; Responses:
    ``input_tokens``, ``output_tokens``), cache reads in ``<prompt>_details.cached_tokens``."""
    details = getattr(usage, f"{prompt}_details", None)
    return Usage(prompt_tokens=_count(getattr(usage, prompt, None)),
                 completion_tokens=_count(getattr(usage, completion, None)),
                 cached_tokens=_count(getattr(details, "cached_tokens", None)))


class _SDKChatModel(ABC):
    """What the SDK-based models share: the constructor (the parameters every model takes, as
    :class:`OpenAIChatModel` documents them), rendering, the call with its timeout and error
    mapping, the answer checks, the async twin. Subclasses set the renderer and write
    :meth:`_create_method`, :meth:`_parse` and :meth:`_max_tokens`; one on another SDK than
    ``openai`` overrides :meth:`_sdk_client`; one with parameters of its own sets what they decide,
    then calls this ``__init__``."""

    renderer: PromptRenderer
    price_provider: str | None = None
    """The ``genai-prices`` provider whose table prices this model's calls by its name
    (``"openai"``, ``"anthropic"``); ``None``: any provider whose models match."""
    LIMIT_FIELDS: tuple[str, ...] = ()
    """Request fields :meth:`_max_tokens` writes; options may not set them."""
    model: str
    timeout_s: float
    max_output_tokens: int | None
    options: dict[str, Any]
    _sdk: ModuleType
    _client: Any
    _where: str
    _tools_warned: bool = False
    """Set once this model warned that its server drops tools: they are no longer counted."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = DEFAULT_LLM_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_output_tokens: int | None = None,
        options: Mapping[str, Any] | None = None,
        client: Any = None,
    ) -> None:
        self.model, self.timeout_s, self.max_output_tokens = model, timeout_s, max_output_tokens
        self._sdk, self._client = self._sdk_client(client, base_url, api_key, timeout_s, max_retries)
        accepted = set(inspect.signature(self._create_method(self._client)).parameters)
        self._where = str(getattr(self._client, "base_url", "")).rstrip("/") or type(self).__name__
        self.options = dict(options or {})
        reserved = {"model", "timeout", "stream", *self.LIMIT_FIELDS, *getattr(self.renderer, "RESERVED", ())}
        wrong = sorted(set(self.options) - (accepted - reserved))
        if wrong:
            raise ConfigurationError(
                f"{type(self).__name__}: option {wrong[0]!r} is not a field this model may set "
                f"(extra_body=... sends fields the SDK does not know)"
            )

    def render(
        self,
        messages: Sequence[Message],
        *,
        tool_definitions: Sequence[Mapping[str, Any]] | None = None,
        max_output_tokens: int | None = None,
    ) -> dict[str, Any]:
        """The exact keyword arguments :meth:`generate` gives the SDK (timeout aside), adapted to
        the server where the model knows how it departs from the API (:meth:`_adapt`).

        Raises:
            InvalidArgumentError: messages or tools the renderer refuses, or a bound below 1.
        """
        bound = self.max_output_tokens if max_output_tokens is None else max_output_tokens
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 1):
            raise InvalidArgumentError(f"max_output_tokens must be a positive number of tokens, not {bound!r}")
        return self._adapt(self.renderer.render(
            messages, tool_definitions=tool_definitions, model=self.model, **self._max_tokens(max_output_tokens), **self.options
        ))

    def _adapt(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The rendered payload as this model's server takes it; this one: unchanged."""
        return payload

    def generate(
        self,
        messages: Sequence[Message],
        *,
        tool_definitions: Sequence[Mapping[str, Any]] | None = None,
        max_output_tokens: int | None = None,
        timeout_s: float | None = None,
    ) -> ChatResult:
        """One call; see :meth:`ChatModel.generate`."""
        payload = self.render(messages, tool_definitions=tool_definitions, max_output_tokens=max_output_tokens)
        with map_sdk_errors(self._sdk, self._where):
            response = self._create_method(self._client)(
                **payload, timeout=self.timeout_s if timeout_s is None else timeout_s
            )
        try:
            result = self._parse(response)
        except LLMOutputError:
            raise
        except (AttributeError, TypeError, ValueError) as exc:  # a shape no well-behaved server sends
            raise LLMOutputError(f"{self._where}: unexpected answer ({type(exc).__name__}: {exc})") from exc
        message = result.message
        if tool_definitions and result.usage.prompt_tokens is not None:
            self._check_tools_seen(tool_definitions, result.usage.prompt_tokens)
        if not message.content and not message.tool_calls:
            raise LLMOutputError(
                f"{self._where}: the answer has neither text nor tool calls (finish_reason {result.finish_reason!r})"
            )
        return result

    def _check_tools_seen(self, tool_definitions: Sequence[Mapping[str, Any]], prompt_tokens: int) -> None:
        """Warn (once per endpoint and model) when the reported prompt is smaller than
        :data:`TOOLS_SEEN_RATIO` of the tool definitions alone."""
        if self._tools_warned:
            return
        tokens = tool_tokens([dict(tool) for tool in tool_definitions], default_token_counter().count)
        if prompt_tokens >= TOOLS_SEEN_RATIO * tokens:
            return
        self._tools_warned = True
        warn_once(ToolsDroppedWarning, (self._where, self.model), (
            f"{self._where} (model {self.model!r}) reported {prompt_tokens:,} prompt tokens for a request whose "
            f"{len(tool_definitions)} tool definition(s) alone count {tokens:,} tokens: the server seems to drop the tool "
            f"definitions (its chat template has no tools), so the model cannot call any tool, memory tools "
            f"included. {TOOLS_DROPPED_HINT}."
        ), stacklevel=3)

    async def agenerate(
        self,
        messages: Sequence[Message],
        *,
        tool_definitions: Sequence[Mapping[str, Any]] | None = None,
        max_output_tokens: int | None = None,
        timeout_s: float | None = None,
    ) -> ChatResult:
        """:meth:`generate` in a worker thread, for async code."""
        return await asyncio.to_thread(
            self.generate, messages, tool_definitions=tool_definitions, max_output_tokens=max_output_tokens, timeout_s=timeout_s
        )

    @abstractmethod
    def _max_tokens(self, max_output_tokens: int | None) -> dict[str, Any]:
        """The payload field(s) that bound the answer's length."""

    def _sdk_client(
        self, client: Any, base_url: str | None, api_key: str | None, timeout_s: float, max_retries: int
    ) -> tuple[ModuleType, Any]:
        """The SDK module (whose exceptions :func:`map_sdk_errors` maps) and ``client``, or a new
        client of the other arguments (here: ``openai``'s). Raises ConfigurationError when the
        SDK is missing or no API key is found."""
        openai = import_openai(type(self).__name__)
        if client is not None:
            return openai, client
        try:
            return openai, openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=max_retries)
        except openai.OpenAIError as exc:  # no api_key given and none in OPENAI_API_KEY
            raise ConfigurationError(f"{type(self).__name__}: {exc} ({NO_MODEL_HINT})") from exc

    @staticmethod
    @abstractmethod
    def _create_method(client: Any) -> Any:
        """The client's method that sends a payload (its parameters are the fields options may
        set); ConfigurationError when the client has none (an SDK too old)."""

    @abstractmethod
    def _parse(self, response: Any) -> ChatResult:
        """The response as a :class:`ChatResult` (an empty answer is refused by the caller)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self._where!r}, model={self.model!r})"


class OpenAIChatModel(_SDKChatModel):
    """:class:`ChatModel` on the ``openai`` SDK's Chat Completions, for any OpenAI-compatible server.

    Args:
        model: the model name sent with each request.
        base_url: the API root (``"http://127.0.0.1:8080/v1"``); ``None``: the SDK's default
            (``OPENAI_BASE_URL`` or OpenAI).
        api_key: the bearer token; ``None``: ``OPENAI_API_KEY``. Local servers accept any value.
        timeout_s: default longest wait for one call, in seconds.
        max_retries: retries the SDK makes on connection errors, 408/409/429 and 5xx statuses.
        max_output_tokens: default bound of an answer, in tokens; ``None``: the server's default.
        max_tokens_field: the request field that carries the bound: ``"max_tokens"`` (understood by
            every compatible server) or ``"max_completion_tokens"`` (required by OpenAI's
            reasoning models).
        options: further request fields sent with every call (``{"temperature": 0}``); each must
            be a parameter of ``chat.completions.create`` other than ``messages``, ``tools``,
            ``model``, ``stream``, ``timeout`` and the two token bounds.
        client: a ready ``openai.OpenAI`` client (Azure, a custom ``http_client``); then
            ``base_url``, ``api_key``, ``timeout_s`` default and ``max_retries`` are the client's.
        compat: how the server departs from OpenAI: a :class:`ServerCompat`, or the name of a
            known server (:data:`SERVER_COMPATS`: ``"llama-cpp-python"`` is :data:`LLAMA_CPP_PYTHON`);
            ``None``: none. :meth:`render` gives the payload so adapted, as every call sends it.

    The answer's ``reasoning`` is read from ``message.reasoning_content`` or ``message.reasoning``,
    which OpenAI-compatible servers (vLLM, DeepSeek, llama.cpp) add; OpenAI itself returns none.

    Raises:
        ConfigurationError: the ``openai`` package is missing, no API key is found, an option
            is not a Chat Completions parameter, or ``compat`` names no known server.
    """

    renderer = OpenAIChatRenderer()
    price_provider = "openai"
    LIMIT_FIELDS = ("max_tokens", "max_completion_tokens")

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = DEFAULT_LLM_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_output_tokens: int | None = None,
        max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
        options: Mapping[str, Any] | None = None,
        client: Any = None,
        compat: ServerCompat | str | None = None,
    ) -> None:
        self.max_tokens_field = max_tokens_field
        if isinstance(compat, str):
            if compat not in SERVER_COMPATS:
                raise ConfigurationError(f"OpenAIChatModel: compat={compat!r} names no known server; "
                                         f"known: {sorted(SERVER_COMPATS)}, or give a ServerCompat")
            compat = SERVER_COMPATS[compat]
        self.compat = compat if compat is not None else ServerCompat()
        super().__init__(model, base_url=base_url, api_key=api_key, timeout_s=timeout_s, max_retries=max_retries,
                         max_output_tokens=max_output_tokens, options=options, client=client)
        if self.compat.tool_choice is not None and "tool_choice" in self.options:
            raise ConfigurationError("OpenAIChatModel: give tool_choice in compat or in options, not both")

    def _adapt(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The payload adapted to the server as :attr:`compat` says."""
        if self.compat == ServerCompat():
            return payload
        payload["messages"] = _adapt_messages(payload["messages"], self.compat)
        if self.compat.tool_choice is not None and payload.get("tools"):
            payload["tool_choice"] = self.compat.tool_choice
        return payload

    def _max_tokens(self, max_output_tokens: int | None) -> dict[str, Any]:
        limit = self.max_output_tokens if max_output_tokens is None else max_output_tokens
        return {} if limit is None else {self.max_tokens_field: limit}

    @staticmethod
    def _create_method(client: Any) -> Any:
        return client.chat.completions.create

    def _parse(self, response: Any) -> ChatResult:
        choices = getattr(response, "choices", None) or []
        if not choices or getattr(choices[0], "message", None) is None:
            raise LLMOutputError(f"{self._where}: the answer has no choices")
        choice = choices[0]
        answer = choice.message
        calls = _tool_calls([
            (call.id, call.function.name, call.function.arguments)
            for call in getattr(answer, "tool_calls", None) or []
            if getattr(call, "function", None) is not None
        ])
        reasoning = next(
            (text for text in (getattr(answer, "reasoning_content", None), getattr(answer, "reasoning", None))
             if isinstance(text, str) and text),
            None,
        )
        content = answer.content if isinstance(answer.content, str) else None
        usage = _openai_usage(getattr(response, "usage", None), "prompt_tokens", "completion_tokens")
        return _result(response, content, calls, reasoning, usage, choice.finish_reason)


_RESPONSES_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


class OpenAIResponsesModel(_SDKChatModel):
    """:class:`ChatModel` on the ``openai`` SDK's Responses API (``client.responses.create``).

    Stateless: every call sends the whole conversation as ``input`` items and ``store`` is not
    set by default (pass ``options={"store": False}`` to keep OpenAI from storing responses).

    Args:
        model, base_url, api_key, timeout_s, max_retries, client: as for :class:`OpenAIChatModel`.
        max_output_tokens: default bound of an answer (``max_output_tokens``), in tokens; ``None``:
            the API's default.
        options: further request fields sent with every call (``{"reasoning": {"effort":
            "low"}}``); each a parameter of ``responses.create`` other than ``input``,
            ``instructions``, ``tools``, ``model``, ``stream``, ``timeout``, ``max_output_tokens``.

    The answer's text is the ``output_text`` parts (and refusals) of its ``message`` items, its
    calls the ``function_call`` items, its ``reasoning`` the ``reasoning`` items' text (their
    ``content``, else their ``summary``). ``finish_reason``: ``"length"`` for an ``incomplete``
    response cut at ``max_output_tokens``, else ``"tool_calls"`` or ``"stop"``.

    Raises:
        ConfigurationError: as for :class:`OpenAIChatModel`.
    """

    renderer = OpenAIResponsesRenderer()
    price_provider = "openai"
    LIMIT_FIELDS = ("max_output_tokens",)

    def _max_tokens(self, max_output_tokens: int | None) -> dict[str, Any]:
        limit = self.max_output_tokens if max_output_tokens is None else max_output_tokens
        return {} if limit is None else {"max_output_tokens": limit}

    @staticmethod
    def _create_method(client: Any) -> Any:
        if getattr(client, "responses", None) is None:
            raise ConfigurationError("OpenAIResponsesModel needs openai>=1.66 (the Responses API)")
        return client.responses.create

    def _parse(self, response: Any) -> ChatResult:
        output = getattr(response, "output", None)
        if not output:
            raise LLMOutputError(f"{self._where}: the response has no output items (status {response.status!r})")
        texts: list[str] = []
        reasoning: list[str] = []
        raw_calls: list[tuple[Any, Any, Any]] = []
        for item in output:
            kind = getattr(item, "type", None)
            if kind == "message":
                for part in getattr(item, "content", None) or []:
                    text = getattr(part, "text", None) if part.type == "output_text" else getattr(part, "refusal", None)
                    if isinstance(text, str):
                        texts.append(text)
            elif kind == "function_call":
                raw_calls.append((item.call_id, item.name, item.arguments))
            elif kind == "reasoning":
                parts = getattr(item, "content", None) or getattr(item, "summary", None) or []
                reasoning += [part.text for part in parts if isinstance(getattr(part, "text", None), str)]
        calls = _tool_calls(raw_calls)
        status = getattr(response, "status", None)
        if status == "incomplete":
            reason = getattr(getattr(response, "incomplete_details", None), "reason", None)
            finish = _finish(reason, _RESPONSES_INCOMPLETE)
        else:
            finish = "tool_calls" if calls else "stop" if status == "completed" else status
        usage = _openai_usage(getattr(response, "usage", None), "input_tokens", "output_tokens")
        return _result(response, "".join(texts), calls, "\n\n".join(reasoning) or None, usage, finish)


_ANTHROPIC_STOP = {
    "end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length",
    "model_context_window_exceeded": "length", "refusal": "content_filter",
}


class AnthropicChatModel(_SDKChatModel):
    """:class:`ChatModel` on the ``anthropic`` SDK's Messages API (``client.messages.create``).

    Args:
        model: the model name (``"claude-sonnet-4-5"``).
        base_url: the API root without ``/v1`` (``"http://127.0.0.1:8080"``); ``None``: the SDK's
            default (``ANTHROPIC_BASE_URL`` or Anthropic).
        api_key: the ``x-api-key``; ``None``: ``ANTHROPIC_API_KEY``.
        timeout_s, max_retries, client: as for :class:`OpenAIChatModel` (``client`` an
            ``anthropic.Anthropic``).
        max_output_tokens: default ``max_tokens`` (the API requires one).
        options: further request fields sent with every call (``{"thinking": ...}``); each a
            parameter of ``messages.create`` other than ``messages``, ``system``, ``tools``,
            ``model``, ``stream``, ``timeout``, ``max_tokens``. A ``cache_control`` option
            (Anthropic's automatic caching) takes one of the four breakpoints.
        cache_breakpoints: place prompt-cache breakpoints (tools and system, the last stable
            message, the previous call's end; :class:`~agent_memory.llm.renderers.AnthropicRenderer`),
            so that each call reads the prompt it shares with the previous one from Anthropic's cache
            (0.1x the input price) and writes only the new part (1.25x); ``False``: none are sent,
            and nothing is cached.

    The answer's text is its ``text`` blocks joined, its calls the ``tool_use`` blocks (``input``
    kept as parsed, ``arguments`` its JSON), its ``reasoning`` the ``thinking`` blocks' text.
    ``usage.prompt_tokens`` = ``input_tokens`` + ``cache_read_input_tokens`` +
    ``cache_creation_input_tokens`` (Anthropic reports the three apart); ``cached_tokens`` =
    ``cache_read_input_tokens``; ``cache_write_tokens`` = ``cache_creation_input_tokens``
    (whatever its cache's lifetime: the renderer asks for the 5-minute cache only).
    ``finish_reason`` maps ``end_turn`` / ``stop_sequence`` →
    ``"stop"``, ``tool_use`` → ``"tool_calls"``, ``max_tokens`` → ``"length"``, ``refusal`` →
    ``"content_filter"``.

    Raises:
        ConfigurationError: the ``anthropic`` package is missing, no API key is found, or an
            option is not a Messages parameter.
    """

    renderer: AnthropicRenderer = AnthropicRenderer()
    price_provider = "anthropic"
    LIMIT_FIELDS = ("max_tokens",)

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = DEFAULT_LLM_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_output_tokens: int = DEFAULT_ANTHROPIC_MAX_OUTPUT_TOKENS,
        options: Mapping[str, Any] | None = None,
        client: Any = None,
        cache_breakpoints: bool = True,
    ) -> None:
        self.renderer = AnthropicRenderer(cache_breakpoints=cache_breakpoints)
        super().__init__(model, base_url=base_url, api_key=api_key, timeout_s=timeout_s, max_retries=max_retries,
                         max_output_tokens=max_output_tokens, options=options, client=client)

    def _sdk_client(
        self, client: Any, base_url: str | None, api_key: str | None, timeout_s: float, max_retries: int
    ) -> tuple[ModuleType, Any]:
        require_extra("anthropic", "AnthropicChatModel")
        import anthropic
        if client is None:
            client = anthropic.Anthropic(base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=max_retries)
        if getattr(client, "api_key", None) is None and getattr(client, "auth_token", None) is None:
            raise ConfigurationError(f"AnthropicChatModel: no api_key given and ANTHROPIC_API_KEY is not set ({NO_MODEL_HINT})")
        return anthropic, client

    def _max_tokens(self, max_output_tokens: int | None) -> dict[str, Any]:
        return {"max_tokens": self.max_output_tokens if max_output_tokens is None else max_output_tokens}

    @staticmethod
    def _create_method(client: Any) -> Any:
        return client.messages.create

    def _parse(self, response: Any) -> ChatResult:
        blocks = getattr(response, "content", None)
        if blocks is None:
            raise LLMOutputError(f"{self._where}: the answer has no content")
        texts: list[str] = []
        reasoning: list[str] = []
        raw_calls: list[tuple[Any, Any, Any]] = []
        for block in blocks:
            kind = getattr(block, "type", None)
            if kind == "text":
                texts.append(block.text)
            elif kind == "tool_use":
                raw_calls.append((block.id, block.name, block.input))
            elif kind == "thinking" and isinstance(getattr(block, "thinking", None), str):
                reasoning.append(block.thinking)
        calls = _tool_calls(raw_calls)
        usage = getattr(response, "usage", None)
        parts = [_count(getattr(usage, name, None)) for name in
                 ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")]
        prompt = None if parts[0] is None else sum(part or 0 for part in parts)
        counts = Usage(prompt_tokens=prompt, completion_tokens=_count(getattr(usage, "output_tokens", None)),
                       cached_tokens=parts[1], cache_write_tokens=parts[2])
        finish = _finish(getattr(response, "stop_reason", None), _ANTHROPIC_STOP)
        return _result(response, "".join(texts), calls, "\n\n".join(reasoning) or None, counts, finish)
