"""Every built-in backend passes the shipped conformance suite (agent_memory.testing.conformance):
the file backend in a temporary directory, Postgres with pgvector (a real server: pgserver's,
started once per session, a new database per test; or the one AGENT_MEMORY_TEST_POSTGRES_URL names),
the in-process backend (``memory://``), and the file and Postgres backends seen through the
required contract alone, so that the documents, traces and journal the library builds on logs are
checked on durable logs too."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_memory.config import MemoryConfig
from agent_memory.storage.vector import VectorIndex
from agent_memory.storage import FileBackend, open_backend
from agent_memory.storage.contracts import Backend, BackendDefaults, Locks, Log, QuarantineHook
from agent_memory.testing import PostgresServer
from agent_memory.testing.conformance import BackendConformance
from agent_memory.tokens import TokenCounter


class TestFileBackend(BackendConformance):
    @pytest.fixture
    def new_backend(self, tmp_path: Path) -> str:
        return str(tmp_path / "memory")


class TestPostgresBackend(BackendConformance):
    @pytest.fixture
    def new_backend(self, postgres_server: PostgresServer) -> str:
        return postgres_server.new_database()


class TestInProcessBackend(BackendConformance):
    """``memory://``: one module of the contracts' four classes; its data lives in this process,
    so the suite skips its tests of several processes (with that reason)."""

    @pytest.fixture
    def new_backend(self, request: pytest.FixtureRequest) -> str:
        return f"memory://{request.node.name}"  # a new, empty backend per test


class _RequiredOnly(BackendDefaults):
    """A built-in backend seen through the required contract alone, the rest left to
    BackendDefaults (no keyword index, no documents, traces or journal of its own): the library
    then builds those on its durable logs (agent_memory.storage.common), which the suite checks
    here on real files and a real database."""

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.url = inner.url

    def log(self, agent_id: str, name: str, *, on_quarantine: QuarantineHook | None = None) -> Log:
        return self.inner.log(agent_id, name, on_quarantine=on_quarantine)

    def vector_index(self, agent_id: str, config: MemoryConfig, tokens: TokenCounter, *,
                     read_only: bool = False) -> VectorIndex:
        return self.inner.vector_index(agent_id, config, tokens, read_only=read_only)

    def locks(self, agent_id: str) -> Locks:
        return self.inner.locks(agent_id)

    def claim(self, agent_id: str) -> bool:
        return self.inner.claim(agent_id)

    def release_claim(self, agent_id: str) -> None:
        self.inner.release_claim(agent_id)

    def agent_ids(self) -> list[str]:
        return self.inner.agent_ids()

    def close(self) -> None:
        self.inner.close()


class TestFileLogsOnly(BackendConformance):
    @pytest.fixture
    def new_backend(self, tmp_path: Path) -> Backend:
        return _RequiredOnly(FileBackend(tmp_path / "memory"))


class TestPostgresLogsOnly(BackendConformance):
    @pytest.fixture
    def new_backend(self, postgres_server: PostgresServer) -> Backend:
        return _RequiredOnly(open_backend(postgres_server.new_database()))


def test_the_required_contract_is_four_classes_and_few_methods() -> None:
    """What a third party implements: the Backend, its Log, its Locks and its VectorIndex; of the
    Backend only what BackendDefaults leaves abstract."""
    from agent_memory.storage import inprocess

    classes = [inprocess.InProcessBackend, inprocess.InProcessLog, inprocess.InProcessLocks,
               inprocess.InProcessVectorIndex]
    required = {Backend: classes[0], Log: classes[1], Locks: classes[2], VectorIndex: classes[3]}
    methods = 0
    for contract, implementation in required.items():
        names = [n for n, v in vars(contract).items() if callable(v) and not n.startswith("_")]
        assert all(callable(getattr(implementation, n, None)) for n in names), contract.__name__
        if contract is Backend:
            assert set(BackendDefaults.__abstractmethods__) <= set(names)
            names = sorted(BackendDefaults.__abstractmethods__)
        methods += len(names)
    assert methods == 19  # Backend 7, Log 3, Locks 2, VectorIndex 7
    source = Path(inprocess.__file__).read_text(encoding="utf-8")
    assert len(source.splitlines()) <= 400
    assert sorted(name for name in vars(inprocess) if isinstance(getattr(inprocess, name), type)
                  and getattr(inprocess, name).__module__ == inprocess.__name__) == sorted(c.__name__ for c in classes)


def test_backend_defaults_give_every_part_the_contract_does_not_leave_to_a_backend(tmp_path: Path) -> None:
    """A third party writes the seven abstract methods; every other part of the Backend contract
    has its default, so the library asks every backend the same way (no optional parts)."""
    parts = {name for name, value in vars(Backend).items()
             if not name.startswith("_") and (callable(value) or isinstance(value, property))}
    defaulted = {name for name in vars(BackendDefaults) if not name.startswith("_")} - BackendDefaults.__abstractmethods__
    assert parts == defaulted | BackendDefaults.__abstractmethods__
    assert defaulted == {"closed", "describe", "durable", "keyword_index", "local_dir", "read_only"}

    backend = _RequiredOnly(FileBackend(tmp_path / "memory"))
    assert isinstance(backend, Backend)
    assert backend.describe("a") == f"{backend.url} (agent a)"
    assert (backend.read_only("a"), backend.local_dir("a"), backend.durable, backend.closed) == (False, None, True, False)
    assert backend.keyword_index("a", MemoryConfig()) is None
    with pytest.raises(TypeError, match="abstract"):
        type("Partial", (BackendDefaults,), {"url": "x"})()
