"""The inspector's web app: read-only pages over a memory, served on loopback.

Pages (every route is ``GET``; there is no route that changes anything):

- ``/`` and ``/items``: the agent's items, newest first, filtered by type, source and tag, or
  found with Query Memory (``q``: the hybrid search of :meth:`~agent_memory.memory.AgentMemory.query`);
- ``/items/{id}``: one item: its record, its citation and its content as stored;
- ``/calls``: a conversation's LLM calls, rebuilt (:func:`~agent_memory.inspector.views.rebuild_calls`):
  per call what each result looked like to the model (full, citation, compacted), tokens, cost,
  the prompt versions and the compactions with their episodes and facts;
- ``/agents``: every agent of the backend, with its parent and memory scope;
- ``/report`` and ``/report/{name}.png``: the replay report's tables and plots (``--report``).

Every page picks its agent with ``?agent=``; a page that names none shows the one the inspector
was started for (``--agent-id``), else the agent with the most items of its own
(:meth:`Inspector.busiest_agent`): a backend's agents include sub-agents and conversations that
hold no item, and the first by name is often one of them.

**Safety.** The memory is opened through :class:`~agent_memory.inspector.readonly.ReadOnlyBackend`
(nothing written: no journal, no index catch-up, no lock). Every stored string reaches the page
through Jinja2 templates with autoescaping, and every response carries a Content-Security-Policy
that allows no script at all (``script-src 'none'``; the pages are plain links and forms), so a
stored page with ``<script>`` or an ``onerror=`` attribute shows as text and runs nothing. The
server binds loopback only unless told otherwise (:func:`check_bind_host`), and on loopback it
answers only requests whose ``Host`` is a loopback name (no DNS rebinding).
"""

from __future__ import annotations

import errno
import functools
import ipaddress
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from agent_memory.config import MAX_QUERY_LIMIT
from agent_memory.errors import AgentMemoryError, ConfigurationError, InvalidArgumentError, InvalidIdError, ItemNotFoundError
from agent_memory.extras import require_extra
from agent_memory.inspector.readonly import ReadOnlyBackend
from agent_memory.inspector.views import (
    PLOT_NAME,
    AgentScope,
    ReportView,
    agent_scopes,
    load_report,
    rebuild_calls,
)
from agent_memory.memory import AgentMemory
from agent_memory.models.items import MemoryCriteria, MemoryType
from agent_memory.presentation.citations import CitationBuilder
from agent_memory.pricing import PriceModel
from agent_memory.storage import Backend, open_backend
from agent_memory.transforms import raw_text
from agent_memory.storage import common

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "Inspector",
    "InspectorServer",
    "check_bind_host",
    "is_loopback",
]

DEFAULT_HOST = "127.0.0.1"
"""Where the inspector listens unless told otherwise: loopback only."""

DEFAULT_PORT = 8766
"""The inspector's default TCP port (beside the stand-in model's 8765,
:data:`agent_memory.testing.stand_in.STAND_IN_PORT`: a user trying both runs both)."""

DEFAULT_LIST_LIMIT = 50
"""Items a listing shows at most."""

DEFAULT_SEARCH_LIMIT = 20
"""Hits a search shows at most."""

MAX_CONTENT_CHARS = 200_000
"""Characters of an item's content its page shows; the rest is left out, and the page says so
(``agent-memory get`` writes all of it)."""

CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'none'; style-src 'self'; img-src 'self'; "
                           "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
"""Sent with every response: no script of any origin, styles and images from the inspector only."""

SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}
"""Headers of every response."""

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")
"""Host names that are loopback without a lookup."""

_HERE = Path(__file__).resolve().parent


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) names this machine's loopback interface;
    any other name is not (it is never looked up)."""
    name = host.strip().lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind_host(host: str, *, allow_remote: bool = False) -> str:
    """``host`` if the inspector may listen there.

    Raises:
        ConfigurationError: if ``host`` is not loopback (``0.0.0.0``, a LAN address, a name) and
            ``allow_remote`` is not set: the inspector shows everything the memory holds, to
            anyone who reaches the port.
    """
    if not isinstance(host, str) or not host.strip():
        raise ConfigurationError("the inspector needs a host to listen on, e.g. 127.0.0.1")
    if not allow_remote and not is_loopback(host):
        raise ConfigurationError(
            f"refusing to serve the inspector on {host!r}: it is not a loopback address, and the page shows "
            "everything the memory holds to anyone who reaches it. Use --host 127.0.0.1 (the default), or pass "
            "--allow-remote to serve it to the network on purpose.")
    return host.strip()


class Inspector:
    """The inspector's state: a backend opened read only, its memories (opened on first use), the
    price model and the replay report; :meth:`app` is the ASGI app.

    Args:
        backend: a memory directory, a ``postgresql://`` URL, or a
            :class:`~agent_memory.storage.contracts.Backend`; ``None``: ``AGENT_MEMORY_URL``, else
            ``AGENT_MEMORY_DIR``, else ``./memory`` (as every command).
        agent_id: the agent shown when a page names none; ``None``: the agent with the most items
            of its own (:meth:`busiest_agent`), looked up when such a page is served.
        report_dir: a replay report directory (``report.json``, PNG plots); ``None``: no report page.
        price_model: prices the rebuilt calls; ``None``: tokens only.
        allowed_hosts: ``Host`` header values answered; ``None``: loopback names only.

    Raises:
        ConfigurationError: if the backend cannot be opened or ``report_dir`` is not a report.
    """

    def __init__(self, backend: str | Path | Backend | None = None, *, agent_id: str | None = None,
                 report_dir: Path | None = None, price_model: PriceModel | None = None,
                 allowed_hosts: list[str] | None = None) -> None:
        self.backend = ReadOnlyBackend(open_backend(backend if not isinstance(backend, Path) else str(backend), read_only=True))
        self.default_agent = agent_id
        self.report: ReportView | None = load_report(report_dir) if report_dir is not None else None
        self.price_model = price_model
        self.allowed_hosts = allowed_hosts
        self._memories: dict[str, AgentMemory] = {}
        self._mutex = threading.Lock()

    # -- memories ----------------------------------------------------------------------------------
    def agents(self) -> list[str]:
        """The backend's agents, sorted."""
        return self.backend.agent_ids()

    def busiest_agent(self) -> str | None:
        """The agent with the most items of its own (``own_records``: a shared sub-agent's results
        are its parent's, a fork's parent snapshot is not counted), the first by name among equals;
        ``None``: the backend holds no agent. An agent whose items cannot be read counts as empty."""
        def own_items(agent_id: str) -> int:
            return len(self.memory(agent_id).own_records())

        counts = {agent_id: _safe(functools.partial(own_items, agent_id), 0) for agent_id in self.agents()}
        return min(counts, key=lambda agent_id: (-counts[agent_id], agent_id)) if counts else None

    def memory(self, agent_id: str) -> AgentMemory:
        """The agent's memory, read only (opened once, shared by every request: thread-safe)."""
        with self._mutex:
            memory = self._memories.get(agent_id)
            if memory is None:
                memory = self._memories[agent_id] = AgentMemory(agent_id, backend=self.backend)
            return memory

    def close(self) -> None:
        """Close every memory opened (and their private index copies). Idempotent."""
        with self._mutex:
            memories, self._memories = list(self._memories.values()), {}
        for memory in memories:
            memory.close()

    # -- the app -----------------------------------------------------------------------------------
    def app(self) -> Any:
        """The Starlette app (ASGI) serving the pages (module docstring)."""
        require_extra("inspector", "the inspector")
        from jinja2 import Environment, FileSystemLoader, select_autoescape
        from starlette.applications import Starlette
        from starlette.middleware import Middleware
        from starlette.middleware.trustedhost import TrustedHostMiddleware
        from starlette.requests import Request
        from starlette.responses import FileResponse, HTMLResponse, Response
        from starlette.routing import Mount, Route
        from starlette.staticfiles import StaticFiles

        env = Environment(loader=FileSystemLoader(_HERE / "templates"),
                          autoescape=select_autoescape(default=True, default_for_string=True))
        env.filters["num"] = lambda value: f"{value:,}" if isinstance(value, int) else value
        env.filters["usd"] = lambda value: "-" if value is None else f"${float(value):,.6f}".rstrip("0").rstrip(".")
        env.filters["pct"] = lambda value: f"{float(value) * 100:+.1f}%"

        def page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
            agents = _safe(self.agents, [])
            html = env.get_template(template).render(
                request=request, agents=agents, agent=context.pop("agent", None), has_report=self.report is not None,
                backend=self.backend.url, **context)
            return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)

        def chosen_agent(request: Request) -> str:
            agents = self.agents()
            wanted = request.query_params.get("agent") or self.default_agent or self.busiest_agent()
            if wanted is None or wanted not in agents:
                raise _NotFound(f"no agent {wanted!r} in this backend" if wanted else "this backend holds no agent yet")
            return wanted

        def handled(view: Callable[[Request], Response]) -> Callable[[Request], Response]:
            def endpoint(request: Request) -> Response:
                try:
                    return view(request)
                except _NotFound as exc:
                    return page(request, "error.html", status=404, message=str(exc))
                except (InvalidArgumentError, InvalidIdError, ItemNotFoundError) as exc:
                    return page(request, "error.html", status=404 if isinstance(exc, ItemNotFoundError) else 400,
                                message=str(exc))
                except AgentMemoryError as exc:
                    return page(request, "error.html", status=500, message=f"{type(exc).__name__}: {exc}")
            return endpoint

        def items(request: Request) -> Response:
            agent = chosen_agent(request)
            memory = self.memory(agent)
            params = request.query_params
            q = (params.get("q") or "").strip()
            type_ = params.get("type") or None
            source = (params.get("source") or "").strip() or None
            tag = (params.get("tag") or "").strip().lower() or None
            records = memory.records()
            types = sorted({record.type for record in records})
            tags = sorted({t for record in records for t in record.metadata.tags})
            if q:
                criteria = MemoryCriteria(text=q, type=cast("MemoryType | None", type_), source=source,
                                          tags=(tag,) if tag else (), limit=min(DEFAULT_SEARCH_LIMIT, MAX_QUERY_LIMIT))
                hits = memory.query(criteria)
                rows = [{"record": hit.item, "match": hit.match, "chunk": hit.chunk} for hit in hits]
            else:
                chosen = [record for record in records
                          if (type_ is None or record.type == type_)
                          and (source is None or record.metadata.source == source)
                          and (tag is None or tag in record.metadata.tags)]
                chosen = sorted(reversed(chosen), key=lambda record: record.metadata.timestamp, reverse=True)
                rows = [{"record": record, "match": None, "chunk": None} for record in chosen[:DEFAULT_LIST_LIMIT]]
            return page(request, "items.html", agent=agent, rows=rows, q=q, type=type_ or "", source=source or "",
                        tag=tag or "", types=types, tags=tags, total=len(records), read_only=memory.read_only)

        def item(request: Request) -> Response:
            agent = chosen_agent(request)
            memory = self.memory(agent)
            found = memory.get(request.path_params["item_id"])
            text = raw_text(found.content, found.metadata.content_encoding)
            cut = len(text) > MAX_CONTENT_CHARS
            citation = CitationBuilder(memory.plugins, memory.tokens).cite(found).render()
            return page(request, "item.html", agent=agent, item=found, record=found.record, citation=citation,
                        content=text[:MAX_CONTENT_CHARS], cut=cut, content_chars=len(text))

        def calls(request: Request) -> Response:
            agent = chosen_agent(request)
            scopes = {scope.agent_id: scope for scope in agent_scopes(self.backend)}
            scope = scopes.get(agent)
            memory_id = scope.memory_id if scope is not None and scope.memory_id in scopes else agent
            view = rebuild_calls(self.memory(agent), self.memory(memory_id), price_model=self.price_model,
                                 conversation_id=agent)
            return page(request, "calls.html", agent=agent, view=view, scope=scope)

        def agents(request: Request) -> Response:
            scopes: list[AgentScope] = agent_scopes(self.backend)
            def own_items(agent_id: str) -> int:
                return len(self.memory(agent_id).own_records())

            def turn_count(agent_id: str) -> int:
                return len(common.traces(self.backend, agent_id).turn_ids())

            counts = {s.agent_id: _safe(functools.partial(own_items, s.agent_id), None) for s in scopes}
            turns = {s.agent_id: _safe(functools.partial(turn_count, s.agent_id), None) for s in scopes}
            return page(request, "agents.html", agent=request.query_params.get("agent") or self.default_agent,
                        scopes=scopes, counts=counts, turns=turns)

        def report(request: Request) -> Response:
            if self.report is None:
                raise _NotFound("no replay report: start the inspector with --report DIR (agent-memory replay --out DIR)")
            return page(request, "report.html", agent=request.query_params.get("agent") or self.default_agent,
                        report=self.report, rows=self.report.rows())

        def plot(request: Request) -> Response:
            name = request.path_params["name"]
            if self.report is None or not PLOT_NAME.match(name) or name not in self.report.plots:
                raise _NotFound(f"no plot {name!r} in the report")
            return FileResponse(self.report.path / name, media_type="image/png", headers=SECURITY_HEADERS)

        hosts = self.allowed_hosts if self.allowed_hosts is not None else [
            "localhost", "127.0.0.1", "[::1]", "::1"]
        routes = [
            Route("/", handled(items), methods=["GET"]),
            Route("/items", handled(items), methods=["GET"]),
            Route("/items/{item_id}", handled(item), methods=["GET"]),
            Route("/calls", handled(calls), methods=["GET"]),
            Route("/agents", handled(agents), methods=["GET"]),
            Route("/report", handled(report), methods=["GET"]),
            Route("/report/{name}", handled(plot), methods=["GET"]),
            Mount("/static", app=StaticFiles(directory=_HERE / "static"), name="static"),
        ]
        app = Starlette(routes=routes, middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=hosts),
                                                   Middleware(_SecurityHeaders)])
        return app


class _NotFound(Exception):
    """A page asked for something the backend does not hold (answered 404)."""


class _SecurityHeaders:
    """ASGI middleware: :data:`SECURITY_HEADERS` on every response (static files and errors too)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(name.lower().encode("latin-1"), value.encode("latin-1"))
                         for name, value in SECURITY_HEADERS.items() if name.lower().encode("latin-1") not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, with_headers)


def _safe(call: Callable[[], Any], default: Any) -> Any:
    try:
        return call()
    except AgentMemoryError:
        return default


class InspectorServer:
    """The inspector on a TCP port, served by uvicorn.

    Args:
        inspector: what to serve.
        host: the address to listen on (checked by :func:`check_bind_host`).
        port: the TCP port; 0: a free one (see :attr:`url` once started).
        allow_remote: listen on a non-loopback address on purpose.

    Raises:
        ConfigurationError: for a non-loopback ``host`` without ``allow_remote``, or a port that
            cannot be bound.

    :meth:`serve` blocks (the command); :meth:`start` serves from a thread and returns once it
    answers (tests, notebooks), :meth:`stop` ends it.
    """

    def __init__(self, inspector: Inspector, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 allow_remote: bool = False) -> None:
        self.host = check_bind_host(host, allow_remote=allow_remote)
        if allow_remote and not is_loopback(self.host):
            inspector.allowed_hosts = ["*"]
        self.inspector = inspector
        family = socket.AF_INET6 if ":" in self.host.strip("[]") else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._socket.bind((self.host.strip("[]"), port))
        except OSError as exc:
            self._socket.close()
            hint = "; choose another port with --port (0: a free one)" if exc.errno == errno.EADDRINUSE else ""
            raise ConfigurationError(f"cannot listen on {self.host}:{port}: {exc}{hint}") from exc
        self.port: int = self._socket.getsockname()[1]
        require_extra("inspector", "the inspector")
        import uvicorn

        self._server = uvicorn.Server(uvicorn.Config(inspector.app(), log_level="warning", lifespan="off",
                                                     access_log=False))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The page's address, ``http://127.0.0.1:PORT/``."""
        host = f"[{self.host.strip('[]')}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def serve(self) -> None:
        """Serve until interrupted (Ctrl-C), then close the memories."""
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self.inspector.close()

    def start(self) -> str:
        """Serve from a daemon thread; returns :attr:`url` once the server listens."""
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                        name="agent-memory-inspector", daemon=True)
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise ConfigurationError(f"the inspector did not start on {self.host}:{self.port}")
            threading.Event().wait(0.02)
        return self.url

    def stop(self) -> None:
        """Stop serving, wait for the thread and close the memories. Idempotent."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self._socket.close()
        self.inspector.close()

    def __enter__(self) -> InspectorServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
