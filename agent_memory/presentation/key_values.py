"""Key values: the identifier-like tokens of a text that a model copies rather than words it writes.

Reservation ids, flight numbers, dates, user ids, file and function names, amounts: tokens of at
least :data:`MIN_VALUE_CHARS` characters with a digit, an underscore or an inner capital
(``HAT170``, ``2024-05-16``, ``mia_li_3668``, ``getUserById``, ``1234.56``). A model that goes on to
use a stored result mostly uses these (measured on the tau-bench, SWE-agent, smolagents and
TapeAgents runs the replay reads): a citation carries them (:mod:`~agent_memory.presentation.citations`)
and the replay counts which of them a prompt still shows (:mod:`agent_memory.replay.used_values`).
"""

from __future__ import annotations

import re

__all__ = ["MIN_VALUE_CHARS", "values_in"]

MIN_VALUE_CHARS = 5
"""Shortest value, in characters: ids, flight numbers and dates are longer; ``2024`` or ``id_1``
are too common to say where a model read them."""

_TOKEN = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.\-]*[A-Za-z0-9_])?")
_VALUE_MARK = re.compile(r"[0-9_]|[a-z][A-Z]")
"""A digit, an underscore or an inner capital (a token holds ASCII only: its digits are 0-9)."""


def _is_value(token: str) -> bool:
    return len(token) >= MIN_VALUE_CHARS and _VALUE_MARK.search(token) is not None


def values_in(text: str | None, *, max_chars: int | None = None) -> list[str]:
    """The key values of ``text`` (see the module docstring), each once, in order of appearance.

    ``max_chars``: stop once the values found, joined by spaces, hold this many characters (a
    citation's line of values fits a few hundred tokens: a 2 MB result is not read whole for it);
    ``None``: all of them."""
    if not text:
        return []
    if max_chars is None:
        return list(dict.fromkeys(token for token in _TOKEN.findall(text) if _is_value(token)))
    found: dict[str, None] = {}
    joined = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token not in found and _is_value(token):
            found[token] = None
            joined += len(token) + 1
            if joined > max_chars:
                break
    return list(found)
