"""Ids of the trace memory (after AutoByteus' ``turn_0001`` turn ids and its ``rt_`` / ``ep_`` /
``sem_`` prefixes, github.com/AutoByteus/autobyteus): turns, raw traces, windows, episodes, facts.

Every id is derived, never random, so ids cannot collide and a retried write is recognised:

- turn: ``turn_<n:04d>`` (``turn_0001`` … ``turn_9999``, then ``turn_10000``, ``turn_123456``):
  sort by :func:`turn_number`, never as text (``"turn_10000" < "turn_9999"`` as strings).
- raw trace: ``rt_<turn n:04d>_<seq:04d>`` (:func:`raw_trace_id`), e.g. ``rt_0001_0003``; unique
  because the :class:`~agent_memory.kernel.turns.TurnTracker` hands out each (turn, seq) once.
- window: ``win_<first turn n>_<last turn n>_<8 hex of sha256 of the sorted turn ids>``
  (:func:`window_id_for`); the same turns always give the same window id.
- episode: ``ep_`` + the window id's tail (:func:`episodic_id_for`): one summary per window.
- fact: ``sem_`` + 16 hex of sha256 of the normalised fact (:func:`semantic_id_for`): one line per
  fact, whatever its case or spacing.

Ids read from other writers (AutoByteus writes ``rt_<ms>``, ``ep_<ms>``, ``sem_<ms>_<n>``) are
accepted as they are, if they use ``A-Z a-z 0-9 _ . : -`` after their prefix.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = [
    "MAX_TRACE_ID_CHARS",
    "episodic_id_for",
    "format_turn_id",
    "normalise_fact",
    "raw_trace_id",
    "semantic_id_for",
    "turn_number",
    "window_id_for",
]

MAX_TRACE_ID_CHARS = 128
"""Longest trace, episode or fact id, in characters."""

# -- ids -------------------------------------------------------------------------------------

_TURN_ID = re.compile(r"turn_([0-9]{4,})")
_WINDOW_ID = re.compile(r"win_[A-Za-z0-9_.:-]{1,124}")
_ITEM_ID = {
    "rt_": re.compile(r"rt_[A-Za-z0-9_.:-]{1,124}"),
    "ep_": re.compile(r"ep_[A-Za-z0-9_.:-]{1,124}"),
    "sem_": re.compile(r"sem_[A-Za-z0-9_.:-]{1,123}"),
}


def format_turn_id(number: int) -> str:
    """The turn id of turn ``number``: ``turn_`` and the number, zero-padded to 4 digits
    (``1`` → ``turn_0001``, ``10000`` → ``turn_10000``).

    Raises:
        ValueError: if ``number`` is negative or not an int.
    """
    if not isinstance(number, int) or isinstance(number, bool) or number < 0:
        raise ValueError(f"a turn number is an int >= 0, not {number!r}")
    return f"turn_{number:04d}"


def turn_number(turn_id: str) -> int:
    """The number of a turn id (``turn_0012`` → 12). Sort turn ids by this, never as strings.

    Raises:
        ValueError: if ``turn_id`` is not a canonical turn id (``turn_`` + at least 4 digits, no
            extra leading zeros: ``turn_00012`` is refused, so one turn has one id).
    """
    match = _TURN_ID.fullmatch(turn_id) if isinstance(turn_id, str) else None
    if match is None or format_turn_id(int(match.group(1))) != turn_id:
        shown = turn_id[:40] if isinstance(turn_id, str) else type(turn_id).__name__
        raise ValueError(f"invalid turn id {shown!r}: turn ids look like 'turn_0001'")
    return int(match.group(1))


def raw_trace_id(turn_id: str, seq: int) -> str:
    """The id of the trace ``seq`` of ``turn_id``: ``rt_<turn n:04d>_<seq:04d>``
    (``turn_0001``, 3 → ``rt_0001_0003``).

    Raises:
        ValueError: if ``turn_id`` is not a turn id or ``seq`` < 1.
    """
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise ValueError(f"seq is an int >= 1, not {seq!r}")
    return f"rt_{turn_number(turn_id):04d}_{seq:04d}"


def window_id_for(turn_ids: Iterable[str]) -> str:
    """The deterministic id of a compaction window: ``win_<first>_<last>_<hash8>``, e.g.
    ``win_0001_0004_9c1e02ab``. Order and repeats of ``turn_ids`` do not matter.

    Raises:
        ValueError: if ``turn_ids`` is empty or holds something that is not a turn id.
    """
    numbers = sorted({turn_number(turn_id) for turn_id in turn_ids})
    if not numbers:
        raise ValueError("a window needs at least one turn id")
    digest = hashlib.sha256(",".join(format_turn_id(n) for n in numbers).encode("ascii")).hexdigest()[:8]
    return f"win_{numbers[0]:04d}_{numbers[-1]:04d}_{digest}"


def episodic_id_for(window_id: str) -> str:
    """The id of the episode summarising ``window_id``: ``ep_`` + the window id without ``win_``."""
    return "ep_" + window_id.removeprefix("win_")


def normalise_fact(fact: str) -> str:
    """``fact`` with runs of whitespace made one space and case folded: what makes two facts one."""
    return " ".join(fact.split()).casefold()


def semantic_id_for(fact: str) -> str:
    """The id of a fact: ``sem_`` + 16 hex digits of sha256 of the fact with case and runs of
    whitespace normalised, so "Use pnpm." and "use  pnpm." are one fact."""
    return "sem_" + hashlib.sha256(normalise_fact(fact).encode("utf-8")).hexdigest()[:16]


def _check_window_id(value: str) -> str:
    if not _WINDOW_ID.fullmatch(value):
        raise ValueError(f"invalid window id {value[:40]!r}: make it with window_id_for()")
    return value


def _check_item_id(value: str, prefix: str) -> str:
    if not _ITEM_ID[prefix].fullmatch(value):
        raise ValueError(
            f"invalid id {value[:40]!r}: expected {prefix!r} and up to {MAX_TRACE_ID_CHARS - len(prefix)} "
            "of A-Z a-z 0-9 _ . : -"
        )
    return value
