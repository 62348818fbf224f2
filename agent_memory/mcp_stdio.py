"""The MCP server's stdio wire: every request a client writes gets exactly one answer, with its id,
before the server exits.

The SDK's stdio transport (mcp 2.3) reads each line with a strict parser and drops, without a
word, every line it cannot read; it reads a request whose id MCP refuses as a notification, which
is never answered; and when stdin closes it cancels the requests still running, whose work may be
done (a note stored) while the client never hears of it (issue #37 §5: of 50 ``store_memory``
calls followed by EOF, 5 were answered and 50 stored, so a client that retries stores twice).
:func:`serve_stdio` wraps the transport to close those three gaps:

- **Each line is triaged before the SDK reads it** (:func:`triage`). A line the SDK reads as a
  message goes on to it. A line that is not JSON gets ``-32700`` (parse error); a JSON line that
  is not a JSON-RPC message ``-32600`` (invalid request), with its id when it has a valid one.
- **Ids.** MCP requires a request id to be a string or an integer, never null (the MCP
  specification, Basic protocol, Requests: "Unlike base JSON-RPC, the ID MUST NOT be null"), a
  profile of JSON-RPC 2.0 §4, which allows null and fractions but advises against both. A request
  whose id is none of those (``1.5``, ``null``, ``true``, an object, a string with a lone
  surrogate) is an invalid request, answered ``-32600`` with ``"id": null``, as JSON-RPC 2.0 §5
  asks when the id cannot be determined. A line without an ``id`` is a notification and is never
  answered, as §4.1 asks.
- **Valid JSON that the SDK's parser refuses** (a lone surrogate escape ``"\\ud800"``, a number of
  5,001 digits: RFC 8259 allows both, Python's ``json`` reads both) is answered with its id. A
  ``tools/call`` runs as any call does and its tool refuses the arguments with a tool error
  (``isError``), since the MCP specification (Tools, Error handling) makes input validation errors
  tool execution errors the model can act on; any other request gets ``-32602`` (invalid params)
  naming the value.
- **Draining.** When stdin closes, the end of the stream reaches the SDK only once every request
  read so far has been answered (or cancelled by the client, which the SDK never answers), for at
  most :data:`DRAIN_TIMEOUT_S`; then the server exits.
"""

from __future__ import annotations

import logging
import math
import sys
from collections import Counter
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_memory.extras import require_extra

require_extra("mcp", "the MCP server (agent_memory.mcp_server, agent-memory serve-mcp)")

import anyio  # noqa: E402
from mcp.server.stdio import stdio_server  # noqa: E402
from mcp.shared.dispatcher import coerce_request_id  # noqa: E402
from mcp.shared.message import SessionMessage  # noqa: E402
from mcp.types import (  # noqa: E402
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError  # noqa: E402

from agent_memory.errors import InvalidArgumentError  # noqa: E402
from agent_memory.kernel.lock import KERNEL_LOCK_TIMEOUT_S  # noqa: E402
from agent_memory.limits import shorten  # noqa: E402
from agent_memory.models.tool_arguments import decode_json, read_tool_arguments  # noqa: E402

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server
    from mcp.shared._stream_protocols import ReadStream, WriteStream

__all__ = ["DRAIN_TIMEOUT_S", "ToolCallLine", "jsonrpc_refusal", "serve_stdio", "triage"]

logger = logging.getLogger(__name__)

DRAIN_TIMEOUT_S = 2 * KERNEL_LOCK_TIMEOUT_S
"""Longest wait, once stdin has closed, for the answers of requests still running, in seconds;
then the server exits (the SDK answers what is left "Connection closed"). A tool call waits at
most :data:`~agent_memory.kernel.lock.KERNEL_LOCK_TIMEOUT_S` (60 s) for the kernel lock."""

MAX_PROBLEM_CHARS = 300
"""Characters of a problem's description in an error message."""

INVALID_ID = ("Invalid Request: the id must be a string or an integer (MCP: not null, no fraction; a string "
              "of valid Unicode)")
"""The message of the ``-32600`` answering a request whose id MCP refuses."""

NOT_JSON_RPC = ("Invalid Request: not a JSON-RPC 2.0 request, notification or response "
                '(an object with "jsonrpc": "2.0" and a string "method", or a "result" or "error")')
"""The message of the ``-32600`` answering a JSON line that is no JSON-RPC message."""


@dataclass(frozen=True)
class ToolCallLine:
    """A ``tools/call`` request the SDK cannot read (a value of its arguments is valid JSON that
    its parser refuses): the server runs it itself and answers with the tool's result."""

    id: str | int
    """The request's id."""
    name: str
    """The tool's name (possibly holding a lone surrogate: then no tool has it)."""
    arguments: dict[str, Any]
    """The arguments as :func:`~agent_memory.models.tool_arguments.decode_json` read them."""


def _error(request_id: str | int | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


def _valid_id(value: Any) -> bool:
    """Whether ``value`` is a request id MCP takes: an integer (not a boolean) or a string of
    valid Unicode."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    return isinstance(value, int) and not isinstance(value, bool)


def triage(line: str) -> JSONRPCError | ToolCallLine | None | bool:
    """What to do with one line of the stdio stream.

    Returns:
        ``None``: the SDK reads it (a valid message). A :class:`~mcp.types.JSONRPCError`: the
        answer to send instead (the SDK never sees the line). A :class:`ToolCallLine`: a
        ``tools/call`` the server runs itself. ``False``: nothing to send (a notification the SDK
        cannot read; it is logged).
    """
    try:
        message = jsonrpc_message_adapter.validate_json(line, by_name=False)  # exactly as the SDK reads it
    except ValidationError as exc:
        json_invalid = exc.errors(include_url=False)[0]["type"] == "json_invalid"
    else:
        if isinstance(message, JSONRPCNotification) and _has_id(line):  # an id MCP refuses: no notification
            return _error(None, INVALID_REQUEST, INVALID_ID)
        return None
    try:
        data = decode_json(line)  # Python's reader: lone surrogate escapes and long numbers are JSON
    except (ValueError, RecursionError) as exc:
        if json_invalid:
            return _error(None, PARSE_ERROR, f"Parse error: the message is not JSON ({shorten(str(exc), 200)})")
        data = None
    if not isinstance(data, dict) or not json_invalid:
        request_id = data.get("id") if isinstance(data, dict) else None
        return _error(request_id if _valid_id(request_id) else None, INVALID_REQUEST, NOT_JSON_RPC)
    # Valid JSON the SDK's parser refuses.
    if "id" not in data:
        if isinstance(data.get("method"), str):  # a notification: never answered
            logger.warning("unreadable notification from the client: %s", _problem(data))
            return False
        return _error(None, INVALID_REQUEST, NOT_JSON_RPC)
    request_id = data["id"]
    if not _valid_id(request_id):
        return _error(None, INVALID_REQUEST, INVALID_ID)
    params = data.get("params")
    if data.get("jsonrpc") != "2.0" or not isinstance(data.get("method"), str) or not (
            params is None or isinstance(params, dict)):
        return _error(request_id, INVALID_REQUEST, NOT_JSON_RPC)
    if data["method"] == "tools/call" and isinstance(params, dict) and isinstance(params.get("name"), str) \
            and isinstance(params.get("arguments", {}), dict):
        return ToolCallLine(id=request_id, name=params["name"], arguments=params.get("arguments") or {})
    return _error(request_id, INVALID_PARAMS, f"Invalid params: {_problem(data)}")


def _has_id(line: str) -> bool:
    """Whether a line the SDK read as a notification names an ``id`` (of a type MCP refuses)."""
    try:
        data = decode_json(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and "id" in data


def _problem(data: dict[str, Any]) -> str:
    """What in a message the SDK cannot read (a lone surrogate, an overlong number), in words."""
    try:
        read_tool_arguments(data, what="the message", max_depth=sys.maxsize, max_chars=sys.maxsize)
    except InvalidArgumentError as exc:
        return shorten(str(exc), MAX_PROBLEM_CHARS)
    return "a value the server cannot read"


def jsonrpc_refusal(line: str) -> JSONRPCError | None:
    """The JSON-RPC 2.0 error answering one line of the stdio stream, or ``None`` when the line
    is not refused (the SDK reads it, or the server runs it: see :func:`triage`): ``-32700``
    (parse error, ``id`` null) if the line is not JSON, ``-32600`` (invalid request) if it is JSON
    but not a JSON-RPC message or its id is not a string or an integer, with the id when that is
    valid, else null; ``-32602`` (invalid params) for a request the SDK cannot read."""
    verdict = triage(line)
    return verdict if isinstance(verdict, JSONRPCError) else None


class _Ledger:
    """The requests read and not yet answered: those the SDK handles, by id, and the server's own."""

    def __init__(self) -> None:
        self.open: Counter[str | int] = Counter()
        self.own = 0
        self._settled = anyio.Event()
        self._settled.set()

    def _update(self) -> None:
        if +self.open or self.own:
            if self._settled.is_set():
                self._settled = anyio.Event()
        else:
            self._settled.set()

    def opened(self, request_id: str | int) -> None:
        self.open[coerce_request_id(request_id)] += 1
        self._update()

    def closed(self, request_id: str | int | None) -> None:
        key = coerce_request_id(request_id) if request_id is not None else None
        if key is not None and self.open[key] > 0:
            self.open[key] -= 1
        self._update()

    def add_own(self, change: int) -> None:
        self.own += change
        self._update()

    async def settled(self) -> None:
        """Wait until every request read so far has its answer sent."""
        while not self._settled.is_set():
            await self._settled.wait()


class _CheckedLines:
    """The lines of stdin, each triaged (:func:`triage`) before the SDK's transport reads it: a line
    the server answers itself is not passed on; its answer goes to ``answers``. Blank lines are
    skipped. At the end of stdin, ``answers`` is closed."""

    def __init__(self, lines: AsyncIterable[str], answers: anyio.abc.ObjectSendStream[Any], ledger: _Ledger) -> None:
        self._lines = lines
        self._answers = answers
        self._ledger = ledger

    async def __aiter__(self) -> AsyncIterator[str]:
        async with self._answers:
            async for line in self._lines:
                if not line.strip():
                    continue
                verdict = triage(line)
                if verdict is None:
                    yield line
                elif verdict is not False:
                    self._ledger.add_own(1)
                    await self._answers.send(verdict)


class _DrainingReadStream:
    """The SDK transport's read stream, for the server loop: it notes each request read, and holds
    the end of the stream back until every request read has been answered (or cancelled by the
    client), for at most :data:`DRAIN_TIMEOUT_S`."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], ledger: _Ledger) -> None:
        self._inner = inner
        self._ledger = ledger

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item (the SDK's context-carrying stream), if any."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            try:
                item = await self._inner.receive()
            except anyio.EndOfStream:
                with anyio.move_on_after(DRAIN_TIMEOUT_S) as waited:
                    await self._ledger.settled()
                if waited.cancelled_caught:
                    logger.warning("stdin closed; %d request(s) still unanswered after %.0f s: exiting",
                                   sum((+self._ledger.open).values()) + self._ledger.own, DRAIN_TIMEOUT_S)
                raise
            if isinstance(item, Exception):  # a line triage passed and the SDK did not: nothing to answer with
                logger.warning("unreadable message from the client: %s", shorten(str(item), MAX_PROBLEM_CHARS))
                continue
            message = item.message
            if isinstance(message, JSONRPCRequest):
                self._ledger.opened(message.id)
            elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
                cancelled = (message.params or {}).get("requestId")  # the SDK never answers it
                if isinstance(cancelled, str | int):
                    self._ledger.closed(cancelled)
            return item

    def __aiter__(self) -> _DrainingReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _DrainingReadStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _AnsweringWriteStream:
    """The SDK transport's write stream, for the server loop: it notes each answer sent."""

    def __init__(self, inner: WriteStream[SessionMessage], ledger: _Ledger) -> None:
        self._inner = inner
        self._ledger = ledger

    async def send(self, item: SessionMessage, /) -> None:
        await self._inner.send(item)
        if isinstance(item.message, JSONRPCResponse | JSONRPCError):
            self._ledger.closed(item.message.id)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _AnsweringWriteStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


CallTool = Callable[[str, dict[str, Any]], Awaitable[CallToolResult]]
"""Runs one tool call and returns its MCP result, never raising (``MemoryMCPServer.call_tool``)."""


async def _answer_own(answers: anyio.abc.ObjectReceiveStream[Any], write: WriteStream[SessionMessage],
                      call_tool: CallTool, ledger: _Ledger) -> None:
    """Send the answers the server gives itself, in order: refusals as they are, tool calls the SDK
    could not read after running them."""
    async with answers:
        async for verdict in answers:
            try:
                message: JSONRPCMessage
                if isinstance(verdict, ToolCallLine):
                    result = await call_tool(verdict.name, verdict.arguments)
                    message = JSONRPCResponse(jsonrpc="2.0", id=verdict.id,
                                              result=result.model_dump(by_alias=True, mode="json", exclude_none=True))
                else:
                    message = verdict
                await write.send(SessionMessage(message))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                logger.warning("an answer could not be sent: the client's end is closed")
            finally:
                ledger.add_own(-1)


async def serve_stdio(server: Server[Any], call_tool: CallTool) -> None:
    """Serve ``server`` (the SDK's low-level server) over stdin/stdout until stdin closes and every
    request read has been answered (see the module's docstring).

    stdin is handed to the SDK's transport (read in place; stdout is diverted as the SDK does, so
    a stray print cannot corrupt the protocol). ``call_tool`` runs the ``tools/call`` requests the
    SDK cannot read.
    """
    ledger = _Ledger()
    send_answers, answers = anyio.create_memory_object_stream[Any](math.inf)
    stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
    lines = _CheckedLines(anyio.wrap_file(stdin), send_answers, ledger)
    async with stdio_server(stdin=lines) as (read_stream, write_stream):  # type: ignore[arg-type]
        write = _AnsweringWriteStream(write_stream, ledger)
        async with anyio.create_task_group() as group:
            group.start_soon(_answer_own, answers, write, call_tool, ledger)
            await server.run(_DrainingReadStream(read_stream, ledger), write, server.create_initialization_options())
            group.cancel_scope.cancel()  # after a drain that timed out: answers still running are dropped
