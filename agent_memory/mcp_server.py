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
exactly the validation, answers and error messages an in-process agent gets.

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
  action holding a manager) run one at a time across processes, under ``kernel.lock`` in the
  agent's directory, on a manager freshly read from disk: a server never writes back state another
  server changed since it started.
- **stdout is the MCP channel.** While serving, the SDK points file descriptor 1 at stderr, so a
  stray print of any library cannot corrupt the protocol; logs go to stderr.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
from filelock import FileLock, Timeout
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, Tool, ToolAnnotations

from agent_memory import __version__
from agent_memory.config import MemoryConfig
from agent_memory.errors import AgentMemoryError, LockTimeoutError
from agent_memory.kernel.manager import MemoryManager
from agent_memory.limits import shorten
from agent_memory.memory import DEFAULT_AGENT_ID, AgentMemory
from agent_memory.presentation.offer import MemoryToolResult, MemoryTools, ToolOffer, load_toolkit

if TYPE_CHECKING:
    import os

    from mcp.server.mcpserver.context import Context

__all__ = [
    "KERNEL_LOCK_FILE",
    "KERNEL_LOCK_TIMEOUT_S",
    "SERVER_NAME",
    "MemoryMCPServer",
    "build_server",
    "serve_mcp",
]

logger = logging.getLogger(__name__)

SERVER_NAME = "agent-memory"
"""The server's name in the MCP handshake (``serverInfo.name``)."""

KERNEL_LOCK_FILE = "kernel.lock"
"""Lock file in the agent's directory, held while a tool changes the conversation kernel's state."""

KERNEL_LOCK_TIMEOUT_S = 60.0
"""Longest wait for :data:`KERNEL_LOCK_FILE`, in seconds, before the call fails as a tool error."""

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

    Raises:
        ConfigurationError: if no memory toolkit is installed (the ``actions`` package).
        StoreError: if the agent's conversation state cannot be read.
    """

    def __init__(self, memory: AgentMemory, *, name: str = SERVER_NAME) -> None:
        super().__init__(name=name, instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
        self.memory = memory
        self.manager = MemoryManager(memory)
        self.toolkit: MemoryTools = self._load_toolkit(self.manager)
        self._tools = [self._tool(definition) for definition in self.toolkit.anthropic_tools(None)]
        self._kernel_mutex = threading.Lock()
        self._kernel_lock = FileLock(str(memory.agent_dir / KERNEL_LOCK_FILE), timeout=KERNEL_LOCK_TIMEOUT_S)

    def __repr__(self) -> str:
        return f"MemoryMCPServer({self.memory!r}, tools={[tool.name for tool in self._tools]})"

    def _load_toolkit(self, manager: MemoryManager) -> MemoryTools:
        return load_toolkit(self.memory, manager=manager, offer=ToolOffer(mode="all"))

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
    def dispatch(self, name: str, arguments: Mapping[str, Any] | None) -> MemoryToolResult:
        """Run the tool call ``name(arguments)`` through the toolkit (blocking).

        A tool that changes the conversation kernel's state (its action holds a manager, or the
        toolkit cannot say) runs under :data:`KERNEL_LOCK_FILE` on a manager read from disk just
        before; every other tool runs on the shared memory at once.

        Returns:
            The toolkit's result (``ok``, ``content``; ``data`` and ``error`` for the built-in one).

        Raises:
            LockTimeoutError: if another process held :data:`KERNEL_LOCK_FILE` more than
                :data:`KERNEL_LOCK_TIMEOUT_S` seconds.
            AgentMemoryError: faults of the store or the index (``StoreError``, ``VectorIndexError``).
        """
        action = self._action(name)
        known = callable(getattr(self.toolkit, "get", None))
        if known and getattr(action, "manager", None) is None:
            return self.toolkit.dispatch(name, arguments)
        self.memory.agent_dir.mkdir(parents=True, exist_ok=True)
        with self._kernel_mutex:
            try:
                self._kernel_lock.acquire()
            except Timeout as exc:
                raise LockTimeoutError(
                    f"timed out after {KERNEL_LOCK_TIMEOUT_S:g} s waiting for {self._kernel_lock.lock_file}"
                ) from exc
            try:
                return self._load_toolkit(MemoryManager(self.memory)).dispatch(name, arguments)
            finally:
                self._kernel_lock.release()

    def close(self) -> None:
        """Release the memory (its index clients and connections). Idempotent."""
        self.memory.close()


def _answer(result: MemoryToolResult) -> CallToolResult:
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
) -> MemoryMCPServer:
    """An MCP server for the memory of ``agent_id`` under ``memory_dir`` (not started).

    Args:
        memory_dir: base directory of the memory; ``None``: ``AGENT_MEMORY_DIR``, else ``./memory``
            (resolved against the current directory; ``~`` is expanded).
        agent_id: the agent whose memory is served (``<memory_dir>/agents/<agent_id>/``).
        config: the memory's settings (``retrieve_max_tokens`` caps every retrieve answer, in
            tokens); ``None``: ``MemoryConfig()``.
        name: the server's name in the MCP handshake.

    Returns:
        The server; ``server.run("stdio")`` serves it, ``server.close()`` releases the memory.

    Raises:
        InvalidIdError: if ``agent_id`` is not a safe directory name.
        ConfigurationError: if ``memory_dir`` is unusable, or no memory toolkit is installed.
        StoreError: if the agent's conversation state cannot be read.
    """
    memory = AgentMemory(agent_id, memory_dir, config=config)
    try:
        return MemoryMCPServer(memory, name=name)
    except BaseException:
        memory.close()
        raise


def serve_mcp(
    memory_dir: str | os.PathLike[str] | None = None,
    agent_id: str = DEFAULT_AGENT_ID,
    *,
    config: MemoryConfig | None = None,
) -> None:
    """Serve the memory tools over stdio until the client closes stdin, then release the memory.

    Arguments and errors as :func:`build_server`. Nothing but MCP messages reaches stdout.
    """
    server = build_server(memory_dir, agent_id, config=config)
    try:
        server.run("stdio")
    finally:
        server.close()
