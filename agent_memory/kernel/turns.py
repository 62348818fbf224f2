"""Turn ids and the order of traces within a turn (AutoByteus' turn aggregation and turn ids,
github.com/AutoByteus/autobyteus, autobyteus/memory/).

One user message starts one turn; every trace it causes (tool calls, tool results, the answer)
carries the turn's id and the next ``seq`` of *that* turn, so a tool result arriving after the
next user message keeps its call's turn. Turn ids are ``turn_<n:04d>`` (``turn_0001`` …
``turn_9999``, then ``turn_10000``): compare them with
:func:`~agent_memory.models.traces.turn_number`, never as strings.
"""

from __future__ import annotations

import threading

from agent_memory.errors import InvalidArgumentError, map_exceptions
from agent_memory.models.traces import format_turn_id, turn_number
from agent_memory.storage.traces import TraceStore

__all__ = ["TurnTracker"]

SEQ_MEMORY_TURNS = 1_024
"""Turns whose seq counters are kept in memory behind the newest one; an older turn's counter is
read again from the store if a late trace needs it (its traces were written long before)."""


class TurnTracker:
    """Hands out turn ids and per-turn sequence numbers for one agent; thread-safe.

    After a restart it continues where the store stops: the first :meth:`start_turn` returns the
    turn after the highest one found in the active traces, the archive, the episodes and the
    facts (:meth:`TraceStore.highest_turn_number`), and :meth:`next_seq` of a stored turn
    continues after that turn's highest stored ``seq``.

    Args:
        traces: where earlier turns are; ``None``: no earlier turns (unless ``last_turn_number``).
        last_turn_number: the number of the last turn already used, overriding the store's
            (``0``: the first turn is ``turn_0001``); ``None``: read it from ``store``.

    Raises:
        InvalidArgumentError: if ``last_turn_number`` is not an int >= 0.
        StoreError: if the store cannot be read.
    """

    def __init__(self, traces: TraceStore | None = None, *, last_turn_number: int | None = None) -> None:
        if last_turn_number is None:
            last_turn_number = traces.highest_turn_number() if traces is not None else 0
        elif not isinstance(last_turn_number, int) or isinstance(last_turn_number, bool) or last_turn_number < 0:
            raise InvalidArgumentError(f"last_turn_number must be an int >= 0, not {last_turn_number!r}")
        self._traces = traces
        self._last = last_turn_number
        self._current: str | None = format_turn_id(last_turn_number) if last_turn_number else None
        self._seq: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def current_turn_id(self) -> str | None:
        """The turn started last (after a restart: the highest stored turn); ``None`` before any."""
        with self._lock:
            return self._current

    def start_turn(self) -> str:
        """Start the next turn and return its id (``turn_0001`` for the first one)."""
        with self._lock:
            self._last += 1
            turn_id = format_turn_id(self._last)
            self._seq[turn_id] = 0
            self._current = turn_id
            if len(self._seq) > 2 * SEQ_MEMORY_TURNS:
                oldest = self._last - SEQ_MEMORY_TURNS
                self._seq = {key: seq for key, seq in self._seq.items() if turn_number(key) > oldest}
            return turn_id

    def next_seq(self, turn_id: str) -> int:
        """The next ``seq`` of ``turn_id`` (1 for its first trace). Each call returns a new one.

        A turn this tracker did not start (a stored one, after a restart) continues after its
        highest stored seq; a turn numbered above every started turn counts as started, so
        :meth:`start_turn` never hands out its id again.

        Raises:
            InvalidArgumentError: if ``turn_id`` is malformed.
            StoreError: if the store cannot be read.
        """
        with map_exceptions("TurnTracker.next_seq"):
            number = turn_number(turn_id)
        with self._lock:
            if turn_id not in self._seq:
                stored = self._traces.find_turn(turn_id) if self._traces is not None else []
                self._seq[turn_id] = max((item.seq for item in stored), default=0)
                if number > self._last:
                    self._last = number
                    self._current = turn_id
            self._seq[turn_id] += 1
            return self._seq[turn_id]
