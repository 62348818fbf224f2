"""Backend URL schemes (agent_memory.storage.schemes): an unknown scheme is an error naming the known
ones, a third party's scheme registered by a real entry point (a ``.dist-info`` directory on
``sys.path``) opens its backend in this process and in others (the conformance suite, run by URL,
cross-process and ``kill -9`` tests included), a factory's failure names its scheme and entry
point, and the built-in schemes work without any installed metadata (a source checkout)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import traceback
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.cli import app
from agent_memory.errors import AgentMemoryError, ConfigurationError
from agent_memory.storage import FileBackend, backend_schemes, open_backend, url_scheme
from agent_memory.storage.schemes import BACKEND_ENTRY_POINT_GROUP, BUILTIN_SCHEMES
from agent_memory.testing import PostgresServer
from agent_memory.testing.conformance import BackendConformance, cross_process_url

ROOT = Path(__file__).resolve().parent.parent
FAST = MemoryConfig(index_on_store=False)

THIRD_PARTY_MODULE = '''
"""A third party's backend: the files backend under the path of a thirdparty:// URL."""
from agent_memory.errors import ConfigurationError
from agent_memory.storage import FileBackend

CALLS = []


def open_thirdparty(url, *, read_only):
    CALLS.append((url, read_only))
    _, _, path = url.partition("://")
    if not path.startswith("/"):
        raise ValueError(f"thirdparty:// needs an absolute path: {url!r}")
    return FileBackend(path, read_only=read_only)


def open_broken(url, *, read_only):
    raise RuntimeError("the thirdparty server said no")


def open_refused(url, *, read_only):
    raise ConfigurationError("thirdparty: wrong password")


def open_nothing(url, *, read_only):
    return None


def open_hijack(url, *, read_only):
    raise AssertionError("a built-in scheme was replaced")


def open_leaky(url, *, read_only):
    password = url.split(":")[2].split("@")[0]
    try:
        raise ConnectionRefusedError(f"connect to {url} refused")
    except ConnectionRefusedError as exc:
        raise RuntimeError(f"cannot log in to {url}: password {password} rejected") from exc


def open_leaky_library_error(url, *, read_only):
    from agent_memory.errors import StoreError

    raise StoreError(f"thirdparty refused {url}") from ValueError(url.split(":")[2].split("@")[0])


def open_leaky_url(url, *, read_only):
    backend = FileBackend("/nonexistent/leaky", read_only=True)
    backend.url = url  # the URL as given, password and all
    return backend
'''


def _distribution(site: Path, name: str, entry_points: str, module: str | None = None) -> None:
    """An installed distribution as an installer leaves one: its module and its ``.dist-info``."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)
    if module is not None:
        (site / "thirdparty_mod.py").write_text(module)


@pytest.fixture(scope="module")
def third_party_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site = tmp_path_factory.mktemp("site")
    _distribution(site, "thirdparty-backend", textwrap.dedent(f"""
        [{BACKEND_ENTRY_POINT_GROUP}]
        thirdparty = thirdparty_mod:open_thirdparty
        broken = thirdparty_mod:open_broken
        refused = thirdparty_mod:open_refused
        nothing = thirdparty_mod:open_nothing
        unloadable = thirdparty_mod_not_installed:open_it
        leaky = thirdparty_mod:open_leaky
        leakylib = thirdparty_mod:open_leaky_library_error
        leakyurl = thirdparty_mod:open_leaky_url
        """), THIRD_PARTY_MODULE)
    return site


@pytest.fixture
def third_party(third_party_site: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The third party's package installed (on ``sys.path``, and on ``PYTHONPATH`` for the
    processes a test starts); yields its module, freshly imported."""
    monkeypatch.syspath_prepend(str(third_party_site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(third_party_site),
                                                                   os.environ.get("PYTHONPATH")])))
    monkeypatch.delitem(sys.modules, "thirdparty_mod", raising=False)
    import thirdparty_mod  # type: ignore[import-not-found]

    yield thirdparty_mod
    sys.modules.pop("thirdparty_mod", None)


# -- URLs and the built-in schemes -----------------------------------------------------------------
def test_a_url_has_a_scheme_and_a_path_has_none() -> None:
    assert url_scheme(" PostgreSQL://u@h/db ") == "postgresql" and url_scheme("file:///srv/m") == "file"
    assert url_scheme("my.backend+v2://x") == "my.backend+v2"
    for path in ("memory", "./memory", "/srv/memory", "a:/b", "://x", "1abc://x", ""):
        assert url_scheme(path) is None, path


def test_the_built_in_schemes_are_the_entry_points_pyproject_declares() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][BACKEND_ENTRY_POINT_GROUP]
    assert declared == dict(BUILTIN_SCHEMES) and {"file", "postgres", "postgresql"} <= set(declared)
    assert {scheme: backend_schemes()[scheme] for scheme in declared} == declared


def test_an_unknown_scheme_is_an_error_naming_the_known_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    known = ", ".join(backend_schemes())
    assert known == ", ".join(sorted(BUILTIN_SCHEMES))  # the built-ins (no third party installed here)
    with pytest.raises(ConfigurationError, match="unknown backend URL scheme 'nosuch'") as raised:
        open_backend("nosuch://x")
    assert f"known: {known} " in str(raised.value) and BACKEND_ENTRY_POINT_GROUP in str(raised.value)
    with pytest.raises(ConfigurationError, match=f"unknown backend URL scheme 'nosuch' .*; known: {known} "):
        AgentMemory("a", backend="nosuch://x")
    with pytest.raises(ConfigurationError, match="unknown backend URL scheme 'mybackend'"):
        AgentMemory("a", backend="MyBackend://x")  # schemes are case-insensitive
    monkeypatch.setenv("AGENT_MEMORY_URL", "nosuch://from-the-environment")
    with pytest.raises(ConfigurationError, match="unknown backend URL scheme 'nosuch'"):
        AgentMemory("a")
    assert list(tmp_path.iterdir()) == []  # no directory "nosuch:" (what such a URL opened before)


def test_a_password_is_not_shown_in_the_error() -> None:
    with pytest.raises(ConfigurationError) as raised:
        open_backend("nosuch://user:secret@host/db")
    assert "secret" not in str(raised.value) and "'nosuch://user:***@host/db'" in str(raised.value)


def test_paths_and_file_urls_open_the_files_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for given in ("memory", "file://memory", f"file://{tmp_path}/memory", f"FILE://{tmp_path}/memory",
                  tmp_path / "memory"):
        backend = open_backend(given)
        assert isinstance(backend, FileBackend) and backend.memory_dir == tmp_path / "memory", given
    assert open_backend("memory") is not open_backend("memory")  # a FileBackend is not shared
    assert open_backend("file://memory", read_only=True).read_only("a")
    memory = AgentMemory("a", backend=f"file://{tmp_path}/memory", config=FAST)
    assert memory.get(memory.store("by a file URL")).content == "by a file URL"
    assert (tmp_path / "memory" / "agents" / "a" / "items.jsonl").is_file()


# -- a third party's scheme -------------------------------------------------------------------------
def test_a_registered_scheme_opens_the_third_partys_backend(third_party: Any, tmp_path: Path) -> None:
    schemes = backend_schemes()
    assert schemes["thirdparty"] == "thirdparty_mod:open_thirdparty" and schemes["file"] == BUILTIN_SCHEMES["file"]
    url = f"thirdparty://{tmp_path}/memory"
    memory = AgentMemory("a", backend=url, config=FAST)
    item_id = memory.store("kept by the third party's backend", tags=["third"])
    assert third_party.CALLS == [(url, False)]
    again = AgentMemory("a", backend=url, config=FAST)  # the process's backend for this URL
    assert again.backend is memory.backend and again.get(item_id).content == "kept by the third party's backend"
    assert [hit.item.id for hit in again.query(tags=["third"], limit=5)] == [item_id]
    assert (tmp_path / "memory" / "agents" / "a" / "items.jsonl").is_file()  # under the URL's path
    reader = open_backend(f"  {url} ", read_only=True)  # blanks ignored; read-only is its own backend
    assert reader is not memory.backend and reader.read_only("a") and third_party.CALLS[-1] == (url, True)
    assert open_backend(url.replace("thirdparty", "ThirdParty", 1)) is not memory.backend  # another URL string
    assert third_party.CALLS[-1][0].startswith("ThirdParty://")  # the factory gets the URL as given


def test_another_process_opens_the_third_partys_scheme(third_party: Any, tmp_path: Path) -> None:
    url = f"thirdparty://{tmp_path}/memory"
    item_id = AgentMemory("a", backend=url, config=FAST).store("written here")
    script = textwrap.dedent(f"""
        from agent_memory import AgentMemory, MemoryConfig
        memory = AgentMemory("a", backend={url!r}, config=MemoryConfig(index_on_store=False))
        print(memory.get({item_id!r}).content)
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "written here"


@pytest.mark.parametrize(("scheme", "expected"), [
    ("broken", r"backend URL scheme 'broken': entry point 'broken = thirdparty_mod:open_broken' "
               r"\(thirdparty-backend 1.0\) failed to open 'broken://x': RuntimeError: the thirdparty server said no"),
    ("nothing", r"entry point 'nothing = thirdparty_mod:open_nothing' \(thirdparty-backend 1.0\) returned a "
                r"NoneType, not a Backend"),
    ("unloadable", r"backend URL scheme 'unloadable': entry point 'unloadable = thirdparty_mod_not_installed:open_it' "
                   r"\(thirdparty-backend 1.0\) failed to load: ModuleNotFoundError"),
])
def test_a_failing_factory_is_named_with_its_scheme(third_party: Any, scheme: str, expected: str) -> None:
    with pytest.raises(ConfigurationError, match=expected) as raised:
        AgentMemory("a", backend=f"{scheme}://x")
    assert raised.value.__cause__ is not None or scheme == "nothing"


def test_a_library_error_of_a_factory_keeps_its_type_with_a_note(third_party: Any) -> None:
    with pytest.raises(ConfigurationError) as raised:
        open_backend("refused://user:secret@host")
    assert str(raised.value) == "thirdparty: wrong password"  # the factory's own error, as it raised it
    note = " ".join(getattr(raised.value, "__notes__", []))
    assert "backend URL scheme 'refused'" in note and "refused = thirdparty_mod:open_refused" in note
    assert "secret" not in note


@pytest.mark.parametrize("scheme", ["leaky", "leakylib", "leakyurl"])
def test_a_factorys_messages_never_show_the_password(third_party: Any, scheme: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    # the factory quotes the URL, and the password alone, in its error and in the errors chained to
    # it; or returns a backend whose url holds the password
    caplog.set_level(logging.DEBUG)
    url = f"{scheme}://alice:Hunter2Qwerty@host/db"
    with pytest.raises(AgentMemoryError) as raised:
        AgentMemory("a", backend=url, config=FAST)
    shown = "".join(traceback.format_exception(raised.value))  # messages, notes, the chain
    assert "Hunter2Qwerty" not in shown and "Hunter2Qwerty" not in caplog.text
    assert f"{scheme}://alice:***@host/db" in shown and f"{scheme} = thirdparty_mod:" in shown
    result = CliRunner().invoke(app, ["--backend", url, "list"])
    assert result.exit_code == 1 and result.stderr.startswith("Error: ")
    assert "Hunter2Qwerty" not in result.stdout + result.stderr


def test_a_built_in_scheme_cannot_be_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    site = tmp_path / "site"
    _distribution(site, "hijacker", f"[{BACKEND_ENTRY_POINT_GROUP}]\nfile = thirdparty_mod:open_hijack\n", THIRD_PARTY_MODULE)
    monkeypatch.syspath_prepend(str(site))
    assert backend_schemes()["file"] == BUILTIN_SCHEMES["file"]
    assert "ignored entry point 'file = thirdparty_mod:open_hijack' (hijacker 1.0): the scheme 'file' is built in" \
        in caplog.text
    assert isinstance(open_backend(f"file://{tmp_path}/memory"), FileBackend)


def test_built_in_schemes_work_without_installed_metadata(tmp_path: Path, postgres_server: PostgresServer) -> None:
    # A source checkout that was never installed: the interpreter without its site-packages (-S),
    # the checkout's packages and every installed dependency on PYTHONPATH, but no metadata of
    # agent-memory (neither its .dist-info nor the checkout's .egg-info) anywhere on the path.
    import sysconfig

    site_packages = Path(sysconfig.get_paths()["purelib"])
    tree = tmp_path / "path"
    tree.mkdir()
    for entry in site_packages.iterdir():
        if not entry.name.startswith(("agent_memory", "__editable__", "actions", "compaction_plugins")) \
                and entry.suffix != ".pth":
            (tree / entry.name).symlink_to(entry)
    for package in ("agent_memory", "actions", "compaction_plugins"):
        (tree / package).symlink_to(ROOT / package)
    database = postgres_server.new_database()
    script = textwrap.dedent(f"""
        from importlib.metadata import PackageNotFoundError, entry_points, version
        try:
            version("agent-memory")
            raise SystemExit("agent-memory's metadata is installed")
        except PackageNotFoundError:
            pass
        assert list(entry_points(group="agent_memory.backends")) == []
        from agent_memory import AgentMemory, MemoryConfig
        from agent_memory.storage import backend_schemes
        print(",".join(backend_schemes()))
        for backend in ({f"file://{tmp_path}/memory"!r}, {database!r}):
            memory = AgentMemory("a", backend=backend, config=MemoryConfig(index_on_store=False))
            print(type(memory.backend).__name__, memory.get(memory.store("no metadata")).content)
            memory.backend.close()
        """)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    env.pop("AGENT_MEMORY_URL", None)
    done = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [",".join(sorted(BUILTIN_SCHEMES)), "FileBackend no metadata",
                                        "PostgresBackend no metadata"]


# -- the conformance suite ------------------------------------------------------------------------------
def test_the_suite_skips_cross_process_tests_of_an_object_saying_why(tmp_path: Path) -> None:
    assert cross_process_url(f"thirdparty://{tmp_path}") == f"thirdparty://{tmp_path}"
    assert cross_process_url(tmp_path) == str(tmp_path)
    backend = FileBackend(tmp_path)
    with pytest.raises(pytest.skip.Exception, match=r"cross-process test: the new_backend fixture gave a FileBackend "
                                                    r"object \(url '.*'\), which another process cannot open; "
                                                    r"return its URL or path"):
        cross_process_url(backend)


class TestThirdPartyBackendByUrl(BackendConformance):
    """The whole conformance suite on the third party's backend, opened by its URL here and in
    every process a test starts (none of its tests is skipped)."""

    @pytest.fixture
    def new_backend(self, third_party: Any, tmp_path: Path) -> str:
        return f"thirdparty://{tmp_path}/memory"
