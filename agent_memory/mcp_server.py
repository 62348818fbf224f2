"""The memory tools over MCP (Model Context Protocol): ``agent-memory serve-mcp``.

::

    agent-memory serve-mcp --memory-dir ~/agent-memory --agent-id claude     # MCP over stdin/stdout

The server opens one agent's memory (:class:`~agent_memory.memory.AgentMemory` under
``<memory_dir>/agents/<agent_id>/``) and offers every tool of the installed memory toolkit
(:func:`~agent_memory.presentation.offer.load_toolkit`, all tools on every call): ``store_memory``,
``retrieve_memory``, ``query_memory``, and, through a
:class:`~agent_memory.kernel.manager.MemoryManager` on the same agent, ``compact_memory``,
``forget_memory`` and ``pin_memory``. Each MCP tool carries its action's own name, description and
JSON schema, and every call goes through the toolkit's ``dispatch``: an MCP client's model gets
exactly the validation, answers and error messages an in-process agent gets from
``MemoryToolkit(memory, manager=..., uploads=True)``.

- **Answers.** A call that did what it was asked gives the action's text (``content``, one text
  block) and its structured ``data`` (``structured_content``). A mistake of the model (a bad id, a
  missing argument, a transform that does not apply) is a tool error (``is_error=True``) whose
  text says what to do next, with ``structured_content={"error": <code>}``. A fault of the machine
  (a store that cannot be written, a lock held too long) is a tool error too, and is logged.
- **Bounded answers.** The actions bound what they return, so the server adds no second cap:
  ``retrieve_memory`` answers at most ``MemoryConfig.retrieve_max_tokens`` (4,000) tokens and a
  cut answer ends with the call for its next page; ``query_memory`` lists at most 20 items, each
  with a 300-character excerpt. No call returns a whole memory.
- **Several servers on one memory.** Items are appended under a lock (two servers storing at once
  lose nothing). Tools that change the conversation kernel's state (compact, forget, pin: every
  action holding a manager) run one at a time across processes (and machines, with Postgres), under
  the agent's ``kernel`` lock (``kernel.lock`` in its directory, or an advisory lock), on a manager
  freshly read from the store: a server never writes back state another server changed since it
  started.
- **Large text.** ``store_memory`` takes at most 8,000 characters a call; longer text comes in
  parts (an upload: ``more=true``, then the ``upload`` handle each answer gives; kept on disk
  under ``<agent_dir>/uploads/`` until the last part, so a restart loses nothing; see
  :mod:`actions.store`). With ``allow_read`` (``serve-mcp --allow-read DIR``) it also stores a
  file under that directory by ``path`` (symlinks resolved, anything outside refused); without
  it the tool reads no files and its schema has no ``path``.
- **stdout is the MCP channel.** While serving, the SDK points file descriptor 1 at stderr, so a
  stray print of any library cannot corrupt the protocol; logs go to stderr.
- **Every request is answered, once, with its id** (:mod:`agent_memory.mcp_stdio`): a line that
  is not JSON gets a ``-32700`` parse error and a JSON line that is not a JSON-RPC message a
  ``-32600`` invalid request (JSON-RPC 2.0 §5.1), as does a request whose id MCP refuses (``1.5``,
  ``null``, an object: ``"id": null`` in the answer); a ``tools/call`` whose arguments hold valid
  JSON the SDK's parser refuses (a lone surrogate escape, a 5,001-digit number) gets the tool's
  error; blank lines are skipped. When stdin closes, the server exits once every request read has
  its answer. (The SDK's stdio transport alone drops such lines without an answer, and cancels the
  calls still running at EOF, whose stores may be done: a client that retries stores twice.)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

from agent_memory.extras import require_extra

require_extra("mcp", "the MCP server (agent_memory.mcp_server, agent-memory serve-mcp)")

import anyio  # noqa: E402
from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.types import CallToolResult, TextContent, Tool, ToolAnnotations  # noqa: E402

from agent_memory.config import MemoryConfig
from agent_memory.errors import AgentMemoryError, ConfigurationError
from agent_memory.kernel.lock import kernel_lock
from agent_memory.kernel.manager import MemoryManager
from agent_memory.limits import shorten
from agent_memory.mcp_stdio import jsonrpc_refusal, serve_stdio
from agent_memory.memory import DEFAULT_AGENT_ID, AgentMemory
from agent_memory.presentation.offer import MemoryTools, ToolOffer, ToolResult, load_toolkit

if TYPE_CHECKING:
    import os

    from mcp.server.mcpserver.context import Context

__all__ = [
    "SERVER_NAME",
    "MemoryMCPServer",
    "build_server",
    "jsonrpc_refusal",
    "serve_mcp",
]

logger = logging.getLogger(__name__)

SERVER_NAME = "agent-memory"
"""The server's name in the MCP handshake (``serverInfo.name``)."""

MAX_FAULT_CHARS = 300
"""Characters of a machine fault's message shown to the model."""

INSTRUCTIONS = (
    "Memory kept outside your context: query_memory finds stored results and notes, retrieve_memory "
    "reads one back (capped and paged), store_memory saves a note."
)
"""What the server tells the client about itself (``instructions``; often put in the prompt)."""

_ANNOTATIONS: dict[str, ToolAnnotations] = {
    "retrieve": ToolAnnotations(read_only_hint=True, open_world_hint=False),
    "query": ToolAnnotations(read_only_hint=True, open_world_hint=False),
    "store": ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                             open_world_hint=False),
    "compact": ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                               open_world_hint=False),
    "forget": ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                              open_world_hint=False),
    "pin": ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                           open_world_hint=False),
}
"""Behaviour hints per capability (clients use them to decide what needs the user's approval)."""


class MemoryMCPServer(MCPServer):
    """An MCP server offering the memory tools of one agent's memory.

    Built by :func:`build_server`; run it with ``server.run("stdio")`` (or :func:`serve_mcp`),
    or connect to it in-process with ``mcp.Client(server)``. :meth:`close` releases the memory.

    Args:
        memory: the agent's memory every call runs on (the server does not close it unless
            :meth:`close` is called).
        name: the server's name in the MCP handshake.
        allow_read: a directory whose files ``store_memory`` may store by ``path`` (the
            toolkit's ``read_dir``); ``None``: the tools read no files.

    Raises:
        ConfigurationError: if no memory toolkit is installed (the ``actions`` package), or
            ``allow_read`` is not an existing directory.
        StoreError: if the agent's conversation state cannot be read.
    """

    def __init__(self, memory: AgentMemory, *, name: str = SERVER_NAME,
                 allow_read: str | os.PathLike[str] | None = None) -> None:
        super().__init__(name=name, instructions=INSTRUCTIONS, version=version("agent-memory"), log_level="WARNING")
        self.memory = memory
        self.allow_read = allow_read
        self.manager = MemoryManager(memory)
        self.toolkit: MemoryTools = self._load_toolkit(self.manager)
        self._tools = [self._tool(definition) for definition in self.toolkit.anthropic_tool_definitions(None)]
        self._kernel_mutex = threading.Lock()

    def __repr__(self) -> str:
        return f"MemoryMCPServer({self.memory!r}, tool_names={[tool.name for tool in self._tools]})"

    def _load_toolkit(self, manager: MemoryManager) -> MemoryTools:
        # A client's own tool results are not in memory: store_memory takes long text in parts.
        options: dict[str, Any] = {"offer": ToolOffer(mode="all"), "uploads": True}
        if self.allow_read is not None:
            options["read_dir"] = self.allow_read
        try:
            return load_toolkit(self.memory, manager=manager, **options)
        except (TypeError, ValueError) as exc:  # a toolkit without uploads or without a store action
            raise ConfigurationError(f"the memory toolkit cannot serve MCP ({', '.join(options)}): {exc}") from exc

    def _action(self, name: str) -> Any:
        """The toolkit's action called ``name`` (``None`` if unknown, or the toolkit cannot say)."""
        get = getattr(self.toolkit, "get", None)
        return get(name) if callable(get) else None

    def _tool(self, definition: Mapping[str, Any]) -> Tool:
        """One toolkit definition (Anthropic form: name, description, input_schema) as an MCP tool."""
        action = self._action(definition["name"])
        return Tool(
            name=definition["name"],
            title=getattr(action, "title", None),
            description=definition["description"],
            input_schema=definition["input_schema"],
            annotations=_ANNOTATIONS.get(getattr(action, "capability", "")),
        )

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools the server lists, in the toolkit's order."""
        return [tool.name for tool in self._tools]

    # -- the MCP handlers (MCPServer's public hooks) ----------------------------------------------
    async def list_tools(self) -> list[Tool]:
        """Every memory tool, with its action's name, title, description and JSON schema."""
        return list(self._tools)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult:
        """Run one tool call in a worker thread and turn its result into an MCP tool result.

        Never raises: an unknown tool, a mistake of the model and a fault of the machine are all
        tool errors (``is_error=True``) whose text the model reads.
        """
        try:
            result = await anyio.to_thread.run_sync(self.dispatch, name, arguments)
        except AgentMemoryError as exc:  # the store, the index or a lock: not the model's doing
            logger.exception("memory tool %r failed", name)
            return _error(
                "memory_fault",
                f"Error: the memory could not do this ({shorten(str(exc), MAX_FAULT_CHARS)}). Nothing the "
                "arguments can fix; try again later, or tell the user.",
            )
        except Exception:  # a bug: its text stays in the log, not in the model's context
            logger.exception("memory tool %r raised", name)
            return _error("internal_error", f"Error: {name} failed inside the memory server; see its log.")
        return _answer(result)

    # -- dispatch --------------------------------------------------------------------------------
    def dispatch(self, name: str, arguments: Mapping[str, Any] | None) -> ToolResult:
        """Run the tool call ``name(arguments)`` through the toolkit (blocking).

        A tool that changes the conversation kernel's state (its action holds a manager, or the
        toolkit cannot say) runs under the kernel lock (:func:`~agent_memory.kernel.lock.kernel_lock`) on a manager read from the store just
        before; every other tool runs on the shared memory at once.

        Returns:
            The toolkit's result (``ok``, ``content``; ``data`` and ``error`` for the built-in one).

        Raises:
            LockTimeoutError: if another process held the kernel lock more than
                :data:`~agent_memory.kernel.lock.KERNEL_LOCK_TIMEOUT_S` seconds.
            AgentMemoryError: faults of the store or the index (``StoreError``, ``VectorIndexError``).
        """
        action = self._action(name)
        known = callable(getattr(self.toolkit, "get", None))
        if known and getattr(action, "manager", None) is None:
            return self.toolkit.dispatch(name, arguments)
        with self._kernel_mutex, kernel_lock(self.memory):
            return self._load_toolkit(MemoryManager(self.memory)).dispatch(name, arguments)

    # -- stdio -----------------------------------------------------------------------------------
    async def run_stdio_async(self) -> None:
        """Serve over stdin/stdout until stdin closes and every request read has its answer
        (:func:`~agent_memory.mcp_stdio.serve_stdio`: each line answered once, with its id; a
        malformed one refused instead of dropped; a ``tools/call`` the SDK cannot read run here).

        This is ``MCPServer.run_stdio_async`` with stdin handed to the transport (so it reads file
        descriptor 0 in place rather than diverting it; stdout is diverted as before), on the
        same ``_lowlevel_server`` the SDK's method uses.
        """
        await serve_stdio(self._lowlevel_server, self.call_tool)

    def close(self) -> None:
        """Release the memory (its index clients and connections). Idempotent."""
        self.memory.close()


def _answer(result: ToolResult) -> CallToolResult:
    """A toolkit result as an MCP tool result: its text, and its data or error code."""
    if not result.ok:
        return _error(getattr(result, "error", None) or "error", result.content)
    data = getattr(result, "data", None)
    return CallToolResult(content=[TextContent(type="text", text=result.content)],
                          structured_content=dict(data) if data is not None else None)


def _error(code: str, text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content={"error": code},
                          is_error=True)


def build_server(
    memory_dir: str | os.PathLike[str] | None = None,
    agent_id: str = DEFAULT_AGENT_ID,
    *,
    config: MemoryConfig | None = None,
    name: str = SERVER_NAME,
    allow_read: str | os.PathLike[str] | None = None,
    backend: str | None = None,
) -> MemoryMCPServer:
    """An MCP server for the memory of ``agent_id`` under ``memory_dir`` (not started).

    Args:
        memory_dir: base directory of the memory; ``None``: ``backend``, else ``AGENT_MEMORY_URL``,
            else ``AGENT_MEMORY_DIR``, else ``./memory`` (resolved against the current directory;
            ``~`` is expanded).
        agent_id: the agent whose memory is served (``<memory_dir>/agents/<agent_id>/``).
        config: the memory's settings (``retrieve_max_tokens`` caps every retrieve answer, in
            tokens); ``None``: ``MemoryConfig()``.
        name: the server's name in the MCP handshake.
        allow_read: a directory whose files ``store_memory`` may store by ``path``; ``None``:
            the tools read no files.
        backend: where the memory lives instead of ``memory_dir``: a ``postgresql://`` URL (see
            :func:`~agent_memory.storage.open_backend`); give one of the two.

    Returns:
        The server; ``server.run("stdio")`` serves it, ``server.close()`` releases the memory.

    Raises:
        InvalidIdError: if ``agent_id`` is not a safe directory name.
        ConfigurationError: if ``memory_dir`` is unusable, ``allow_read`` is not a directory, or
            no memory toolkit is installed.
        StoreError: if the agent's conversation state cannot be read.
    """
    memory = AgentMemory(agent_id, memory_dir, backend=backend, config=config)
    try:
        return MemoryMCPServer(memory, name=name, allow_read=allow_read)
    except BaseException:
        memory.close()
        raise


def serve_mcp(
    memory_dir: str | os.PathLike[str] | None = None,
    agent_id: str = DEFAULT_AGENT_ID,
    *,
    config: MemoryConfig | None = None,
    allow_read: str | os.PathLike[str] | None = None,
    backend: str | None = None,
) -> None:
    """Serve the memory tools over stdio until the client closes stdin, then release the memory.

    Arguments and errors as :func:`build_server`. Nothing but MCP messages reaches stdout.
    """
    server = build_server(memory_dir, agent_id, config=config, allow_read=allow_read, backend=backend)
    try:
        server.run("stdio")
    finally:
        server.close()
