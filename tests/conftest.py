"""Shared fixtures: the real data directory, memories on real storage, a real Chroma server.

- ``data_dir``: ``AGENT_MEMORY_DATA`` or ``../shared/data``. Tests that need it skip with a reason
  when it is absent, and fail instead when ``CI=true`` (CI always has it).
- ``memory``: an :class:`AgentMemory` in a fresh temporary directory, with the real embedding
  model, parametrized over the embedded Chroma index and a real ``chroma run`` server (started on
  127.0.0.1 once per session and stopped by PID).
- ``postgres_server``: a real Postgres with pgvector (pgserver's), once per session, with its data
  outside pytest's temporary tree (so a second test session on the machine cannot take it away).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from agent_memory import AgentMemory, MemoryConfig  # noqa: E402
from agent_memory.testing import ChromaServer, PostgresServer  # noqa: E402
from agent_memory import storage  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _data_dir() -> Path:
    env = os.environ.get("AGENT_MEMORY_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real data directory; skips (or fails under CI=true) when it is absent."""
    path = _data_dir()
    if not path.is_dir():
        message = f"real data not found at {path} (set AGENT_MEMORY_DATA or put ../shared beside the project)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    """A real Chroma server on 127.0.0.1 (free port), for the whole session."""
    server = ChromaServer(tmp_path_factory.mktemp("chroma-server"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real Postgres with pgvector for the whole session: ``pgserver``'s, on a Unix socket in a
    private temporary directory removed at the end (outside pytest's temporary tree, which another
    pytest session on the machine makes private and prunes: see :class:`PostgresServer`), or the
    server ``AGENT_MEMORY_TEST_POSTGRES_URL`` names. Each test asks it for a database of its own
    (:meth:`PostgresServer.new_database`)."""
    server = PostgresServer()
    server.start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(autouse=True)
def _close_databases_opened_by_the_test() -> Iterator[None]:
    """Close the database backends a test opened (one connection pool per database URL, kept by
    the process): the suite makes hundreds of databases, and a session's Postgres takes 100 clients."""
    before = set(storage._OPEN)
    yield
    for url, backend in list(storage._OPEN.items()):
        if url not in before and not getattr(backend, "closed", True):
            backend.close()


@pytest.fixture(params=["embedded", "server"])
def memory_config(request: pytest.FixtureRequest) -> MemoryConfig:
    """A MemoryConfig for each Chroma backend."""
    if request.param == "server":
        server: ChromaServer = request.getfixturevalue("chroma_server")
        return MemoryConfig(chroma_mode="server", chroma_port=server.port)
    return MemoryConfig()


@pytest.fixture
def memory(tmp_path: Path, memory_config: MemoryConfig, request: pytest.FixtureRequest) -> AgentMemory:
    """A fresh AgentMemory on each backend (agent id unique per test, as the server is shared)."""
    agent_id = "t-" + format(abs(hash(request.node.nodeid)) % 16**10, "x")
    mem = AgentMemory(agent_id, tmp_path / "memory", config=memory_config)
    if memory_config.chroma_mode == "server":
        mem.clear()  # a rerun of the same test on the same server starts empty
    return mem


@pytest.fixture
def embedded_memory(tmp_path: Path) -> AgentMemory:
    """A fresh AgentMemory with the embedded Chroma index only."""
    return AgentMemory("agent", tmp_path / "memory")
