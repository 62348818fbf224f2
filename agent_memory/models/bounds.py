"""The size bounds of the stored models, declared once for items and traces, and the one place
where they stop applying: records read back (:data:`STORED_CONTEXT`).

A model a developer builds is held to its bounds (the constants of :mod:`agent_memory.limits`,
:mod:`agent_memory.models.traces`); a record read back from the store under
``context=STORED_CONTEXT`` keeps its type and Unicode checks but not the sizes, so a record
written under other bounds stays readable. Fields declare their bounds as ``Annotated``
metadata::

    title: Annotated[str, bounded_text(MAX_TITLE_CHARS)] | None = None
    tags: Annotated[tuple[str, ...], bounded_strings(MAX_TAGS, MAX_TAG_CHARS)] = ()
    extra: Annotated[dict[str, JsonValue], JSON_DEPTH, bounded_json(MAX_EXTRA_CHARS)] = {}

An error names the field (``title has 2,000 characters; at most 1,000 are allowed``) unless the
declaration names it otherwise; errors are ``ValueError`` s, which the models turn into
:class:`~agent_memory.errors.InvalidArgumentError` (see :class:`agent_memory.models.items._Model`).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import AfterValidator, BeforeValidator, ValidationInfo

from agent_memory.limits import MAX_JSON_DEPTH, check_text, json_depth

__all__ = [
    "JSON_DEPTH",
    "STORED_CONTEXT",
    "bounded_json",
    "bounded_strings",
    "bounded_text",
    "bounds_apply",
    "check_json_depth",
    "check_length",
    "check_strings",
]

STORED_CONTEXT: dict[str, Any] = {"agent_memory_stored": True}
"""Validation context for records read back from the item store: types and Unicode are checked,
the size bounds of :mod:`agent_memory.limits` are not (they apply when an item is stored)."""


def bounds_apply(info: ValidationInfo) -> bool:
    """Whether size bounds apply: always, but for records read back (:data:`STORED_CONTEXT`)."""
    return not (isinstance(info.context, dict) and info.context.get("agent_memory_stored"))


def check_length(value: str, what: str, max_chars: int, info: ValidationInfo) -> str:
    """``value`` if it has at most ``max_chars`` characters (when bounds apply) and valid Unicode.

    Raises:
        ValueError: longer (``<what> has N characters; at most M are allowed``), or a lone
            surrogate (:func:`~agent_memory.limits.check_text`).
    """
    if bounds_apply(info) and len(value) > max_chars:
        raise ValueError(f"{what} has {len(value):,} characters; at most {max_chars:,} are allowed")
    return check_text(value, what)


def check_strings(
    values: tuple[str, ...], what: str, max_items: int, max_chars: int, info: ValidationInfo
) -> tuple[str, ...]:
    """``values`` if there are at most ``max_items`` of them (when bounds apply), each as
    :func:`check_length` asks (named ``an entry of <what>``).

    Raises:
        ValueError: too many (``N <what>; at most M are allowed``) or an entry refused.
    """
    if bounds_apply(info) and len(values) > max_items:
        raise ValueError(f"{len(values):,} {what}; at most {max_items:,} are allowed")
    for value in values:
        check_length(value, f"an entry of {what}", max_chars, info)
    return values


def check_json_depth(value: Any, what: str) -> Any:
    """Refuse JSON-like data nested deeper than ``MAX_JSON_DEPTH`` (before pydantic walks it).

    Raises:
        ValueError: ``<what> is nested more than MAX_JSON_DEPTH levels deep``.
    """
    if json_depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"{what} is nested more than {MAX_JSON_DEPTH} levels deep")
    return value


def bounded_text(max_chars: int, what: str | None = None, *, blank: str | None = None) -> AfterValidator:
    """``Annotated[str, bounded_text(n)]``: at most ``n`` characters (:func:`check_length`);
    ``what`` names the value in errors, ``None``: the field's name. ``blank``: the error a blank
    value gets (when bounds apply), after the name (``"must not be blank"``); ``None``: blank
    text is allowed."""

    def check(value: str, info: ValidationInfo) -> str:
        name = what or info.field_name or "text"
        if blank is not None and bounds_apply(info) and not value.strip():
            raise ValueError(f"{name} {blank}")
        return check_length(value, name, max_chars, info)

    return AfterValidator(check)


def bounded_strings(max_items: int, max_chars: int, what: str | None = None) -> AfterValidator:
    """``Annotated[tuple[str, ...], bounded_strings(n, m)]``: at most ``n`` strings of at most
    ``m`` characters each (:func:`check_strings`); ``what`` names them in errors, ``None``: the
    field's name."""
    return AfterValidator(
        lambda values, info: check_strings(values, what or info.field_name or "values", max_items, max_chars, info)
    )


def bounded_json(max_chars: int) -> AfterValidator:
    """``Annotated[JSON type, JSON_DEPTH, bounded_json(n)]``: JSON-able data whose JSON text
    (``json.dumps(value, ensure_ascii=False)``) has at most ``n`` characters, named
    ``<field> (as JSON)`` in errors; ``None`` passes."""

    def check(value: Any, info: ValidationInfo) -> Any:
        if value is not None:
            check_length(json.dumps(value, ensure_ascii=False), f"{info.field_name} (as JSON)", max_chars, info)
        return value

    return AfterValidator(check)


JSON_DEPTH = BeforeValidator(lambda value, info: check_json_depth(value, info.field_name or "value"))
"""``Annotated`` metadata: refuse data nested deeper than ``MAX_JSON_DEPTH`` before pydantic walks
it (:func:`check_json_depth`, named by the field)."""
