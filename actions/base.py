"""What every memory action shares: the result type, the arguments-to-schema step, error handling.

A memory action is a tool an LLM calls. Its arguments are a pydantic model whose JSON schema is the
tool's parameter schema; its description is a prompt for the model. :meth:`MemoryAction.run` never
raises for a mistake the *model* made (a bad id, a malformed JSON string, a wrong argument, a
transform that does not apply): it returns ``ToolResult(ok=False, ...)`` whose ``content`` tells the
model what to do next. Errors of the developer or the machine (``ConfigurationError``,
``StoreError``, ``VectorIndexError``) are raised as usual.
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from functools import lru_cache
from types import UnionType
from typing import Any, ClassVar, Generic, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from agent_memory import AgentMemory
from agent_memory.errors import (
    MAX_QUOTED_CHARS,
    AgentMemoryError,
    InvalidArgumentError,
    InvalidIdError,
    IsolationError,
    ItemNotFoundError,
    TransformError,
    quoted,
)
from agent_memory.limits import shorten
from agent_memory.models.tool_arguments import MAX_TOOL_ARGUMENTS_CHARS, read_tool_arguments
from agent_memory.presentation.offer import Capability, ToolResult

__all__ = [
    "BOUND_KEYWORDS",
    "MAX_ARGUMENTS_CHARS",
    "ActionArguments",
    "InstanceSchemas",
    "MemoryAction",
    "ToolCallError",
    "ToolJsonSchema",
    "ToolResult",
    "format_call",
]

FIND_IDS_HINT = "Copy the id exactly from its citation or from a search hit."
"""The next step suggested to a model that named a wrong memory id."""

MAX_ARGUMENTS_CHARS = MAX_TOOL_ARGUMENTS_CHARS
"""Longest arguments string (or dict, as JSON) a tool call may carry, in characters: the one bound
every tool's arguments have (:data:`~agent_memory.models.tool_arguments.MAX_TOOL_ARGUMENTS_CHARS`);
anything longer is refused before it is parsed."""


MAX_JSON_NESTING = 8
"""Deepest nesting of JSON arrays and objects in tool arguments (the memory tools take flat
arguments and lists of strings: depth 2). Deeper input is refused before it is parsed, so a
5,000-deep document cannot exhaust the recursion limit of the JSON parser or the validator."""


class ToolCallError(AgentMemoryError, ValueError):
    """A mistake in a tool call that the model can correct; :meth:`MemoryAction.run` turns it into
    ``ToolResult(ok=False, error=code, ...)``. Raised only inside :meth:`MemoryAction.execute`.

    Args:
        message: what is wrong and what to do instead, written for the model.
        code: the ``ToolResult.error`` code, keyword-only (default ``invalid_arguments``).
    """

    def __init__(self, message: str, *, code: str = "invalid_arguments") -> None:
        super().__init__(message)
        self.code = code


class ActionArguments(BaseModel):
    """Base of the arguments models: flat fields, attribute docstrings become the parameter
    descriptions the model reads, unknown arguments are rejected, and types are JSON's, strictly:
    ``true`` is no integer (never 1) and ``"5"`` no number. An integer field takes what JSON Schema's
    ``"type": "integer"`` matches, "any number with a zero fractional part" (2020-12 Validation
    §6.1.1): ``2`` and ``2.0`` are 2, ``2.5`` is refused. The schema a model is sent says
    ``integer``, so ``2.0`` is a call that keeps to it."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _whole_numbers(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        return {key: int(value) if type(value) is float and value.is_integer() and key in cls.model_fields
                and _takes_integer(cls.model_fields[key].annotation) else value for key, value in data.items()}


def _takes_integer(annotation: Any) -> bool:
    """Whether a field's type is an integer (or an optional one) and not also a float."""
    kinds = set(get_args(annotation)) if get_origin(annotation) in (Union, UnionType) else {annotation}
    return int in kinds and float not in kinds


BOUND_KEYWORDS = frozenset({
    "maxLength", "minLength", "maxItems", "minItems", "maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum",
    "additionalProperties",
})
"""JSON-schema keywords :class:`ToolJsonSchema` leaves out: bounds the arguments model checks."""


class ToolJsonSchema(GenerateJsonSchema):
    """JSON schema for function calling: the shape of a call, nothing the tool checks itself.

    Every token here is sent with every LLM call the tool goes with (the default offer sends
    ``retrieve_memory`` from the first call of a cached conversation), and a provider's cache makes
    a call's schema the part of it that is paid on every call. So the schema says only what the
    model needs to write a well-formed call: the properties, their types, what is required, and a
    short description where a name is not plain. Left out: titles; defaults (a field's description
    says its default where the model needs it); the model's docstring (the tool's description says
    it); ``str | None = None`` is ``{"type": "string"}``, not an ``anyOf`` with ``null``; and the
    bounds (:data:`BOUND_KEYWORDS`: lengths, item counts, number ranges, unknown properties). The
    arguments model still checks every bound, and :meth:`MemoryAction.run` answers a call that
    breaks one with a tool error that states it (``around`` has at most 200 characters...), which
    the model can act on; bounds the model must plan for (a note's maximum length, the most hits a
    query returns) are said in the tool's description. Left in, they cost 40 of the 249 tokens of
    ``retrieve_memory``'s definition.
    """

    def generate(self, schema: CoreSchema, mode: JsonSchemaMode = "validation") -> JsonSchemaValue:
        out = super().generate(schema, mode)
        out.pop("title", None)
        out.pop("description", None)
        return _without_bounds(out)

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        out = super().default_schema(schema)
        out.pop("default", None)
        return out


def _without_bounds(schema: Any) -> Any:
    """``schema`` with the :data:`BOUND_KEYWORDS` removed from it and every schema inside it (a
    copy; the names under ``properties`` are property names, never removed)."""
    if isinstance(schema, list):
        return [_without_bounds(value) for value in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _without_bounds(sub) for name, sub in value.items()}
        elif key not in BOUND_KEYWORDS:
            out[key] = _without_bounds(value)
    return out


def format_call(name: str, arguments: Mapping[str, Any]) -> str:
    """A tool call as the model reads it: ``retrieve_memory(id="mem_3f9a0c41b2de", page=2)``.

    Values are written as JSON (strings double-quoted, ``true``/``false``, lists in brackets), so
    the call can be sent back as JSON arguments unchanged.
    """
    parts = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in arguments.items())
    return f"{name}({parts})"


ArgsT = TypeVar("ArgsT", bound=ActionArguments)


class MemoryAction(ABC, Generic[ArgsT]):
    """A memory tool: its name, its prompt, its arguments model, and how it runs.

    Subclasses set the class attributes and implement :meth:`execute`; everything else
    (schemas, argument parsing, turning the model's mistakes into error results) is shared.
    ``description``, ``Arguments`` and ``example`` may instead be set per instance in
    ``__init__`` (the upload store and the combined ``memory`` tool do).
    Actions hold no state: one instance serves any number of memories and threads.
    """

    name: ClassVar[str]
    """The tool name the model calls, e.g. ``retrieve_memory``."""
    title: ClassVar[str]
    """The human name, e.g. ``Retrieve from Memory``."""
    description: str
    """The tool description: a prompt saying when to use the tool, an example call, its limits."""
    Arguments: type[ActionArguments]
    """The pydantic arguments model; its JSON schema is the tool's parameter schema."""
    example: dict[str, Any]
    """Arguments of a typical call (shown in the description and in error messages)."""
    capability: ClassVar[Capability]
    """What the tool lets the model do (``store``, ``retrieve`` or ``query``): decides when it is
    offered (:class:`~agent_memory.presentation.offer.ToolOffer`)."""
    retrieve_call: str = "retrieve_memory"
    """How answers name the retrieve call they suggest (``memory`` in the one-tool form, whose
    ``op`` defaults to retrieve)."""

    # -- schemas -------------------------------------------------------------------------------
    @classmethod
    def parameters_schema(cls) -> dict[str, Any]:
        """The JSON schema of the arguments (``"type": "object"``, no ``$defs``): a new dict on
        every call, from the schema pydantic generated once per class (generating it took ~2 ms
        per tool, paid at every request the tools are offered in)."""
        return json.loads(_schema_text(cls.Arguments))

    @classmethod
    def openai_schema(cls) -> dict[str, Any]:
        """The tool for OpenAI function calling: ``{"type": "function", "function": {...}}``."""
        return {
            "type": "function",
            "function": {"name": cls.name, "description": cls.description, "parameters": cls.parameters_schema()},
        }

    @classmethod
    def anthropic_schema(cls) -> dict[str, Any]:
        """The tool for the Anthropic Messages API: ``{"name", "description", "input_schema"}``."""
        return {"name": cls.name, "description": cls.description, "input_schema": cls.parameters_schema()}

    # -- running -------------------------------------------------------------------------------
    def parse_arguments(self, arguments: str | Mapping[str, Any] | BaseModel | None) -> ArgsT:
        """Validate arguments given as the JSON string a provider returns, a dict, or the model.

        ``None`` and an empty string mean no arguments. Input longer than
        :data:`MAX_ARGUMENTS_CHARS` or nested deeper than :data:`MAX_JSON_NESTING` is refused
        before it is parsed.

        Raises:
            ToolCallError: if the JSON is malformed, too long, too deep or not an object, or an
                argument is missing, unknown, of the wrong type or out of its bounds (code
                ``invalid_arguments``).
        """
        if isinstance(arguments, self.Arguments):
            return arguments  # type: ignore[return-value]
        if isinstance(arguments, BaseModel):
            arguments = arguments.model_dump(exclude_unset=True)
        example = json.dumps(self.example, ensure_ascii=False)
        if arguments is not None and not isinstance(arguments, str | Mapping):
            raise ToolCallError(
                f"the arguments of {self.name} must be a JSON object, not {type(arguments).__name__}; e.g. {example}")
        try:
            parsed = read_tool_arguments(arguments, what=f"the arguments of {self.name}", max_depth=MAX_JSON_NESTING)
        except InvalidArgumentError as exc:
            advice = {
                "too_long": ". Send less" + (" (store long content in parts)." if self.capability == "store" else "."),
                "too_deep": f"; {self.name} takes flat arguments, e.g. {example}",
                "unreadable_value": ".",  # the reader says what to send instead
            }.get(exc.errors[0]["type"] if exc.errors else "", f". Send a JSON object, e.g. {example}")
            raise ToolCallError(f"{exc}{advice}") from exc
        try:
            return self.Arguments.model_validate(parsed)  # type: ignore[return-value]
        except ValidationError as exc:
            raise ToolCallError(self._explain(exc)) from exc

    def _explain(self, exc: ValidationError) -> str:
        problems = []
        for err in exc.errors(include_url=False)[:5]:
            field = ".".join(shorten(str(part), 40) for part in err["loc"]) or "arguments"
            if err["type"] == "missing":
                problems.append(f"the required argument '{field}' is missing")
            elif err["type"] == "extra_forbidden":
                problems.append(f"{self.name} has no argument '{field}'")
            else:
                try:
                    got = json.dumps(err.get("input"), ensure_ascii=False, default=str)
                except (ValueError, RecursionError):
                    got = "(unprintable)"
                problems.append(f"'{field}' = {shorten(got, MAX_QUOTED_CHARS)}: {err['msg']}")
        fields = self.Arguments.model_fields
        takes = ", ".join(f"{key} (required)" if field.is_required() else key for key, field in fields.items())
        return (
            f"invalid arguments for {self.name}: {'; '.join(problems)}. {self.name} takes: {takes}. "
            f"Example: {format_call(self.name, self.example)}"
        )

    def run(self, memory: AgentMemory, arguments: str | Mapping[str, Any] | BaseModel | None) -> ToolResult:
        """Run the tool call on ``memory`` and return what the model should read.

        Args:
            memory: the agent's memory.
            arguments: the JSON string from the provider, a dict, or an ``Arguments`` instance.

        Returns:
            ``ToolResult(ok=True, ...)`` with the answer, or ``ToolResult(ok=False, error=code)``
            for a mistake of the model (see :attr:`ToolResult.error`); never raises for those.
            An error's text quotes at most ``MAX_QUOTED_CHARS`` (60) characters of any input.

        Raises:
            ConfigurationError, StoreError, VectorIndexError: faults of the setup or the machine,
                which the model cannot fix.
        """
        try:
            return self.execute(memory, self.parse_arguments(arguments))
        except ToolCallError as exc:
            return ToolResult.failure(exc.code, str(exc))
        except InvalidIdError as exc:
            return ToolResult.failure(
                "invalid_id",
                f"{quoted(exc.value)} is not a memory id: ids are 'mem_' and 12 hex digits, like "
                f"'mem_3f9a0c41b2de'. {FIND_IDS_HINT}",
            )
        except ItemNotFoundError as exc:
            return ToolResult.failure("not_found", f"No memory item {quoted(exc.item_id)}. {FIND_IDS_HINT}")
        except IsolationError as exc:
            return ToolResult.failure("refused", f"{shorten(str(exc), 300)}. Nothing was changed.")
        except TransformError as exc:
            return ToolResult.failure(
                "transform_error", f"{shorten(str(exc), 300)}. Change the arguments and call {self.name} again."
            )
        except InvalidArgumentError as exc:
            return ToolResult.failure("invalid_arguments", f"{shorten(str(exc), 300)}. Nothing was changed.")

    async def arun(
        self, memory: AgentMemory, arguments: str | Mapping[str, Any] | BaseModel | None
    ) -> ToolResult:
        """:meth:`run` in a worker thread, for async agent loops."""
        return await asyncio.to_thread(self.run, memory, arguments)

    @abstractmethod
    def execute(self, memory: AgentMemory, args: ArgsT) -> ToolResult:
        """Do the work for validated ``args``.

        May raise :class:`ToolCallError`, ``InvalidIdError``, ``ItemNotFoundError`` or
        ``TransformError`` for the model's mistakes; :meth:`run` turns them into error results.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class InstanceSchemas(MemoryAction[ArgsT]):
    """An action whose ``Arguments``, ``description`` or ``example`` are set per instance (a
    combined tool, a store tool that reads files): its schemas come from the instance, not from
    the class. Put it first in the bases of such an action."""

    def parameters_schema(self) -> dict[str, Any]:  # type: ignore[override]
        """The JSON schema of this instance's arguments."""
        return self.Arguments.model_json_schema(schema_generator=ToolJsonSchema)

    def openai_schema(self) -> dict[str, Any]:  # type: ignore[override]
        """The tool for OpenAI function calling."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters_schema()},
        }

    def anthropic_schema(self) -> dict[str, Any]:  # type: ignore[override]
        """The tool for the Anthropic Messages API."""
        return {"name": self.name, "description": self.description, "input_schema": self.parameters_schema()}


@lru_cache(maxsize=256)
def _schema_text(arguments: type[BaseModel]) -> str:
    """The JSON text of ``arguments``' tool schema (:class:`ToolJsonSchema`), generated once per
    arguments model (a class, never changed once defined; the one-tool form builds one per
    toolkit, hence a bound on those kept)."""
    return json.dumps(arguments.model_json_schema(schema_generator=ToolJsonSchema))
