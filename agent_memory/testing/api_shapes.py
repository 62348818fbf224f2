"""What :class:`~agent_memory.testing.FakeLLMServer` accepts: the shape of a request to each of the
three APIs it serves, and the error body each API answers a bad request with.

The request shapes are pydantic models of the parts of a request the fake (and the stand-in model
behind it) read, and of what each API requires: OpenAI Chat Completions (``model`` and
``messages``, a non-empty list of objects each with a ``role`` and, but for an assistant's, a
``content``; ``tools`` a list of function or custom tools), the OpenAI Responses API (``input`` a
string or a list of items: messages with roles, function calls and their outputs; ``tools``) and
Anthropic's Messages API (``model``, ``max_tokens`` and ``messages`` of ``user`` / ``assistant``
turns whose content is a string or a list of blocks; ``system``; ``tools``). They follow the
providers' references and the request types of their SDKs (``openai.types.chat.
completion_create_params``, ``openai.types.responses.response_create_params``,
``anthropic.types.message_create_params``), checking less than the providers do: a field no route
reads is passed through unchecked (``temperature``, ``stream``, a content part's image), and an
item, block, part or tool of a kind not modelled here needs only a string ``type``.

The error bodies are each API's own: OpenAI's ``{"error": {"message", "type", "param", "code"}}``
(``openai.types.shared.ErrorObject``; ``param`` names the field as OpenAI does,
``messages[0].content``) and Anthropic's ``{"type": "error", "error": {"type", "message"}}``
(platform.claude.com/docs/en/api/errors; the message starts with the field's dotted path,
``messages.0.content: ...``, as Anthropic's do).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

__all__ = [
    "ANTHROPIC_ROUTE",
    "CHAT_ROUTE",
    "MAX_BODY_DEPTH",
    "RESPONSES_ROUTE",
    "RequestProblem",
    "error_body",
    "request_problem",
]

CHAT_ROUTE = "/v1/chat/completions"
RESPONSES_ROUTE = "/v1/responses"
ANTHROPIC_ROUTE = "/v1/messages"

MAX_BODY_DEPTH = 128
"""Deepest nesting of arrays and objects a request body may have (a tool's JSON schema nests a few
levels; the deepest legitimate request is far below this). Deeper bodies are refused with a 400
before anything walks them."""


class _Shape(BaseModel):
    """A part of a request: the fields named are checked, any other is kept unchecked."""

    model_config = ConfigDict(extra="allow")


def _kind(field: str, tags: dict[str, str], *, default: str | None = None) -> Any:
    """A discriminator that routes a dict by the value of its ``field`` to the model tagged
    ``tags[value]``, and anything else to the catch-all tagged ``"other"`` (which then says what is
    wrong: not an object, no string ``type``); ``default``: the value of an absent field."""

    def pick(value: Any) -> str:
        found = value.get(field, default) if isinstance(value, dict) else None
        return tags.get(found, "other") if isinstance(found, str) else "other"

    return Discriminator(pick)


# -- parts and content shared by the OpenAI routes ----------------------------------------------------


class _TextPart(_Shape):
    type: Literal["text", "input_text", "output_text"]
    text: str


class _Part(_Shape):
    """A content part of another kind (an image, a file, a refusal, audio): only its ``type``."""

    type: str


_OpenAIPart = Annotated[
    Annotated[_TextPart, Tag("text")] | Annotated[_Part, Tag("other")],
    _kind("type", dict.fromkeys(("text", "input_text", "output_text"), "text")),
]
_OpenAIContent = str | list[_OpenAIPart]

# -- OpenAI Chat Completions -------------------------------------------------------------------------


class _ChatFunctionCall(_Shape):
    name: str
    arguments: str


class _ChatToolCall(_Shape):
    id: str
    type: Literal["function"]
    function: _ChatFunctionCall


class _ChatCustomToolCall(_Shape):
    id: str
    type: Literal["custom"]
    custom: dict[str, Any]


class _ChatInstruction(_Shape):
    role: Literal["system", "developer"]
    content: _OpenAIContent


class _ChatUser(_Shape):
    role: Literal["user"]
    content: _OpenAIContent


class _ChatAssistant(_Shape):
    role: Literal["assistant"]
    content: _OpenAIContent | None = None
    tool_calls: list[Annotated[_ChatToolCall | _ChatCustomToolCall, Field(discriminator="type")]] | None = None


class _ChatToolResult(_Shape):
    role: Literal["tool"]
    content: _OpenAIContent
    tool_call_id: str


class _ChatFunctionResult(_Shape):
    role: Literal["function"]
    name: str
    content: str | None


class _ChatFunction(_Shape):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class _ChatFunctionTool(_Shape):
    type: Literal["function"]
    function: _ChatFunction


class _ChatCustomTool(_Shape):
    type: Literal["custom"]
    custom: dict[str, Any]


class _ChatRequest(_Shape):
    model: str
    messages: Annotated[
        list[Annotated[_ChatInstruction | _ChatUser | _ChatAssistant | _ChatToolResult | _ChatFunctionResult,
                       Field(discriminator="role")]],
        Field(min_length=1),
    ]
    tools: list[Annotated[_ChatFunctionTool | _ChatCustomTool, Field(discriminator="type")]] | None = None


# -- the OpenAI Responses API ------------------------------------------------------------------------


class _ResponsesMessage(_Shape):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: _OpenAIContent


class _ResponsesFunctionCall(_Shape):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str


class _ResponsesFunctionOutput(_Shape):
    type: Literal["function_call_output"]
    call_id: str
    output: _OpenAIContent


class _ResponsesItem(_Shape):
    """An input item of another kind (reasoning, an item reference, a built-in tool's call)."""

    type: str


class _ResponsesFunctionTool(_Shape):
    type: Literal["function"]
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class _ResponsesTool(_Shape):
    """A built-in tool (web search, file search, MCP, ...): only its ``type``."""

    type: str


_ITEM_KINDS = {kind: kind for kind in ("message", "function_call", "function_call_output")}


class _ResponsesRequest(_Shape):
    model: str | None = None
    instructions: str | None = None
    input: str | list[Annotated[
        Annotated[_ResponsesMessage, Tag("message")] | Annotated[_ResponsesFunctionCall, Tag("function_call")]
        | Annotated[_ResponsesFunctionOutput, Tag("function_call_output")] | Annotated[_ResponsesItem, Tag("other")],
        _kind("type", _ITEM_KINDS, default="message"),
    ]] | None = None
    tools: list[Annotated[
        Annotated[_ResponsesFunctionTool, Tag("function")] | Annotated[_ResponsesTool, Tag("other")],
        _kind("type", {"function": "function"}),
    ]] | None = None


# -- Anthropic Messages ------------------------------------------------------------------------------


class _TextBlock(_Shape):
    type: Literal["text"]
    text: str


class _Block(_Shape):
    """A content block of another kind (an image, a document, thinking): only its ``type``."""

    type: str


_AnthropicResultBlock = Annotated[
    Annotated[_TextBlock, Tag("text")] | Annotated[_Block, Tag("other")], _kind("type", {"text": "text"}),
]


class _ToolUseBlock(_Shape):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class _ToolResultBlock(_Shape):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[_AnthropicResultBlock] | None = None
    is_error: bool | None = None


_AnthropicBlock = Annotated[
    Annotated[_TextBlock, Tag("text")] | Annotated[_ToolUseBlock, Tag("tool_use")]
    | Annotated[_ToolResultBlock, Tag("tool_result")] | Annotated[_Block, Tag("other")],
    _kind("type", {kind: kind for kind in ("text", "tool_use", "tool_result")}),
]


class _AnthropicMessage(_Shape):
    role: Literal["user", "assistant"]
    content: str | list[_AnthropicBlock]


class _AnthropicCustomTool(_Shape):
    type: Literal["custom"] | None = None
    name: str
    description: str | None = None
    input_schema: dict[str, Any]


class _AnthropicTypedTool(_Shape):
    """A tool Anthropic defines, sent by type (``memory_20250818``, ``web_search_20250305``)."""

    type: str
    name: str


def _anthropic_tool_kind(value: Any) -> str:
    return "custom" if isinstance(value, dict) and value.get("type") in (None, "custom") else "other"


class _AnthropicRequest(_Shape):
    model: str
    max_tokens: int
    messages: Annotated[list[_AnthropicMessage], Field(min_length=1)]
    system: str | list[_TextBlock] | None = None
    tools: list[Annotated[
        Annotated[_AnthropicCustomTool, Tag("custom")] | Annotated[_AnthropicTypedTool, Tag("other")],
        Discriminator(_anthropic_tool_kind),
    ]] | None = None
    cache_control: dict[str, Any] | None = None


_SHAPES: dict[str, TypeAdapter[Any]] = {
    CHAT_ROUTE: TypeAdapter(_ChatRequest),
    RESPONSES_ROUTE: TypeAdapter(_ResponsesRequest),
    ANTHROPIC_ROUTE: TypeAdapter(_AnthropicRequest),
}


# -- what is wrong, and how each API says so ---------------------------------------------------------


@dataclass(frozen=True)
class RequestProblem:
    """Why a request body does not have its API's shape."""

    message: str
    """What is wrong, for the client, in the wording of the API asked (see :func:`error_body`)."""
    param: str | None
    """The field at fault as OpenAI names it (``messages[0].content``); ``None``: the whole body."""
    code: str | None
    """OpenAI's error code: ``missing_required_parameter``, ``invalid_type``, ``invalid_value``;
    ``None`` for Anthropic's route (its errors have none) and for a body nested too deeply."""


def _too_deep(value: Any, limit: int) -> bool:
    """Whether JSON data nests arrays and objects more than ``limit`` levels (walked without
    recursion, so any depth the JSON parser accepted is safe to check)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def _path(body: Any, loc: tuple[int | str, ...], *, missing: bool) -> list[int | str]:
    """The keys and indexes of ``loc`` that step into ``body``: pydantic's location also names the
    union member tried (``user``, ``str``, ``list[...]``), which is no field of the request; a
    missing field (``missing``) is the last step, though absent from the data."""
    path: list[int | str] = []
    here = body
    for n, step in enumerate(loc):
        if isinstance(here, dict) and isinstance(step, str) and step in here:
            here = here[step]
        elif isinstance(here, list) and isinstance(step, int) and 0 <= step < len(here):
            here = here[step]
        elif not (missing and n == len(loc) - 1):
            continue
        path.append(step)
    return path


def _openai_param(path: list[int | str]) -> str | None:
    if not path:
        return None
    return "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in path).lstrip(".")


_OBJECT_TYPES = frozenset({"model_type", "model_attributes_type", "dict_type"})
"""pydantic's error types for "not an object"; their messages name our private models."""


@dataclass(frozen=True)
class _Fault:
    """One pydantic error, told in terms of the request."""

    path: list[int | str]
    """The keys and indexes of the field at fault in the body."""
    reason: str
    missing: bool
    """The field is absent."""
    kind: str
    """pydantic's error type (``string_type``, ``missing``, ``too_short``, ...)."""


def _fault(body: Any, error: ErrorDetails) -> _Fault:
    """``error`` as a :class:`_Fault` of ``body``; the fault of a union told apart by a field (a
    message by its ``role``) is that field's."""
    kind = error["type"]
    loc = tuple(error["loc"])
    if kind in ("union_tag_not_found", "union_tag_invalid"):  # the discriminating field: absent, unknown
        loc = (*loc, str(error.get("ctx", {}).get("discriminator", "")).strip("'"))
    missing = kind in ("missing", "union_tag_not_found")
    reason = "Input should be an object" if kind in _OBJECT_TYPES else error["msg"]
    return _Fault(_path(body, loc, missing=missing), reason, missing, kind)


def request_problem(route: str, body: Any) -> RequestProblem | None:
    """What is wrong with the JSON ``body`` of a request to ``route`` (:data:`CHAT_ROUTE`,
    :data:`RESPONSES_ROUTE` or :data:`ANTHROPIC_ROUTE`); ``None``: it has the API's shape (module
    docstring) and nests no deeper than :data:`MAX_BODY_DEPTH`.

    One field is reported, the most deeply nested one at fault, with every reason it fails (a
    content that is neither a string nor a list says both).

    Raises:
        KeyError: ``route`` is not one of the three.
    """
    shape = _SHAPES[route]
    if _too_deep(body, MAX_BODY_DEPTH):
        return RequestProblem(f"the request body nests deeper than {MAX_BODY_DEPTH} levels", None, None)
    try:
        shape.validate_python(body)
    except ValidationError as exc:
        faults = [_fault(body, error) for error in exc.errors(include_url=False, include_input=False)]
        first = max(faults, key=lambda fault: len(fault.path))  # the first of the deepest
        reason = " or ".join(dict.fromkeys(fault.reason for fault in faults if fault.path == first.path))
        param = _openai_param(first.path)
        if route == ANTHROPIC_ROUTE:
            return RequestProblem(f"{'.'.join(map(str, first.path)) or 'body'}: {reason}", param, None)
        if first.missing:
            return RequestProblem(f"Missing required parameter: '{param}'.", param, "missing_required_parameter")
        code = "invalid_type" if first.kind.endswith("_type") else "invalid_value"
        where = f"'{param}'" if param else "the request body"
        return RequestProblem(f"Invalid {code.removeprefix('invalid_')} for {where}: {reason}.", param, code)
    return None


def error_body(route: str, message: str, *, status: int, param: str | None = None, code: str | int | None = None,
               kind: str | None = None) -> dict[str, Any]:
    """The JSON body of an error answer in the shape of the API at ``route``: Anthropic's for
    :data:`ANTHROPIC_ROUTE`, OpenAI's for any other route (an unknown one too).

    Args:
        route: the request's path.
        message: what went wrong, for the client.
        status: the HTTP status; it decides the error's ``type`` unless ``kind`` does (400, 411:
            ``invalid_request_error``; 404: ``not_found_error`` for Anthropic,
            ``invalid_request_error`` for OpenAI; 413: ``request_too_large`` for Anthropic; any
            other 4xx ``invalid_request_error``; 5xx ``api_error`` for Anthropic, ``server_error``
            for OpenAI), as each provider documents its types.
        param: OpenAI's ``param``, the field at fault; ``None``: none (also for Anthropic, whose
            errors have no such field).
        code: OpenAI's ``code`` (a string, but the status a scripted error of the fake sends);
            ``None``: none.
        kind: the error ``type`` to send instead of the status's.
    """
    if route == ANTHROPIC_ROUTE:
        default = {404: "not_found_error", 413: "request_too_large"}.get(status, "invalid_request_error")
        kind = kind or (default if status < 500 else "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind = kind or ("invalid_request_error" if status < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
