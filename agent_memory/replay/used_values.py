"""Later-used values: what the model of a real run read in a tool result and went on to write.

A prompt strategy that takes results out of the prompt (a citation, a placeholder, a capped first
showing) saves tokens; it also loses what the model may need. This module measures the loss on
the runs themselves, with the real model's own next messages as the judge:

- A *value* is an identifier-like token of at least :data:`MIN_VALUE_CHARS` characters with a
  digit, an underscore or an inner capital (``HAT170``, ``2024-05-15``, ``mia_li_3668``,
  ``getUserById``, ``1234.56``): reservation ids, flight numbers, dates, user ids, file and function
  names, amounts. Words are not values: the model can write them from what it knows.
- At each LLM call, the values of the message the call produced (its text and the *values* of its
  tool-call arguments; argument names are the agent's own vocabulary) are the values it used.
- A used value is *needed from a result* when it occurs in an earlier tool result and in no
  earlier system, user or assistant message, nor in the agent's tool definitions or its
  framework's vocabulary (:attr:`~agent_memory.replay.loaders.ReplayRun.vocabulary`): the model
  could only have it from the result.
- A strategy *keeps* a needed value when the prompt it builds for that call still contains it.

Occurrence is whole-token: ``HAT17`` does not occur in ``HAT170``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_memory.models.messages import Message
from agent_memory.presentation.key_values import MIN_VALUE_CHARS, values_in

__all__ = [
    "MIN_VALUE_CHARS",
    "NeededValue",
    "holds",
    "message_text",
    "missing",
    "needed_values",
    "output_values",
    "values_in",
]

def _json_strings(value: Any) -> Iterable[str]:
    """The scalar values of a JSON value as text, keys left out."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _json_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _json_strings(item)
    elif value is not None and not isinstance(value, bool):
        yield str(value)


def _values_of_json_text(text: str) -> list[str]:
    """Values of a text that may be JSON (whole, or one JSON object per line: a tape step's output):
    values of its scalars, keys left out; plain text as it is."""
    try:
        return values_in(" ".join(_json_strings(json.loads(text))))
    except (json.JSONDecodeError, RecursionError):
        pass
    lines = text.splitlines()
    parsed: list[str] = []
    for line in lines:
        try:
            parsed.extend(_json_strings(json.loads(line)))
        except (json.JSONDecodeError, RecursionError):
            return values_in(text)
    return values_in(" ".join(parsed))


def output_values(message: Message) -> list[str]:
    """Values a model wrote in ``message``: in its text, and in the values (not the names) of its
    tool calls' arguments (arguments that are not JSON, such as code, as text)."""
    found = _values_of_json_text(message.content or "")
    for call in message.tool_calls:
        found.extend(_values_of_json_text(call.arguments or ""))
    return list(dict.fromkeys(found))


def message_text(message: Message) -> str:
    """Everything of ``message`` a model reads: its content and its tool calls (name, arguments)."""
    parts = [message.content or ""]
    parts += [f"{call.name} {call.arguments}" for call in message.tool_calls]
    return "\n".join(parts)


def _pattern(value: str) -> re.Pattern[str]:
    return re.compile(r"(?<![A-Za-z0-9_])" + re.escape(value) + r"(?![A-Za-z0-9_]|[.\-][A-Za-z0-9_])")


def _occurs(pattern: re.Pattern[str], value: str, text: str) -> bool:
    return value in text and pattern.search(text) is not None


def holds(text: str | None, value: str) -> bool:
    """Whether ``text`` holds ``value`` as a whole token."""
    return bool(text) and _occurs(_pattern(value), value, text or "")


@dataclass(frozen=True, slots=True)
class NeededValue:
    """One value a call's output used that only an earlier tool result held."""

    value: str
    """The value, as the model wrote it."""
    result_index: int
    """Index (in the run's messages) of the newest earlier tool result that holds it."""


def needed_values(messages: Sequence[Message], *, known: Iterable[str] = ()) -> dict[int, list[NeededValue]]:
    """Per LLM call (the index of the assistant message it produced), the values that message used
    that were needed from a result (see the module docstring); calls with none are left out.

    Args:
        messages: the run, oldest first, tool results with their content.
        known: texts the model had apart from the messages: its tool definitions (as JSON), its
            framework's vocabulary.
    """
    known_text = "\n".join(known)
    said: list[str] = [known_text]
    results: list[tuple[int, str]] = []
    needed: dict[int, list[NeededValue]] = {}
    for index, message in enumerate(messages):
        if message.role == "assistant":
            found: list[NeededValue] = []
            spoken = "\n".join(said)
            for value in output_values(message):
                pattern = _pattern(value)
                if _occurs(pattern, value, spoken):
                    continue
                holder = next((i for i, text in reversed(results) if _occurs(pattern, value, text)), None)
                if holder is not None:
                    found.append(NeededValue(value, holder))
            if found:
                needed[index] = found
        if message.role == "tool":
            results.append((index, message.content or ""))
        else:
            said.append(message_text(message))
    return needed


def missing(prompt: Sequence[Message], needed: Sequence[NeededValue]) -> list[NeededValue]:
    """The needed values that ``prompt`` (the messages a strategy built for the call) does not hold."""
    if not needed:
        return []
    text = "\n".join(message_text(message) for message in prompt)
    return [item for item in needed if not _occurs(_pattern(item.value), item.value, text)]
