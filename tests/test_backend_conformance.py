"""Both built-in backends pass the shipped conformance suite (agent_memory.testing.conformance):
the file backend in a temporary directory, and Postgres with pgvector (a real server: pgserver's,
started once per session, a new database per test; or the one AGENT_MEMORY_TEST_POSTGRES_URL names)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_memory.testing import PostgresServer
from agent_memory.testing.conformance import BackendConformance


class TestFileBackend(BackendConformance):
    @pytest.fixture
    def store(self, tmp_path: Path) -> str:
        return str(tmp_path / "memory")


class TestPostgresBackend(BackendConformance):
    @pytest.fixture
    def store(self, postgres_server: PostgresServer) -> str:
        return postgres_server.new_database()
