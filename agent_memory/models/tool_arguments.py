"""A model's tool-call arguments, read strictly: the one reader every tool's arguments go through.

A model writes a tool call's arguments as JSON text (OpenAI's ``function.arguments``) or a provider
hands them over parsed (Anthropic's ``tool_use.input``, an MCP ``tools/call``). Python's ``json``
module reads more than JSON and less than a model can send: it takes ``NaN`` and ``Infinity``
(RFC 8259 §6 has no such numbers) and turns ``1e400`` into ``inf``; it takes ``"\\ud800"``, a lone
surrogate no file, index or tokenizer can write as UTF-8; it raises ``ValueError`` on an integer of
more than 4,300 digits; and it recurses once per ``[``. Each of these reached a trace record, the
event journal or a tool's parser and raised out of the agent loop (issue #37).

:func:`read_tool_arguments` is the reader for them all (the memory actions, the agent's own tools,
``spawn_agent``, :class:`~agent_memory.models.messages.ToolCall`): it bounds the text before
parsing it (:data:`MAX_TOOL_ARGUMENTS_CHARS`, a nesting depth), parses it with every number kept
readable (:func:`decode_json`), and refuses what is not a JSON object of finite numbers and valid
Unicode text, with :class:`~agent_memory.errors.InvalidArgumentError` whose message names the
argument and says what to send instead: a model reads it as a tool error and can act on it. The
decision for a lone surrogate is to refuse it, in every tool, never to store it or replace it
silently.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import JsonValue

from agent_memory.errors import InvalidArgumentError
from agent_memory.limits import MAX_JSON_DEPTH, escape_surrogates, shorten

__all__ = [
    "MAX_JSON_NUMBER_CHARS",
    "MAX_TOOL_ARGUMENTS_CHARS",
    "UnreadableNumber",
    "decode_json",
    "json_nesting",
    "read_tool_arguments",
]

MAX_TOOL_ARGUMENTS_CHARS = 100_000
"""Longest arguments of one tool call, in characters of JSON text (a parsed object: of its compact
JSON). The largest argument of any memory tool is ``store_memory``'s content (8,000 characters, up
to 12 JSON characters each when escaped as a ``\\uXXXX`` surrogate pair); longer text is refused
before it is parsed. It also keeps a call's arguments within a raw trace's bound
(:data:`~agent_memory.models.traces.MAX_TOOL_ARGS_CHARS`)."""

MAX_JSON_NUMBER_CHARS = 100
"""Longest number in tool arguments, in characters as written (a 64-bit integer has at most 20).
Python refuses integers of more than 4,300 digits with a ``ValueError`` and converts them in
quadratic time below that; no tool takes a number this long."""

_MAX_INT_BITS = int(MAX_JSON_NUMBER_CHARS / math.log10(2))
"""Bits of the largest integer :data:`MAX_JSON_NUMBER_CHARS` digits can write (a parsed integer
is measured by its bits: turning it into digits is quadratic)."""

_MAX_PATH_PART_CHARS = 40
"""Characters of one key shown in an argument's path in an error message."""


def json_nesting(text: str) -> int:
    """Deepest ``[``/``{`` nesting of a JSON text, outside strings: a linear scan, no recursion
    (``{"a": 1}`` is 1, as :func:`~agent_memory.limits.json_depth` counts parsed data)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


@dataclass(frozen=True)
class UnreadableNumber:
    """A number of a JSON text that no tool can take, kept in place by :func:`decode_json`:
    ``NaN``, ``Infinity`` or ``-Infinity``, a number beyond a double's range (``1e400``), or one
    written in more than :data:`MAX_JSON_NUMBER_CHARS` characters. :func:`read_tool_arguments`
    refuses it, naming where it is."""

    text: str
    """The number as written, cut to 40 characters."""
    chars: int
    """Its length as written, in characters."""

    @property
    def problem(self) -> str:
        """What is wrong with it, for an error message."""
        if self.text.lstrip("-") in ("NaN", "Infinity"):
            return f"is {self.text}, which is not a JSON number; send a finite number"
        if self.chars > MAX_JSON_NUMBER_CHARS:
            return (f"is a number written in {self.chars:,} characters ({self.text}…); numbers have at most "
                    f"{MAX_JSON_NUMBER_CHARS} characters")
        return f"is {self.text}, beyond the range of a JSON number (about ±1.8e308); send a smaller number"


def _parse_int(text: str) -> int | UnreadableNumber:
    return UnreadableNumber(text[:40], len(text)) if len(text) > MAX_JSON_NUMBER_CHARS else int(text)


def _parse_float(text: str) -> float | UnreadableNumber:
    value = float(text) if len(text) <= MAX_JSON_NUMBER_CHARS else math.inf
    return value if math.isfinite(value) else UnreadableNumber(text[:40], len(text))


def _parse_constant(text: str) -> UnreadableNumber:
    return UnreadableNumber(text, len(text))


def decode_json(text: str) -> Any:
    """Python data of a JSON text, with every number that no tool can take kept as an
    :class:`UnreadableNumber` where it stands (``NaN``, ``Infinity``, ``1e400``, a 5,000-digit
    integer), and lone surrogate escapes read as Python's ``json`` reads them (a ``str`` holding
    the surrogate). Never slower than linear in ``text`` for numbers.

    Raises:
        json.JSONDecodeError: if ``text`` is not JSON.
        RecursionError: if it is nested deeper than Python's recursion limit (check
            :func:`json_nesting` first).
    """
    return json.loads(text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)


def _kind(value: Any) -> str:
    """The JSON name of a parsed value's type (``array``, ``string``...)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float | UnreadableNumber):
        return "number"
    return {list: "array", str: "string", type(None): "null"}.get(type(value), type(value).__name__)


def _path(parts: tuple[Any, ...]) -> str:
    return ".".join(escape_surrogates(shorten(str(part), _MAX_PATH_PART_CHARS)) for part in parts)


_SURROGATE_ADVICE = ("which is not valid Unicode; send valid UTF-8 text (a character beyond U+FFFF as a "
                     "surrogate pair, e.g. \\ud83d\\ude80)")


def _first_problem(value: Mapping[str, Any], max_depth: int, max_chars: int) -> tuple[str, str] | None:
    """What first makes ``value`` unreadable as tool arguments: its kind (as
    :func:`read_tool_arguments` names it) and the rest of a sentence whose subject is the
    arguments (``": 'tags.0' holds a lone surrogate..."``); ``None``: nothing. Walks
    without recursion, in document order, and stops once the strings and items seen pass
    ``max_chars``."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    seen_chars = 0
    while stack:
        path, node = stack.pop()
        where = f"'{_path(path)}'" if path else "the object"
        if isinstance(node, str):
            seen_chars += len(node)
            try:
                node.encode("utf-8")
            except UnicodeEncodeError as exc:
                bad = f"\\u{ord(node[exc.start]):04x}"
                return "unreadable_value", f": {where} holds a lone surrogate ({bad}), {_SURROGATE_ADVICE}"
        elif isinstance(node, UnreadableNumber):
            return "unreadable_value", f": {where} {node.problem}"
        elif isinstance(node, float) and not math.isfinite(node):
            text = "NaN" if math.isnan(node) else ("-Infinity" if node < 0 else "Infinity")
            return "unreadable_value", f": {where} {UnreadableNumber(text, len(text)).problem}"
        elif isinstance(node, int) and not isinstance(node, bool) and node.bit_length() > _MAX_INT_BITS:
            digits = int(node.bit_length() * math.log10(2)) + 1
            return "unreadable_value", (f": {where} is an integer of about {digits:,} digits; numbers have at most "
                    f"{MAX_JSON_NUMBER_CHARS} characters")
        elif isinstance(node, dict | list | tuple):
            if len(path) >= max_depth:
                return "too_deep", f" are nested more than {max_depth} levels deep"
            seen_chars += len(node) + 2  # brackets and separators; checked before walking in
            if seen_chars > max_chars:
                break
            children: list[tuple[tuple[Any, ...], Any]] = []
            if isinstance(node, dict):
                for key, child in node.items():
                    if not isinstance(key, str):
                        return "unreadable_value", (f": {where} has a key that is not a string "
                                                    f"({shorten(repr(key), 40)})")
                    try:
                        key.encode("utf-8")
                    except UnicodeEncodeError as exc:
                        bad = f"\\u{ord(key[exc.start]):04x}"
                        return "unreadable_value", (f": a key of {where} holds a lone surrogate ({bad}), "
                                                    f"{_SURROGATE_ADVICE}")
                    seen_chars += len(key)
                    children.append(((*path, key), child))
            else:
                children = [((*path, index), child) for index, child in enumerate(node)]
            stack.extend(reversed(children))
        elif not (node is None or isinstance(node, bool | int | float)):
            return "unreadable_value", f": {where} is not JSON data ({shorten(type(node).__name__, 40)})"
        if seen_chars > max_chars:
            break
    if seen_chars > max_chars:
        return "too_long", f" are more than {max_chars:,} characters long as JSON; the limit is {max_chars:,}"
    return None


def read_tool_arguments(
    arguments: str | Mapping[str, Any] | None,
    *,
    what: str = "the arguments",
    max_depth: int = MAX_JSON_DEPTH,
    max_chars: int = MAX_TOOL_ARGUMENTS_CHARS,
) -> dict[str, JsonValue]:
    """The arguments of a tool call as a JSON object a tool can take, or an error saying why not.

    Args:
        arguments: the JSON text a provider returned, or an object already parsed (a dict);
            ``None``, ``""`` or blanks: no arguments (``{}``).
        what: how the message names the arguments (``"the arguments of query_memory"``).
        max_depth: the deepest nesting of objects and arrays taken (``{"a": 1}`` is 1).
        max_chars: the longest text taken, in characters (an object: of its compact JSON).

    Returns:
        A new dict of JSON values: strings of valid Unicode, finite numbers of at most
        :data:`MAX_JSON_NUMBER_CHARS` characters, nested at most ``max_depth`` deep, whose compact
        JSON has at most ``max_chars`` characters.

    Raises:
        InvalidArgumentError: for text longer than ``max_chars`` or nested deeper than
            ``max_depth`` (checked before parsing), text that is not JSON, JSON that is not an
            object, ``NaN`` / ``Infinity`` / out-of-range or overlong numbers, a lone surrogate in
            a string or key, or an object that is not JSON data. The message starts with ``what``,
            names the argument (``'tags.0'``), says what to send instead where the fix is not
            plain, and quotes none of a long input; it is valid Unicode. ``errors`` holds one entry
            whose ``type`` says which: ``too_long``, ``too_deep``, ``json_invalid``,
            ``not_an_object`` or ``unreadable_value``.
    """
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    if isinstance(arguments, str):
        if len(arguments) > max_chars:
            raise _refusal("too_long", f"{what} are {len(arguments):,} characters long; the limit is {max_chars:,}")
        if json_nesting(arguments) > max_depth:
            raise _refusal("too_deep", f"{what} are nested more than {max_depth} levels deep")
        try:
            parsed = decode_json(arguments)
        except json.JSONDecodeError as exc:
            raise _refusal("json_invalid", f"{what} are not valid JSON ({exc.msg} at line {exc.lineno} column "
                                           f"{exc.colno})") from exc
        except RecursionError as exc:  # belt and braces: the nesting check comes first
            raise _refusal("too_deep", f"{what} are nested too deeply") from exc
    elif isinstance(arguments, Mapping):
        parsed = arguments
    else:
        raise _refusal("not_an_object", f"{what} must be a JSON object, not {_kind(arguments)}")
    if not isinstance(parsed, Mapping):
        raise _refusal("not_an_object", f"{what} must be a JSON object, not {_kind(parsed)}")
    problem = _first_problem(dict(parsed), max_depth, max_chars)
    if problem is not None:
        raise _refusal(*problem, what=what)
    compact = json.dumps(dict(parsed), ensure_ascii=False, separators=(",", ":"))
    if len(compact) > max_chars:
        raise _refusal("too_long", f"{what} are {len(compact):,} characters long as JSON; the limit is {max_chars:,}")
    # Parsed from text: JSON values already. Given as an object: its JSON, read back (tuples
    # become lists, other mappings dicts), so a tool sees what it would have seen as text.
    return dict(parsed) if isinstance(arguments, str) else json.loads(compact)


def _refusal(kind: str, message: str, *, what: str = "") -> InvalidArgumentError:
    """The error :func:`read_tool_arguments` raises: ``what`` + ``message``, its kind in ``errors``."""
    text = escape_surrogates(what + message)
    return InvalidArgumentError(text, errors=({"type": kind, "msg": text},))
