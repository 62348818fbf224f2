"""The step lock of one memory (seed 003 "step locking"): one process applies events at a time.

The seed keeps the lock as ``currentStepId`` in the thread's record, so a process killed while
stepping leaves the memory locked for good. Here the lock *is* an OS lock: an exclusive
``flock`` on ``events.steplock`` in the agent directory (:class:`filelock.FileLock`), which the
kernel releases when its holder exits, however it exits (``kill -9`` included). The lock file
stays behind and means nothing by itself. Beside it, the event queue keeps a record of the holder
(step id, pid, host, when) for :meth:`StepLock.holder`; a record left by a dead holder is ignored,
because the OS lock, not the record, says whether the lock is held.

The lock is advisory and local: processes on one machine (or on a file system whose ``flock``
works across machines) exclude each other; it is not meant for a directory shared over NFS.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout
from pydantic import BaseModel, ConfigDict

from agent_memory.agent.queue import EventQueue
from agent_memory.errors import InvalidArgumentError, LockTimeoutError

__all__ = ["DEFAULT_STEP_LOCK_TIMEOUT_S", "STEP_ID_PREFIX", "STEP_LOCK_FILE", "StepLock", "StepLockHolder"]

STEP_LOCK_FILE = "events.steplock"
"""File name of the OS lock, in the agent directory."""

STEP_ID_PREFIX = "step_"
"""Prefix of step ids: ``step_`` + 16 random hex digits, one per acquisition."""

DEFAULT_STEP_LOCK_TIMEOUT_S = 60.0
"""How long a step waits for another process's step by default, in seconds (a step may run a
compaction with an LLM summarizer)."""


class StepLockHolder(BaseModel):
    """Who holds a step lock."""

    model_config = ConfigDict(frozen=True)

    step_id: str
    """``step_`` + 16 hex digits, new for every acquisition."""
    pid: int
    """The holder's process id (on ``host``)."""
    host: str
    """The holder's host name."""
    acquired_at: float
    """When it took the lock, in seconds since the Unix epoch."""


def _timeout(timeout_s: float) -> float:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) or timeout_s < 0 or timeout_s != timeout_s:
        raise InvalidArgumentError(f"timeout_s must be a number >= 0 (float('inf') waits for ever), not {timeout_s!r}")
    return -1 if timeout_s == float("inf") else float(timeout_s)


class StepLock:
    """The step lock of the memory whose queue is ``queue``: not re-entrant; one holder at a
    time across processes *and* across StepLock objects of one process.

    Args:
        queue: the memory's event queue (the lock file sits beside it; it records the holder).
    """

    def __init__(self, queue: EventQueue) -> None:
        self.queue = queue
        self.path: Path = queue.agent_dir / STEP_LOCK_FILE
        self._lock = FileLock(str(self.path), thread_local=False)
        self._mutex = threading.Lock()
        self._step_id: str | None = None

    def __repr__(self) -> str:
        return f"StepLock({str(self.path)!r}, held={self._step_id is not None})"

    def acquire(self, timeout_s: float = DEFAULT_STEP_LOCK_TIMEOUT_S) -> str:
        """Take the lock, waiting up to ``timeout_s`` seconds (``0``: try once; ``inf``: for
        ever), and return the new step id. Another thread using this object waits like another
        process; the thread that holds it must not acquire it again (it would wait for itself).

        Raises:
            LockTimeoutError: if another holder kept it longer than ``timeout_s``.
            InvalidArgumentError: for a negative or non-numeric timeout.
            StoreError: if the lock file or the holder record cannot be written.
        """
        wait = _timeout(timeout_s)
        deadline = time.monotonic() + wait if wait >= 0 else None
        if not self._mutex.acquire(timeout=wait):
            raise LockTimeoutError(f"the step lock of {self.queue.agent_dir} is held by another thread of this "
                                   f"process; waited {timeout_s} s")
        try:
            self.queue.agent_dir.mkdir(parents=True, exist_ok=True)
            left = max(0.0, deadline - time.monotonic()) if deadline is not None else -1
            try:
                self._lock.acquire(timeout=left)
            except Timeout as exc:
                holder = self.holder()
                who = f" by pid {holder.pid} on {holder.host} (step {holder.step_id})" if holder else ""
                raise LockTimeoutError(f"the step lock of {self.queue.agent_dir} is held{who}; waited {timeout_s} s") from exc
            step_id = STEP_ID_PREFIX + secrets.token_hex(8)
            try:
                self.queue.write_holder(step_id, pid=os.getpid(), host=socket.gethostname(), acquired_at=time.time())
            except BaseException:
                self._lock.release()
                raise
        except BaseException:
            self._mutex.release()
            raise
        self._step_id = step_id
        return step_id

    def release(self) -> None:
        """Let the lock go. Does nothing if not held."""
        if self._step_id is None:
            return
        self._step_id = None  # the holder record stays: the OS lock, not the record, says who holds it
        try:
            self._lock.release()
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
        asked of the OS, so a holder that died does not count."""
        if self._step_id is not None:
            return True
        if not self.path.exists():
            return False
        probe = FileLock(str(self.path), thread_local=False)
        try:
            probe.acquire(timeout=0)
        except Timeout:
            return True
        probe.release()
        return False

    def holder(self) -> StepLockHolder | None:
        """Who holds the lock; ``None`` when nobody does (a dead holder's record is ignored). May
        be ``None`` for an instant after a holder took the OS lock, before it wrote its record."""
        if not self.is_locked():
            return None
        record = self.queue.read_holder()
        if record is None:
            return None
        step_id, pid, host, acquired_at = record
        return StepLockHolder(step_id=step_id, pid=pid, host=host, acquired_at=acquired_at)

    def current_step_id(self) -> str | None:
        """The step id of the holder, or ``None`` when the lock is free."""
        holder = self.holder()
        return holder.step_id if holder is not None else None
