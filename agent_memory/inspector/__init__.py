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
The package re-exports every name of its modules' ``__all__`` (each module lists its own names once).
"""

from agent_memory.inspector import readonly, server, views
from agent_memory.inspector.readonly import *  # noqa: F403 - the face is each module's own __all__
from agent_memory.inspector.server import *  # noqa: F403
from agent_memory.inspector.views import *  # noqa: F403

__all__: list[str] = []
__all__ += readonly.__all__
__all__ += server.__all__
__all__ += views.__all__
