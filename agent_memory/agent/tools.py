"""The agent's own tools: plain typed Python functions become tools a model can call.

:class:`FunctionTool` reads a function's signature and docstring: the parameters become a pydantic
model (its JSON schema is the tool's parameter schema, as for the memory actions), the docstring's
first paragraph the description, and its ``Args:`` section the parameters' descriptions (Google
style). A call's arguments are validated before the function runs; a model's mistake (malformed
JSON, a missing or wrongly typed argument) and an exception inside the function become a
:class:`ToolFailure` the agent loop sends back to the model as an error result, never an exception
out of the loop.

What the function returns is a tool result like any other: the agent stores it in memory and the
presentation policy shows it in full once, then as a citation (its memory type sniffed from the
value: an HTML page, JSON rows, text; see :mod:`agent_memory.records.prepare`).
"""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from agent_memory.errors import ConfigurationError, InvalidArgumentError
from agent_memory.limits import shorten
from agent_memory.models.items import MemoryType
from agent_memory.models.tool_arguments import read_tool_arguments

__all__ = ["MAX_TOOL_ERROR_CHARS", "FunctionTool", "ToolFailure", "as_tool", "tool"]

MAX_TOOL_ERROR_CHARS = 500
"""Longest error text sent back to the model for a failed call, in characters."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""Tool names the providers accept (OpenAI and Anthropic: 1-64 of letters, digits, ``_`` and ``-``)."""


class ToolFailure(Exception):
    """A call the model can fix or that failed inside the tool; its text goes back to the model."""


def _docstring_parts(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The first paragraph of ``fn``'s docstring and the descriptions of its ``Args:`` section."""
    doc = inspect.getdoc(fn) or ""
    summary = doc.split("\n\n", 1)[0].strip().replace("\n", " ")
    params: dict[str, str] = {}
    match = re.search(r"^Args:\s*\n((?:[ \t]+.*\n?)+)", doc, re.MULTILINE)
    if match:
        current = None
        for line in match.group(1).splitlines():
            head = re.match(r"^\s{2,}(\w+)\s*(?:\([^)]*\))?:\s*(.*)$", line)
            if head and (current is None or len(line) - len(line.lstrip()) <= 4):
                current = head.group(1)
                params[current] = head.group(2).strip()
            elif current is not None and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
    return summary, params


def _strip_titles(schema: Any) -> Any:
    """The schema without pydantic's ``title`` keys (tokens the model does not need)."""
    if isinstance(schema, dict):
        return {key: _strip_titles(value) for key, value in schema.items()
                if not (key == "title" and isinstance(value, str))}
    if isinstance(schema, list):
        return [_strip_titles(value) for value in schema]
    return schema


class FunctionTool:
    """A Python function as a tool.

    Args:
        fn: the function (sync or ``async``); every parameter needs a type annotation, and
            ``*args`` / ``**kwargs`` are not allowed (a model sends named JSON arguments).
        name: the tool name; ``None``: the function's ``__name__``.
        description: what the model reads; ``None``: the docstring's first paragraph.
        store_result: ``True`` (default): the result is stored in memory and cited after its
            first showing; ``False``: it stays inline in the conversation (small answers).
        result_type: the memory type of its results (``web_content``, ``search_results``...);
            ``None``: sniffed from each value.

    Raises:
        ConfigurationError: for a name the providers refuse, a parameter without annotation, or
            variadic parameters.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        store_result: bool = True,
        result_type: MemoryType | None = None,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        if not _NAME.fullmatch(self.name):
            raise ConfigurationError(f"tool name {self.name!r} must be 1-64 letters, digits, '_' or '-'")
        summary, param_docs = _docstring_parts(fn)
        self.description = description if description is not None else summary
        self.store_result = store_result
        self.result_type = result_type
        self.is_async = inspect.iscoroutinefunction(fn)
        hints = get_type_hints(fn, include_extras=True)  # keep Annotated[..., Field(max_length=...)]
        fields: dict[str, Any] = {}
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ConfigurationError(f"tool {self.name}: *args and **kwargs cannot be tool parameters")
            if param.name not in hints:
                raise ConfigurationError(f"tool {self.name}: parameter {param.name!r} needs a type annotation")
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[param.name] = (hints[param.name], Field(default, description=param_docs.get(param.name)))
        self.Arguments: type[BaseModel] = create_model(
            f"{self.name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r})"

    def parameters_schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments (``"type": "object"``)."""
        return _strip_titles(self.Arguments.model_json_schema())

    def openai_schema(self) -> dict[str, Any]:
        """The tool for OpenAI function calling (the renderers turn it into the others' shapes)."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters_schema()}}

    def parse(self, arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
        """Validated keyword arguments for the function.

        The arguments are read as every tool's are
        (:func:`~agent_memory.models.tool_arguments.read_tool_arguments`: at most 100,000
        characters, JSON, finite numbers, valid Unicode), then validated by the parameters' model.

        Raises:
            ToolFailure: for arguments the function cannot take (the text says what to fix).
        """
        try:
            arguments = read_tool_arguments(arguments, what=f"the arguments of {self.name}")
        except InvalidArgumentError as exc:
            malformed = bool(exc.errors) and exc.errors[0]["type"] in ("json_invalid", "not_an_object")
            raise ToolFailure(f"{exc}; send a JSON object" if malformed else str(exc)) from exc
        try:
            model = self.Arguments.model_validate(dict(arguments))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                for err in exc.errors(include_url=False)[:5]
            )
            takes = ", ".join(self.Arguments.model_fields)
            raise ToolFailure(f"wrong arguments for {self.name} ({shorten(problems, 300)}); it takes: {takes}") from exc
        return {key: getattr(model, key) for key in self.Arguments.model_fields}

    def invoke(self, arguments: str | Mapping[str, Any] | None, *, loop: asyncio.AbstractEventLoop | None = None) -> Any:
        """Validate ``arguments`` and run the function; an ``async`` function runs on ``loop``
        (the caller's event loop, from a worker thread) or, without one, in a new event loop.

        Raises:
            ToolFailure: for bad arguments, or any exception the function raised (its type and
                message, cut to :data:`MAX_TOOL_ERROR_CHARS`).
        """
        kwargs = self.parse(arguments)
        try:
            if self.is_async:
                coroutine = self.fn(**kwargs)
                if loop is not None:
                    return asyncio.run_coroutine_threadsafe(coroutine, loop).result()
                return asyncio.run(coroutine)
            return self.fn(**kwargs)
        except ToolFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - the tool's own failure is the model's information
            raise ToolFailure(shorten(f"{self.name} failed: {type(exc).__name__}: {exc}", MAX_TOOL_ERROR_CHARS)) from exc


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    store_result: bool = True,
    result_type: MemoryType | None = None,
) -> Any:
    """Decorator: ``@tool`` or ``@tool(name=..., store_result=False)`` makes a :class:`FunctionTool`."""

    def wrap(function: Callable[..., Any]) -> FunctionTool:
        return FunctionTool(function, name=name, description=description, store_result=store_result,
                            result_type=result_type)

    return wrap(fn) if fn is not None else wrap


def as_tool(value: FunctionTool | Callable[..., Any]) -> FunctionTool:
    """``value`` as a :class:`FunctionTool` (a plain function is wrapped).

    Raises:
        ConfigurationError: if ``value`` is not callable or cannot be a tool.
    """
    if isinstance(value, FunctionTool):
        return value
    if not callable(value):
        raise ConfigurationError(f"a tool must be a function or a FunctionTool, not {type(value).__name__}")
    return FunctionTool(value)
