"""Foreground calls and the background thread that steps back for them.

One memory's indexing thread (:mod:`agent_memory.index.upkeep`) shares the interpreter lock with
the calls an agent waits on: each time such a call releases it (a write, an fsync, a hash), the
thread takes it and keeps it for up to the switch interval (5 ms,
https://docs.python.org/3/library/sys.html#sys.setswitchinterval). :class:`Foreground` counts those
calls, and the thread pauses at its checkpoints while one runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

MAX_STEP_BACK_S = 5.0
"""Longest the indexing thread steps back for foreground calls at one checkpoint, in seconds: calls
that never stop (one thread storing or querying without a pause) slow indexing down to a unit of
work per this many seconds, never stop it."""


class Foreground:
    """The foreground calls in progress on one memory (a ``store``, a ``query``, an agent's step),
    which its indexing thread steps back for.

    The indexing thread shares the interpreter lock with them: each time a call releases it (a
    write, an fsync, a hash), the thread takes it and keeps it for up to the switch interval (5 ms),
    and a call running Python beside it gets about half of the interpreter; a 666 KB JSON table
    took 121-132 ms to store beside it instead of ~45 ms. So the thread pauses at its checkpoints
    (between items and between the stages of a batch, never holding a lock) while a call runs.
    A call that waits for the thread (a query for its own writes, back pressure, ``flush_index``)
    steps :meth:`aside` for the wait."""

    def __init__(self) -> None:
        self._calls = 0
        self._changed = threading.Condition(threading.Lock())
        self._depth = threading.local()
        self.paused = False
        """Whether the indexing thread is stepping back now (read by tests and reports)."""

    def _add(self, calls: int) -> None:
        with self._changed:
            self._calls += calls
            if self._calls == 0:
                self._changed.notify_all()

    @contextmanager
    def call(self) -> Iterator[None]:
        """A foreground call of this thread (nested calls count once)."""
        depth = getattr(self._depth, "value", 0)
        self._depth.value = depth + 1
        if depth == 0:
            self._add(1)
        try:
            yield
        finally:
            self._depth.value = depth
            if depth == 0:
                self._add(-1)

    @contextmanager
    def aside(self) -> Iterator[None]:
        """This thread waits for the indexing thread: not a foreground call meanwhile."""
        depth = getattr(self._depth, "value", 0)
        if depth:
            self._depth.value = 0
            self._add(-1)
        try:
            yield
        finally:
            if depth:
                self._add(1)
                self._depth.value = depth

    def step_back(self, stopping: Callable[[], bool], *, paused: bool = True) -> None:
        """The indexing thread's checkpoint: wait while a foreground call runs (at most
        :data:`MAX_STEP_BACK_S`), or until ``stopping()``. ``paused``: shown as :attr:`paused`
        meanwhile (the indexing thread's; not another thread's, opening the index)."""
        with self._changed:
            if not self._calls:
                return
            if paused:
                self.paused = True
            try:
                self._changed.wait_for(lambda: not self._calls or stopping(), timeout=MAX_STEP_BACK_S)
            finally:
                if paused:
                    self.paused = False

    def wake(self) -> None:
        """Let a stepping-back thread look again (the memory is closing)."""
        with self._changed:
            self._changed.notify_all()
