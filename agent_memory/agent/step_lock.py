"""The step lock of one memory: one process applies events at a time (the step locking of team9's
agent framework, github.com/team9ai/team9, apps/server/libs/agent-framework/ at b753b7c0).

team9 keeps the lock as ``currentStepId`` in the thread's record, so a process killed while
stepping leaves the memory locked for good. Here the lock is the backend's ``step`` lock
(:class:`~agent_memory.storage.contracts.Locks`): an OS ``flock`` for files, an advisory lock of
the holder's session for Postgres, which dies with its holder however it exits (``kill -9``
included). The backend records who holds it (step id, pid, host, when) for :meth:`StepLock.holder`;
a record left by a dead holder is ignored, because the lock, not the record, says who holds it.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from pydantic import BaseModel, ConfigDict

from agent_memory.errors import InvalidArgumentError, LockTimeoutError
from agent_memory.storage.contracts import Locks

__all__ = ["DEFAULT_STEP_LOCK_TIMEOUT_S", "STEP_ID_PREFIX", "STEP_LOCK", "StepLock", "StepLockHolder"]

STEP_LOCK = "step"
"""The name of the lock among the agent's locks (the file backend's ``events.steplock``)."""

STEP_ID_PREFIX = "step_"
"""Prefix of step ids: ``step_`` + 16 random hex digits, one per acquisition."""

DEFAULT_STEP_LOCK_TIMEOUT_S = 60.0
"""How long a step waits for another process's step by default, in seconds (a step may run a
compaction with an LLM summarizer)."""

class StepLockHolder(BaseModel):
    """Who holds a step lock."""

    model_config = ConfigDict(frozen=True)

    step_id: str
    """``step_`` + 16 hex digits, new for every acquisition ("" when the backend kept no record)."""
    pid: int
    """The holder's process id (on ``host``; 0: unknown)."""
    host: str
    """The holder's host name."""
    acquired_at: float
    """When it took the lock, in Unix time (seconds)."""


def _timeout(timeout_s: float) -> float:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or timeout_s < 0 or timeout_s != timeout_s:
        raise InvalidArgumentError(f"timeout_s must be a number >= 0 (float('inf') waits for ever), not {timeout_s!r}")
    return -1 if timeout_s == float("inf") else float(timeout_s)


class StepLock:
    """The step lock of one agent: not re-entrant; one holder at a time across processes *and*
    across StepLock objects and threads of one process (the backend's locks are).

    Args:
        locks: the agent's locks in the backend.
        key: names the agent in messages (the backend's URL and the agent id).
    """

    def __init__(self, locks: Locks, key: str) -> None:
        self.locks = locks
        self.key = key
        self._mutex = threading.Lock()
        """This object's own: one of its holders at a time (acquire and release may be in two threads)."""
        self._held: ExitStack | None = None
        self._step_id: str | None = None

    def __repr__(self) -> str:
        return f"StepLock({self.key!r}, held={self._step_id is not None})"

    def acquire(self, timeout_s: float = DEFAULT_STEP_LOCK_TIMEOUT_S) -> str:
        """Take the lock, waiting up to ``timeout_s`` seconds (``0``: try once; ``inf``: for
        ever), and return the new step id. Another thread waits like another process; the thread
        that holds it must not acquire it again (it would wait for itself).

        Raises:
            LockTimeoutError: if another holder kept it longer than ``timeout_s``.
            InvalidArgumentError: for a negative or non-numeric timeout.
            StoreError: if the lock cannot be taken for another reason.
        """
        wait = _timeout(timeout_s)
        deadline = time.monotonic() + wait if wait >= 0 else None
        if not self._mutex.acquire(timeout=wait):
            raise LockTimeoutError(f"the step lock of {self.key} is held by another thread of this process; "
                                   f"waited {timeout_s} s")
        try:
            left = max(0.0, deadline - time.monotonic()) if deadline is not None else float("inf")
            step_id = STEP_ID_PREFIX + secrets.token_hex(8)
            held = ExitStack()
            held.enter_context(self.locks.hold(STEP_LOCK, timeout_s=left, note=step_id))
        except BaseException:
            self._mutex.release()
            raise
        self._held, self._step_id = held, step_id
        return step_id

    def release(self) -> None:
        """Let the lock go. Does nothing if not held."""
        if self._step_id is None or self._held is None:
            return
        held, self._held, self._step_id = self._held, None, None
        try:
            held.close()
        finally:
            self._mutex.release()

    @contextmanager
    def hold(self, timeout_s: float = DEFAULT_STEP_LOCK_TIMEOUT_S) -> Iterator[str]:
        """``with lock.hold() as step_id:`` — :meth:`acquire`, then :meth:`release` on leaving."""
        step_id = self.acquire(timeout_s)
        try:
            yield step_id
        finally:
            self.release()

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._step_id is not None

    def is_locked(self) -> bool:
        """Whether anyone (this object, another in this process, another process) holds the lock:
        asked of the backend, so a holder that died does not count."""
        return self._step_id is not None or self.locks.probe(STEP_LOCK) is not None

    def holder(self) -> StepLockHolder | None:
        """Who holds the lock; ``None`` when nobody does (a dead holder's record is ignored)."""
        found = self.locks.probe(STEP_LOCK)
        if found is None:
            return None
        return StepLockHolder(step_id=found.note, pid=found.pid, host=found.host, acquired_at=found.since)

    def current_step_id(self) -> str | None:
        """The step id of the holder, or ``None`` when the lock is free."""
        holder = self.holder()
        return holder.step_id if holder is not None else None
