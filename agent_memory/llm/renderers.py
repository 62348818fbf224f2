"""Prompt renderers: provider-neutral messages in, one provider's request payload out
(AutoByteus' prompt renderers, github.com/AutoByteus/autobyteus, autobyteus/memory/).

A :class:`PromptRenderer` is a pure function in a class: :meth:`~PromptRenderer.render` reads
:class:`~agent_memory.models.messages.Message` s (oldest first) and tool definitions and returns
the keyword arguments of the provider SDK's create call, with no I/O and no state; the same input
gives the same payload, key order included. Three are built in:

=========================  =====================================  ==============================
renderer                   payload for                            system prompt
=========================  =====================================  ==============================
OpenAIChatRenderer         ``client.chat.completions.create``     ``system`` messages, in place
OpenAIResponsesRenderer    ``client.responses.create``            ``instructions``
AnthropicRenderer          ``anthropic_client.messages.create``   top-level ``system``
=========================  =====================================  ==============================

Tool definitions come in OpenAI's format, the canonical one here
(``{"type": "function", "function": {"name", "description", "parameters", "strict"}}``, or the
same keys without the ``function`` wrapper) and are converted per provider (:func:`tool_spec`).

What no renderer sends:

- ``Message.reasoning``: Chat Completions has no field for it; a Responses ``reasoning`` item and
  an Anthropic ``thinking`` block are only accepted back with the provider's own item id,
  encrypted content or signature, which a message does not keep. Models re-reason from the
  visible conversation.
- ``Message.name``, ``id``, ``ts``, ``turn_id``, ``seq``: bookkeeping, not prompt.
- ``is_error`` to OpenAI: neither OpenAI API has the flag; the result's text (which says what
  failed) is sent as is. Anthropic gets ``tool_result.is_error``.

Prompt caching: OpenAI caches every prompt prefix of 1,024 tokens or more by itself, so the
OpenAI payloads carry nothing for it. Anthropic caches only up to the ``cache_control``
breakpoints a request places; :class:`AnthropicRenderer` places them (on by default, see its
docstring for where and why; ``AnthropicRenderer(cache_breakpoints=False)`` sends none).

Refused with :class:`~agent_memory.errors.InvalidArgumentError` (programming errors, never
dropped silently): a tool message whose result is still only a ``tool_result_ref`` (resolve it
first, e.g. with :class:`~agent_memory.presentation.context.ContextBuilder`), audio or video
(not rendered yet), images in a Chat Completions tool message (the API takes text only there),
a malformed tool definition, and an option that would overwrite a rendered key.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from agent_memory.errors import InvalidArgumentError
from agent_memory.models.messages import Message

__all__ = [
    "ANTHROPIC_CACHE_CONTROL",
    "MAX_CACHE_BREAKPOINTS",
    "AnthropicRenderer",
    "OpenAIChatRenderer",
    "OpenAIResponsesRenderer",
    "PromptRenderer",
    "ToolSpec",
    "tool_spec",
]

EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
"""The JSON schema sent for a tool without ``parameters`` where the provider requires one."""

SYSTEM_SEPARATOR = "\n\n"
"""What joins several system messages where the provider takes one system text."""

ANTHROPIC_CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}
"""The ``cache_control`` of each breakpoint :class:`AnthropicRenderer` places: Anthropic's default
5-minute cache (the one :mod:`agent_memory.pricing` prices writes of)."""

MAX_CACHE_BREAKPOINTS = 4
"""Most ``cache_control`` breakpoints Anthropic takes in one request (more is an HTTP 400)."""


@runtime_checkable
class PromptRenderer(Protocol):
    """Turns messages into one provider's request payload; pure (no I/O, no state)."""

    def render(
        self, messages: Sequence[Message], *, tool_definitions: Sequence[Mapping[str, Any]] | None = None, **options: Any
    ) -> dict[str, Any]:
        """The keyword arguments of the provider's create call.

        Args:
            messages: the whole conversation of the call, oldest first.
            tool_definitions: tool definitions in OpenAI format (see :func:`tool_spec`); ``None`` or empty:
                no ``tools`` key.
            options: further top-level fields copied verbatim (``model``, ``max_tokens``,
                ``temperature``, ...), placed before the rendered keys.

        Raises:
            InvalidArgumentError: a message or tool the provider cannot take (see the module
                docstring), or an option named like a rendered key.
        """
        ...


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool definition, provider-neutral (what :func:`tool_spec` reads from an OpenAI tool)."""

    name: str
    """The tool's name, as the model calls it."""
    description: str | None
    """What the tool does, for the model; ``None``: none given."""
    parameters: dict[str, Any] | None
    """JSON schema of the arguments (an ``object`` schema); ``None``: none given."""
    strict: bool | None
    """OpenAI's strict schema adherence; ``None``: not set."""


def tool_spec(tool: Mapping[str, Any]) -> ToolSpec:
    """Read one tool definition in OpenAI format.

    Accepted: the Chat Completions form ``{"type": "function", "function": {"name": ...,
    "description": ..., "parameters": {...}, "strict": ...}}`` and the flat (Responses) form with
    the same keys at the top level. Only ``name`` is required. ``parameters`` is deep-copied, so a
    payload never aliases the caller's dicts.

    Raises:
        InvalidArgumentError: not a mapping, another tool type, no name, or fields of the wrong
            type.
    """
    if not isinstance(tool, Mapping):
        raise InvalidArgumentError(f"a tool definition must be a dict, not {type(tool).__name__}")
    if tool.get("type", "function") != "function":
        raise InvalidArgumentError(f"only function tools can be rendered, not type {tool.get('type')!r}")
    function = tool.get("function", tool)
    if not isinstance(function, Mapping):
        raise InvalidArgumentError("a tool's 'function' must be a dict")
    name, description = function.get("name"), function.get("description")
    parameters, strict = function.get("parameters"), function.get("strict")
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError("a tool definition needs a non-empty string 'name'")
    if description is not None and not isinstance(description, str):
        raise InvalidArgumentError(f"tool {name!r}: 'description' must be a string")
    if parameters is not None and not isinstance(parameters, Mapping):
        raise InvalidArgumentError(f"tool {name!r}: 'parameters' must be a JSON schema object (a dict)")
    if strict is not None and not isinstance(strict, bool):
        raise InvalidArgumentError(f"tool {name!r}: 'strict' must be true or false")
    return ToolSpec(name, description, None if parameters is None else copy.deepcopy(dict(parameters)), strict)


def _specs(tool_definitions: Sequence[Mapping[str, Any]] | None) -> list[ToolSpec]:
    specs = [tool_spec(tool) for tool in tool_definitions or ()]
    names = [spec.name for spec in specs]
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"two tools are named {next(n for n in names if names.count(n) > 1)!r}")
    return specs


def _with_tools(
    rendered: dict[str, Any], tool_definitions: Sequence[Mapping[str, Any]] | None, tool: Callable[[ToolSpec], dict[str, Any]]
) -> None:
    """Set ``rendered["tools"]`` to the tool definitions, each in a provider's form (``tool``, a
    renderer's :meth:`tool`), when any is given; no ``"tools"`` key otherwise."""
    specs = _specs(tool_definitions)
    if specs:
        rendered["tools"] = [tool(spec) for spec in specs]


def _named(spec: ToolSpec) -> dict[str, Any]:
    """A tool's ``name``, then its ``description`` when it has one: how each provider's form starts."""
    out: dict[str, Any] = {"name": spec.name}
    if spec.description is not None:
        out["description"] = spec.description
    return out


def _schema(spec: ToolSpec) -> dict[str, Any]:
    """A tool's parameters schema; an empty ``object`` schema (a fresh copy) when it has none."""
    return spec.parameters if spec.parameters is not None else copy.deepcopy(EMPTY_PARAMETERS)


def _with_options(rendered: dict[str, Any], options: Mapping[str, Any], reserved: tuple[str, ...]) -> dict[str, Any]:
    clash = sorted(set(options) & set(reserved))
    if clash:
        raise InvalidArgumentError(f"option {clash[0]!r} is rendered from the messages and tools; do not pass it")
    return {**options, **rendered}


def _checked(messages: Sequence[Message]) -> Sequence[Message]:
    """The messages, after checks every renderer shares."""
    for n, message in enumerate(messages):
        if not isinstance(message, Message):
            raise InvalidArgumentError(f"messages[{n}] is a {type(message).__name__}, not a Message")
        if message.role == "tool" and message.content is None:
            raise InvalidArgumentError(
                f"messages[{n}] (tool result for {message.tool_call_id!r}) holds only tool_result_ref "
                f"{message.tool_result_ref!r}: resolve it to content before rendering (ContextBuilder.build)"
            )
        if message.media.audio or message.media.video:
            raise InvalidArgumentError(f"messages[{n}] has audio or video, which no renderer sends yet")
    return messages


# -- OpenAI Chat Completions -----------------------------------------------------------------------


class OpenAIChatRenderer:
    """Payload for OpenAI Chat Completions (and every OpenAI-compatible server).

    ``{"messages": [...], "tools": [...]}``: ``system`` / ``user`` / ``assistant`` / ``tool``
    messages in order; an assistant's calls as ``tool_calls`` ``[{"id", "type": "function",
    "function": {"name", "arguments"}}]`` (``arguments`` the raw string, ``content`` ``None``
    when the message only calls tools); a result as ``{"role": "tool", "tool_call_id",
    "content"}``; a user message with images as content parts (the text, then one
    ``{"type": "image_url", "image_url": {"url"}}`` per image). Tools as
    ``{"type": "function", "function": {"name", "description", "parameters", "strict"}}`` (keys
    given only).
    """

    RESERVED = ("messages", "tools")
    """Keys the renderer writes; options may not set them."""

    def render(
        self, messages: Sequence[Message], *, tool_definitions: Sequence[Mapping[str, Any]] | None = None, **options: Any
    ) -> dict[str, Any]:
        """See :meth:`PromptRenderer.render`."""
        out = [self._message(n, m) for n, m in enumerate(_checked(messages))]
        rendered: dict[str, Any] = {"messages": out}
        _with_tools(rendered, tool_definitions, self.tool)
        return _with_options(rendered, options, self.RESERVED)

    @staticmethod
    def tool(spec: ToolSpec) -> dict[str, Any]:
        """One tool in the Chat Completions form."""
        function = _named(spec)
        if spec.parameters is not None:
            function["parameters"] = spec.parameters
        if spec.strict is not None:
            function["strict"] = spec.strict
        return {"type": "function", "function": function}

    @staticmethod
    def _message(n: int, message: Message) -> dict[str, Any]:
        if message.role == "assistant":
            out: dict[str, Any] = {"role": "assistant", "content": message.content}
            if message.tool_calls:
                out["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in message.tool_calls
                ]
            elif message.content is None:
                out["content"] = ""
            return out
        if message.role == "tool":
            if message.media.images:
                raise InvalidArgumentError(
                    f"messages[{n}]: Chat Completions tool messages carry text only; send the images in a "
                    "user message after the tool results"
                )
            return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
        text = message.content or ""
        if not message.media.images:
            return {"role": message.role, "content": text}
        parts: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        parts += [{"type": "image_url", "image_url": {"url": url}} for url in message.media.images]
        return {"role": message.role, "content": parts}


# -- OpenAI Responses --------------------------------------------------------------------------------


class OpenAIResponsesRenderer:
    """Payload for the OpenAI Responses API (``client.responses.create``).

    ``{"instructions": ..., "input": [...], "tools": [...]}``: the leading system messages become
    ``instructions`` (joined by a blank line); a later system message stays in place as a
    ``message`` item of role ``system``. Items, in order: ``{"type": "message", "role": "user",
    "content": [input_text, input_image...]}``; an assistant's text as ``{"type": "message",
    "role": "assistant", "content": "<text>"}`` (the SDK's ``EasyInputMessageParam``: a list of
    ``output_text`` parts is typed only for output messages, which need the provider's item id
    and status) followed by one ``{"type": "function_call", "call_id", "name", "arguments"}``
    per call; a result as
    ``{"type": "function_call_output", "call_id", "output"}`` (``output`` the text, or a list of
    ``input_text`` / ``input_image`` parts when the result has images). Images go as
    ``{"type": "input_image", "image_url", "detail": "auto"}``. Tools as ``{"type": "function",
    "name", "description", "parameters", "strict"}``: ``parameters`` defaults to an empty object
    schema and ``strict`` to ``false`` (the Responses API would otherwise default to strict
    schemas, unlike Chat Completions).
    """

    RESERVED = ("input", "instructions", "tools")
    """Keys the renderer writes; options may not set them."""

    def render(
        self, messages: Sequence[Message], *, tool_definitions: Sequence[Mapping[str, Any]] | None = None, **options: Any
    ) -> dict[str, Any]:
        """See :meth:`PromptRenderer.render`."""
        messages = _checked(messages)
        lead = 0
        while lead < len(messages) and messages[lead].role == "system":
            lead += 1
        instructions = SYSTEM_SEPARATOR.join(m.content for m in messages[:lead] if m.content)
        items: list[dict[str, Any]] = []
        for message in messages[lead:]:
            items.extend(self._items(message))
        rendered: dict[str, Any] = {}
        if instructions:
            rendered["instructions"] = instructions
        rendered["input"] = items
        _with_tools(rendered, tool_definitions, self.tool)
        return _with_options(rendered, options, self.RESERVED)

    @staticmethod
    def tool(spec: ToolSpec) -> dict[str, Any]:
        """One tool in the Responses form."""
        return {"type": "function", **_named(spec), "parameters": _schema(spec), "strict": bool(spec.strict)}

    @staticmethod
    def _parts(message: Message) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        if message.content or not message.media.images:
            parts.append({"type": "input_text", "text": message.content or ""})
        parts += [{"type": "input_image", "image_url": url, "detail": "auto"} for url in message.media.images]
        return parts

    def _items(self, message: Message) -> list[dict[str, Any]]:
        if message.role == "assistant":
            items: list[dict[str, Any]] = []
            if message.content or not message.tool_calls:
                items.append({"type": "message", "role": "assistant", "content": message.content or ""})
            items += [{"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
                      for c in message.tool_calls]
            return items
        if message.role == "tool":
            output: str | list[dict[str, Any]] = self._parts(message) if message.media.images else message.content or ""
            return [{"type": "function_call_output", "call_id": message.tool_call_id, "output": output}]
        return [{"type": "message", "role": message.role, "content": self._parts(message)}]


# -- Anthropic Messages ------------------------------------------------------------------------------


def _anthropic_image(url: str) -> dict[str, Any]:
    if not url.startswith("data:"):
        return {"type": "image", "source": {"type": "url", "url": url}}
    header, _, data = url[5:].partition(",")
    media_type, _, encoding = header.partition(";")
    if encoding != "base64" or not media_type or not data:
        raise InvalidArgumentError(
            f"image {url[:40]!r}…: Anthropic takes data URLs only as data:<type>;base64,<data>"
        )
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


class AnthropicRenderer:
    """Payload for Anthropic's Messages API (``anthropic_client.messages.create``).

    ``{"system": ..., "messages": [...], "tools": [...]}``: the leading system messages go into the
    top-level ``system`` text (joined by a blank line: the API has no system role in the
    conversation). An assistant message is ``[text, tool_use...]`` blocks, a call as
    ``{"type": "tool_use", "id", "name", "input"}`` (``input`` ``{}`` when the model's arguments
    were not a JSON object: the API takes only objects); a result is a ``{"type": "tool_result",
    "tool_use_id", "content", "is_error"}`` block in a *user* message (``content`` a list of text
    and image blocks when the result has images). Consecutive messages of the same role are merged
    into one message with several blocks, as the API requires alternating roles, so parallel calls
    share one assistant message and their results one user message; within a user message the
    ``tool_result`` blocks come first, as the API requires. Images are ``{"type": "image",
    "source": {"type": "url", "url"}}`` (a ``data:`` URL becomes a ``base64`` source) and come
    before the text of their message, as Anthropic recommends. Empty text blocks are left out (the
    API refuses them), and so is a message left with no block. Tools as ``{"name", "description",
    "input_schema"}``.

    **Prompt caching** (``cache_breakpoints=True``, the default). Anthropic reads a prompt prefix
    from its cache only up to a block marked ``"cache_control": {"type": "ephemeral"}`` that an
    earlier request (within 5 minutes) marked at the same place, the prefix running in the order
    tools, system, messages; it looks for such an earlier entry at each breakpoint and up to 20
    blocks before it, and takes at most :data:`MAX_CACHE_BREAKPOINTS` (4) per request. Unmarked,
    nothing is cached and every call pays the whole prompt. The breakpoints, in this order of
    priority:

    1. the last block of the conversation, leaving out trailing system messages (the *last stable
       message*): the next call, which repeats this prompt and adds to it, reads all of it;
    2. the ``system`` block (or the last tool when there is no system prompt): tools and system
       stay cached when the conversation is rewritten from its start;
    3. the last block of the last assistant message: where the next prompt parts from this one
       when results shown in full for the first time (the newest, after that message) are swapped
       for their citations (:mod:`agent_memory.presentation.rewrites`); the next call reads all of
       this prompt up to them;
    4. the last block of the user message before the last assistant message, which ended the
       previous call's prompt in a tool loop: an exact hit on the previous call's entry, however
       many blocks the last answer and its results added (the 20-block look-back would miss it
       after many parallel calls);
    5. the last tool, when there is also a system prompt: the tools stay cached when only the
       system prompt changes (with four breakpoints at most, placed only when one of the above is
       missing).

    A request-level ``cache_control`` option (Anthropic's automatic caching, which marks the last
    block itself) takes one of the four places, so then three at most are placed. With caching on,
    ``system`` is sent as a list of one ``text`` block (the form that carries ``cache_control``),
    and a system message that comes after the conversation has started (the kernel's
    soft-pressure note, appended at the end and changing from call to call) is sent where it
    stands, as a ``text`` block of a user message, instead of joining ``system``: in ``system`` it
    would change the start of the prompt and so the whole cached prefix. Breakpoints on a prefix
    shorter than the model's minimum (1,024 tokens for Sonnet, more for some models) are ignored
    by the API, at no charge. The markers are not part of what is cached: a prefix marked in one
    call is read by the next, where it is no longer the last block.

    Args:
        cache_breakpoints: place the breakpoints above (the default); ``False``: no
            ``cache_control`` anywhere, ``system`` a plain string holding every system message
            (the payload before caching existed).

    The caller adds ``model`` and ``max_tokens`` (the SDK requires both) as options.
    """

    RESERVED = ("messages", "system", "tools")
    """Keys the renderer writes; options may not set them."""

    def __init__(self, *, cache_breakpoints: bool = True) -> None:
        self.cache_breakpoints = cache_breakpoints

    def __repr__(self) -> str:
        return f"AnthropicRenderer(cache_breakpoints={self.cache_breakpoints})"

    def render(
        self, messages: Sequence[Message], *, tool_definitions: Sequence[Mapping[str, Any]] | None = None, **options: Any
    ) -> dict[str, Any]:
        """See :meth:`PromptRenderer.render`."""
        caching = self.cache_breakpoints
        system: list[str] = []
        turns: list[dict[str, Any]] = []
        notes: set[int] = set()  # id() of the blocks of trailing system messages
        checked = _checked(messages)
        spoken = [n for n, m in enumerate(checked) if m.role != "system"]  # the conversation's messages
        for n, message in enumerate(checked):
            late = caching and bool(spoken) and n > spoken[0]  # a system message after the conversation began
            if message.role == "system" and not late:
                if message.content:
                    system.append(message.content)
                continue
            role = "assistant" if message.role == "assistant" else "user"
            if message.role == "system":  # kept in place, as user text, not to change the cached start
                blocks: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
                if n > spoken[-1]:
                    notes.update(id(block) for block in blocks)
            else:
                blocks = self._blocks(message)
            if turns and turns[-1]["role"] == role:
                turns[-1]["content"].extend(blocks)
            else:
                turns.append({"role": role, "content": blocks})
        for turn in turns:
            if turn["role"] == "user":  # tool results first, otherwise in order
                turn["content"].sort(key=lambda block: block["type"] != "tool_result")
        rendered: dict[str, Any] = {}
        if system:
            text = SYSTEM_SEPARATOR.join(system)
            rendered["system"] = [{"type": "text", "text": text}] if caching else text
        rendered["messages"] = [turn for turn in turns if turn["content"]]
        _with_tools(rendered, tool_definitions, self.tool)
        if caching:
            slots = MAX_CACHE_BREAKPOINTS - (1 if options.get("cache_control") is not None else 0)
            for block in _breakpoints(rendered, notes)[:slots]:
                block["cache_control"] = dict(ANTHROPIC_CACHE_CONTROL)
        return _with_options(rendered, options, self.RESERVED)

    @staticmethod
    def tool(spec: ToolSpec) -> dict[str, Any]:
        """One tool in the Anthropic form (``strict`` is not sent)."""
        return {**_named(spec), "input_schema": _schema(spec)}

    @staticmethod
    def _blocks(message: Message) -> list[dict[str, Any]]:
        text = [{"type": "text", "text": message.content}] if message.content else []
        images = [_anthropic_image(url) for url in message.media.images]
        if message.role == "assistant":
            return text + [{"type": "tool_use", "id": c.id, "name": c.name, "input": copy.deepcopy(c.input or {})}
                           for c in message.tool_calls]
        if message.role == "tool":
            content: str | list[dict[str, Any]] = text + images if images else message.content or ""
            return [{"type": "tool_result", "tool_use_id": message.tool_call_id, "content": content,
                     "is_error": message.is_error}]
        return images + text


def _breakpoints(rendered: dict[str, Any], notes: set[int]) -> list[dict[str, Any]]:
    """The blocks of an Anthropic payload to mark with ``cache_control``, most useful first
    (:class:`AnthropicRenderer`'s list), each once; ``notes``: ``id()`` s of trailing system
    blocks, which change from call to call and are never marked."""
    turns: list[dict[str, Any]] = rendered["messages"]
    tool_definitions: list[dict[str, Any]] = rendered.get("tools", [])
    system: list[dict[str, Any]] = rendered.get("system", [])

    def last_stable(turn: dict[str, Any]) -> dict[str, Any] | None:
        return next((block for block in reversed(turn["content"]) if id(block) not in notes), None)

    stable = [(n, block) for n, turn in enumerate(turns) if (block := last_stable(turn)) is not None]
    candidates: list[dict[str, Any] | None] = [stable[-1][1] if stable else None]
    candidates.append(system[-1] if system else tool_definitions[-1] if tool_definitions else None)
    answers = [n for n, turn in enumerate(turns) if turn["role"] == "assistant"]
    if answers:
        candidates.append(last_stable(turns[answers[-1]]))
    if answers and answers[-1] > 0 and turns[answers[-1] - 1]["role"] == "user":
        candidates.append(last_stable(turns[answers[-1] - 1]))
    if system and tool_definitions:
        candidates.append(tool_definitions[-1])
    chosen: list[dict[str, Any]] = []
    for block in candidates:
        if block is not None and all(block is not other for other in chosen):
            chosen.append(block)
    return chosen
