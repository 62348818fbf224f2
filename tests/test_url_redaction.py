"""No URL password is shown anywhere (issue 37, items 3 and 8): not in an exception (its message,
notes, or any exception chained to it), a log record, the command line's output or a notice, for
each form of Postgres URL that once leaked one (an upper-case scheme, a bad ``%`` escape, an
unclosed ``[``, an unencoded ``@``, ``?password=``); an upper-case scheme connects; a misspelt
scheme is an error, never a directory. A third party's backend whose messages quote the URL is
tested in ``test_backend_schemes.py``.

Every URL here names port 1 of 127.0.0.1, which refuses at once, or the suite's real Postgres
(pgserver's)."""

from __future__ import annotations

import logging
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.cli import app
from agent_memory.errors import AgentMemoryError, ConfigurationError
from agent_memory.observers import IndexReadOnly, NoticeRecorder
from agent_memory.storage import open_backend
from agent_memory.storage.common import describe
from agent_memory.storage.inprocess import InProcessBackend
from agent_memory.storage.urls import redact_error, redacted_text, redacted_url
from agent_memory.testing import PostgresServer

FAST = MemoryConfig(index_on_store=False)

SECRET_PARTS = ("Hunter2", "Qwerty")
"""Every password below holds both: neither may show, whole or in part."""
SECRET = "".join(SECRET_PARTS)

LEAKY_URLS = {
    "upper-case scheme": "PostgreSQL://alice:Hunter2Qwerty@127.0.0.1:1/db",
    "bad % escape": "postgresql://alice:Hunter2%ZZQwerty@127.0.0.1:1/db",
    "unclosed [": "postgresql://alice:Hunter2Qwerty@[::1:1/db",
    "unencoded @": "postgresql://alice:Hunter2@Qwerty@127.0.0.1:1/db",
    "?password=": "postgresql://alice@127.0.0.1:1/db?password=Hunter2Qwerty",
}


def _assert_hidden(text: str) -> None:
    for part in SECRET_PARTS:
        assert part not in text, text


def _shown(exc: BaseException) -> str:
    """All a traceback of ``exc`` shows: its message and notes and those of every exception
    chained to it."""
    return "".join(traceback.format_exception(exc))


# -- exceptions, notes and log records ------------------------------------------------------------
@pytest.mark.parametrize("url", LEAKY_URLS.values(), ids=LEAKY_URLS.keys())
def test_no_password_in_the_error_its_chain_or_the_log(url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(AgentMemoryError) as raised:
        AgentMemory("a", backend=url, config=FAST)
    _assert_hidden(_shown(raised.value))
    assert "alice" in str(raised.value) or "127.0.0.1" in str(raised.value)  # it still says which database
    _assert_hidden(caplog.text)
    _assert_hidden(" ".join(record.getMessage() for record in caplog.records))


def test_an_upper_case_scheme_reaches_the_server() -> None:
    # libpq knows only "postgresql://" and "postgres://" and quoted the whole URL back
    with pytest.raises(AgentMemoryError, match="the Postgres server at 127.0.0.1:1 cannot be reached"):
        AgentMemory("a", backend=LEAKY_URLS["upper-case scheme"], config=FAST)


def test_an_upper_case_scheme_connects(postgres_server: PostgresServer) -> None:
    url = postgres_server.new_database()
    scheme, sep, rest = url.partition("://")
    memory = AgentMemory("a", backend=f"{scheme.upper()}{sep}{rest}", config=FAST)
    assert memory.get(memory.store("by an upper-case scheme")).content == "by an upper-case scheme"
    assert memory.backend.url.startswith("postgresql://")


def test_an_unencoded_at_is_refused_naming_the_fix() -> None:
    with pytest.raises(ConfigurationError, match="holds an '@': percent-encode it as '%40'") as raised:
        AgentMemory("a", backend=LEAKY_URLS["unencoded @"], config=FAST)
    assert "'postgresql://alice:***@127.0.0.1:1/db'" in str(raised.value)


def test_a_password_parameter_is_hidden_in_what_a_working_memory_shows(postgres_server: PostgresServer) -> None:
    url = postgres_server.new_database() + "&password=Hunter2Qwerty"  # pgserver's URL has a ?host= query
    memory = AgentMemory("a", backend=url, config=FAST)
    memory.store("kept")
    for shown in (memory.backend.url, repr(memory), repr(memory.backend), describe(memory.backend, "a")):
        _assert_hidden(shown)
        assert "password=***" in shown


# -- the command line ----------------------------------------------------------------------------
@pytest.mark.parametrize("url", LEAKY_URLS.values(), ids=LEAKY_URLS.keys())
def test_no_password_on_the_command_line(url: str, tmp_path: Path) -> None:
    for words in (["--backend", url, "list"], ["migrate", "--from", url, "--to", str(tmp_path / "copy")]):
        result = CliRunner().invoke(app, words)
        assert result.exit_code == 1 and result.stderr.startswith("Error: "), (result.stdout, result.stderr)
        _assert_hidden(result.stdout + result.stderr)


def test_no_password_from_the_installed_command(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "agent_memory.cli", "--backend", LEAKY_URLS["bad % escape"], "list"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 1 and done.stderr.startswith("Error: cannot prepare the database "), done.stderr
    assert 'invalid percent-encoded token: "***"' in done.stderr
    _assert_hidden(done.stdout + done.stderr)


# -- notices --------------------------------------------------------------------------------------
class _ThirdPartyBackend(InProcessBackend):
    """A third party's backend whose own description of an agent quotes its URL with the
    password; ``frozen``: its storage cannot be written (a read-only role)."""

    frozen = False

    def describe(self, agent_id: str) -> str:
        return f"thirdparty://alice:{SECRET}@host/db?password={SECRET} (agent {agent_id})"

    def read_only(self, agent_id: str) -> bool:
        return self.frozen


def test_no_password_in_a_notice_or_its_log_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    backend = _ThirdPartyBackend("redaction-notices")
    AgentMemory("a", backend=backend, config=FAST).store("stored, not indexed yet")
    backend.frozen = True
    recorder = NoticeRecorder()
    memory = AgentMemory("a", backend=backend, config=FAST, observers=[recorder])
    memory.query(text="stored", limit=1)  # the item cannot be indexed in a read-only memory: a notice says where
    notices = recorder.of_type(IndexReadOnly)
    assert notices and notices[0].path == "thirdparty://alice:***@host/db?password=*** (agent a)"
    _assert_hidden(" ".join(notice.model_dump_json() for notice in recorder.notices))
    _assert_hidden(caplog.text)


# -- misspelt schemes -----------------------------------------------------------------------------
@pytest.mark.parametrize("given", ["://x", "1abc://x", "my_db://alice:Hunter2Qwerty@h/db", " post gres://x"])
def test_a_misspelt_scheme_is_an_error_not_a_directory(given: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match=r"is not a URL: .*(is not a URL scheme|has no scheme)") as raised:
        AgentMemory("a", backend=given, config=FAST)
    _assert_hidden(str(raised.value))
    monkeypatch.setenv("AGENT_MEMORY_URL", given)
    with pytest.raises(ConfigurationError, match="is not a URL"):
        AgentMemory("a", config=FAST)
    result = CliRunner().invoke(app, ["--backend", given, "list"])
    assert result.exit_code == 1 and "is not a URL" in result.stderr
    result = CliRunner().invoke(app, ["inspect", given])
    assert result.exit_code == 1 and "is not a URL" in result.stderr
    assert list(tmp_path.iterdir()) == []  # no directory ":" or "1abc:" (what such a URL opened before)


def test_a_path_with_a_slash_before_its_colons_is_a_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    backend = open_backend("./a://b")
    assert Path(backend.url) == tmp_path / "a:" / "b"


# -- the one redaction ----------------------------------------------------------------------------
@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://alice:pw@host/db", "postgresql://alice:***@host/db"),
    ("PostgreSQL://alice:pw@host:5432/db", "PostgreSQL://alice:***@host:5432/db"),
    ("postgresql://alice:p%ZZw@host/db", "postgresql://alice:***@host/db"),
    ("postgresql://alice:pw@[::1:1/db", "postgresql://alice:***@[::1:1/db"),
    ("postgresql://alice:p@w/x@host/db", "postgresql://alice:***@host/db"),
    ("postgresql://alice@host/db?sslmode=require&password=pw&x=1",
     "postgresql://alice@host/db?sslmode=require&password=***&x=1"),
    ("postgresql://alice@host/db?PASSWORD=pw", "postgresql://alice@host/db?PASSWORD=***"),
    ("host=h password='a b' sslpassword=k dbname=d", "host=h password=*** sslpassword=*** dbname=d"),
    ("1abc://alice:pw@h", "1abc://alice:***@h"),
    ("postgresql://alice@host/db", "postgresql://alice@host/db"),
    ("postgresql://host:5432/db", "postgresql://host:5432/db"),
    ("/srv/memory", "/srv/memory"),
])
def test_redacted_url(url: str, shown: str) -> None:
    assert redacted_url(url) == shown


def test_redacted_text_masks_a_password_quoted_alone() -> None:
    url = "postgresql://alice:Hunter2%ZZQwerty@h/db"
    assert redacted_text('invalid percent-encoded token: "Hunter2%ZZQwerty"', url) == \
        'invalid percent-encoded token: "***"'
    assert redacted_text("at retPW1@h: no", "postgresql://a:Hunter2@retPW1@h/db") == "at ***@h: no"  # a piece
    assert redacted_text(f"missing '=' after {url!r}", url) == "missing '=' after 'postgresql://alice:***@h/db'"
    assert redacted_text(f"see s3://k:{SECRET}@bucket and token={SECRET}") == "see s3://k:***@bucket and token=***"
    assert redacted_text("a password is needed, max_tokens=5", "postgresql://u:a@h/db") == \
        "*** password is needed, max_tokens=5"  # a password is masked wherever it stands alone


def test_redact_error_cleans_the_whole_chain() -> None:
    url = f"postgresql://alice:{SECRET}@h/db"
    try:
        try:
            try:
                raise OSError(2, f"no route to {url}", url)
            except OSError as exc:
                raise ValueError(f"{SECRET} is wrong") from exc
        except ValueError:
            raise RuntimeError(f"opening {url}")  # noqa: B904 - chained implicitly, as __context__
    except RuntimeError as exc:
        exc.add_note(f"while opening {url}")
        error = redact_error(exc, url)
    _assert_hidden(_shown(error))
    assert "opening postgresql://alice:***@h/db" in _shown(error) and "*** is wrong" in _shown(error)
