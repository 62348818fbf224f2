"""The inspector: ``agent-memory inspect`` serves a read-only web page over a memory (a memory
directory or a ``postgresql://`` URL) on loopback.

- :mod:`~agent_memory.inspector.readonly`: :class:`ReadOnlyBackend`, the backend opened without
  writing anything;
- :mod:`~agent_memory.inspector.views`: what the pages show, as data: agents and their scopes,
  a conversation's calls rebuilt with the project's ContextBuilder, a replay report;
- :mod:`~agent_memory.inspector.server`: the Starlette app (Jinja2 templates with autoescaping, a
  Content-Security-Policy without script), served by uvicorn; a non-loopback bind is refused
  unless asked for.

Starlette, uvicorn and Jinja2 are imported when a page is served, never by ``import agent_memory``.
"""

from agent_memory.inspector.readonly import ReadOnlyBackend
from agent_memory.inspector.server import (
    CONTENT_SECURITY_POLICY,
    DEFAULT_HOST,
    DEFAULT_PORT,
    Inspector,
    InspectorServer,
    check_bind_host,
    is_loopback,
)
from agent_memory.inspector.views import (
    AgentScope,
    CallView,
    ConversationView,
    ReportView,
    ShownResult,
    agent_scopes,
    load_report,
    rebuild_calls,
)

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "AgentScope",
    "CallView",
    "ConversationView",
    "Inspector",
    "InspectorServer",
    "ReadOnlyBackend",
    "ReportView",
    "ShownResult",
    "agent_scopes",
    "check_bind_host",
    "is_loopback",
    "load_report",
    "rebuild_calls",
]
