"""The file backend's locks: an exclusive ``flock`` on a file in the agent directory per name.

The operating system releases an ``flock`` when its holder exits, however it exits (``kill -9``
included), so a killed holder never blocks anyone; the lock file stays behind and means nothing by
itself. Beside it, ``<lock file>.holder`` records who took it (pid, host, when, a note), read by
:meth:`FileLocks.probe` only while the lock is held: a record left by a dead holder is ignored,
because the OS lock, not the record, says whether the lock is held.

The locks are advisory and local: processes on one machine (or on a file system whose ``flock``
works across machines) exclude each other; a directory shared over NFS needs the Postgres backend.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from agent_memory.errors import LockTimeoutError, StoreError
from agent_memory.storage.contracts import LockHolder

__all__ = ["DEFAULT_LOCK_TIMEOUT_S", "LOCK_FILES", "FileLocks"]

DEFAULT_LOCK_TIMEOUT_S = 60.0
"""How long :meth:`FileLocks.hold` waits by default, in seconds."""

LOCK_FILES = {"step": "events.steplock", "index": "index.lock", "kernel": "kernel.lock"}
"""The lock files of the library's locks (the names earlier versions used); any other name ``n``
is ``n.lock``."""


_IN_PROCESS: dict[str, threading.Lock] = {}
"""Per lock file, the lock that makes the threads of this process wait for each other (an ``flock``
excludes processes; two descriptors of one process are excluded too, but a thread must not take
the file lock another thread of its process holds through the same descriptor)."""
_IN_PROCESS_LOCK = threading.Lock()


def _thread_lock(path: Path) -> threading.Lock:
    with _IN_PROCESS_LOCK:
        return _IN_PROCESS.setdefault(str(path), threading.Lock())


def _forget_after_fork() -> None:
    """A forked child holds none of its parent's locks."""
    global _IN_PROCESS_LOCK
    _IN_PROCESS.clear()
    _IN_PROCESS_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


class FileLocks:
    """:class:`~agent_memory.storage.contracts.Locks` as files in ``agent_dir``: exclusive between
    processes (``flock``) and between the threads of a process (a lock per file), whichever object
    each holder took it through; not re-entrant; released by any thread (a hold may end in another
    thread than the one that began it).

    Args:
        agent_dir: the agent's directory (created when a lock is first taken).
    """

    def __init__(self, agent_dir: Path) -> None:
        self.agent_dir = agent_dir

    def __repr__(self) -> str:
        return f"FileLocks({str(self.agent_dir)!r})"

    def path(self, name: str) -> Path:
        """The lock file of ``name``."""
        return self.agent_dir / LOCK_FILES.get(name, f"{name}.lock")

    @contextmanager
    def hold(self, name: str, *, timeout_s: float | None = None, note: str = "") -> Iterator[None]:
        """Hold lock ``name`` (see :class:`~agent_memory.storage.contracts.Locks`); ``note`` is
        recorded for :meth:`probe` (a step id)."""
        path = self.path(name)
        wait = DEFAULT_LOCK_TIMEOUT_S if timeout_s is None else timeout_s
        forever = wait == float("inf")
        deadline = None if forever else time.monotonic() + wait
        threads = _thread_lock(path)
        if not threads.acquire(timeout=-1 if forever else wait):
            raise LockTimeoutError(f"the {name} lock of {self.agent_dir} is held by another thread of this "
                                   f"process; waited {wait:g} s")
        try:
            lock = FileLock(str(path), thread_local=False)
            left = -1 if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                self.agent_dir.mkdir(parents=True, exist_ok=True)
                lock.acquire(timeout=left)
            except Timeout as exc:
                holder = self.probe(name)
                who = f" by pid {holder.pid} on {holder.host}" if holder is not None and holder.pid else ""
                raise LockTimeoutError(f"the {name} lock of {self.agent_dir} is held{who}; waited {wait:g} s") from exc
            except OSError as exc:
                raise StoreError(f"cannot lock {path}: {exc}") from exc
            try:
                self._record(path, note)
                yield
            finally:
                lock.release()
        finally:
            threads.release()

    @staticmethod
    def _record(path: Path, note: str) -> None:
        record = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(), "note": note}
        holder = Path(f"{path}.holder")
        try:  # informative only: not synced, and a failure to write it is no failure of the lock
            tmp = holder.with_name(f".{holder.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps(record), encoding="utf-8")
            os.replace(tmp, holder)
        except OSError:
            pass

    def probe(self, name: str) -> LockHolder | None:
        path = self.path(name)
        if not path.exists():
            return None
        other = FileLock(str(path), thread_local=False)  # its own descriptor: conflicts with every holder
        try:
            other.acquire(timeout=0)
        except Timeout:
            pass
        except OSError as exc:
            raise StoreError(f"cannot read the lock {path}: {exc}") from exc
        else:
            other.release()
            return None
        try:
            record = json.loads(Path(f"{path}.holder").read_text(encoding="utf-8"))
            return LockHolder(pid=int(record["pid"]), host=str(record["host"]), since=float(record["since"]),
                              note=str(record.get("note", "")))
        except (OSError, ValueError, KeyError, TypeError):
            return LockHolder(pid=0, host="", since=0.0)
