"""Several connections opening one new SQLite file at once (two memories on a directory, the
indexing thread and a query): each switches it to WAL mode, and SQLite answers one of two racing
switches "database is locked" at once, without waiting (storage/sqlite_wal.py). Seen in
test_memory_lifecycle about once in 15 runs, and in 5 of 30 tries of four threads opening one new
keyword index; every opener must now succeed."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_memory.storage.files.journal import FileJournal
from agent_memory.storage.lexical import LexicalIndex

THREADS = 4
TRIES = 60


def _open_together(open_one: Callable[[Path], object], close: Callable[[object], None], root: Path) -> list[str]:
    """Open ``TRIES`` new files, each by ``THREADS`` threads released at once; the errors seen."""
    errors: list[str] = []
    for n in range(TRIES):
        path = root / f"try-{n}"
        path.mkdir()
        barrier = threading.Barrier(THREADS)
        opened: list[object] = []

        def one() -> None:
            barrier.wait()
            try:
                opened.append(open_one(path))
            except Exception as exc:  # noqa: BLE001 - every failure is the finding
                errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=one) for _ in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for each in opened:
            close(each)
    return errors


def test_threads_opening_one_new_keyword_index_at_once_all_succeed(tmp_path: Path) -> None:
    errors = _open_together(lambda d: LexicalIndex(d / "lexical.sqlite3"), lambda i: i.close(), tmp_path)  # type: ignore[attr-defined]
    assert errors == []
    assert sqlite3.connect(tmp_path / "try-0" / "lexical.sqlite3").execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_threads_opening_one_new_event_journal_at_once_all_succeed(tmp_path: Path) -> None:
    def open_journal(d: Path) -> FileJournal:
        journal = FileJournal(d)
        journal.count()  # the connection opens at first use
        return journal

    errors = _open_together(open_journal, lambda j: j.close(), tmp_path)  # type: ignore[attr-defined]
    assert errors == []


def test_a_database_that_stays_locked_is_an_error_after_the_timeout(tmp_path: Path) -> None:
    from agent_memory.storage.sqlite_wal import use_wal

    path = tmp_path / "held.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")  # rollback journal: nobody else may even read
    other = sqlite3.connect(path, timeout=0)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        use_wal(other, timeout_s=0.2)
    holder.execute("COMMIT")
    use_wal(other, timeout_s=5)
    assert other.execute("PRAGMA journal_mode").fetchone() == ("wal",)
