"""Two test runs on one machine leave each other alone (issue 27, item 6): a second pytest session
makes pytest's temporary tree private (``pytest-of-<user>``, mode 0700) and prunes old sessions'
trees, so the suite's Postgres (run by pgserver as the user ``pgserver`` when the suite runs as
root) must keep its data elsewhere. Two real pytest sessions in subprocesses sharing one temporary
root, as two runs on one machine share ``/tmp``: the first runs the suite's own ``postgres_server``
fixture (this directory's conftest.py) and keeps using its server after the second has run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from agent_memory.testing.servers import POSTGRES_URL_ENV

CONFTEST = Path(__file__).with_name("conftest.py")
SESSION_TIMEOUT_S = 300.0

FIRST_SESSION = textwrap.dedent('''
    import os
    import time
    from pathlib import Path

    import psycopg

    def test_the_server_outlives_another_session(postgres_server):
        url = postgres_server.new_database()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (n integer)")
            conn.execute("INSERT INTO kept VALUES (1)")
        flags = Path(os.environ["AM_SESSION_FLAGS"])
        (flags / "up").touch()
        deadline = time.monotonic() + 300
        while not (flags / "go").exists():
            assert time.monotonic() < deadline, "the second session never ended"
            time.sleep(0.1)
        with psycopg.connect(postgres_server.url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")  # what the server does every 5 minutes and at shutdown
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT n FROM kept").fetchall() == [(1,)]
        assert postgres_server.new_database()
    ''')

SECOND_SESSION = textwrap.dedent('''
    def test_a_temporary_file(tmp_path):
        (tmp_path / "note.txt").write_text("x")
        assert (tmp_path / "note.txt").read_text() == "x"
    ''')


def _pytest(directory: Path) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(directory), str(directory)]


def test_a_second_session_leaves_the_suites_postgres_alone(tmp_path: Path) -> None:
    first, second, flags, temproot = (tmp_path / name for name in ("first", "second", "flags", "temproot"))
    for directory in (first, second, flags, temproot):
        directory.mkdir()
    shutil.copy(CONFTEST, first / "conftest.py")  # the suite's fixtures, as they are
    (first / "test_first.py").write_text(FIRST_SESSION, encoding="utf-8")
    (second / "test_second.py").write_text(SECOND_SESSION, encoding="utf-8")
    # Both sessions without --basetemp (as `make test` runs), under one temporary root.
    env = {**os.environ, "PYTEST_DEBUG_TEMPROOT": str(temproot), "AM_SESSION_FLAGS": str(flags)}
    env.pop(POSTGRES_URL_ENV, None)  # a server of the session's own, not one named by the environment
    log = (tmp_path / "first.log").open("wb")
    one = subprocess.Popen(_pytest(first), cwd=first, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + SESSION_TIMEOUT_S
        while not (flags / "up").exists() and one.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (flags / "up").exists(), (tmp_path / "first.log").read_text(errors="replace")
        two = subprocess.run(_pytest(second), cwd=second, env=env, capture_output=True, text=True,
                             timeout=SESSION_TIMEOUT_S)
        assert two.returncode == 0, two.stdout + two.stderr
        (flags / "go").touch()
        one.wait(timeout=SESSION_TIMEOUT_S)
    finally:
        if one.poll() is None:
            one.kill()
            one.wait()
        log.close()
    output = (tmp_path / "first.log").read_text(errors="replace")
    assert one.returncode == 0 and "1 passed" in output, output
