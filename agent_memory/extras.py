"""The optional parts of agent-memory and the extra that installs each.

``pip install agent-memory`` installs what the embedded default needs to store, cite, retrieve and
query, and to run a :class:`~agent_memory.agent.loop.MemoryAgent` against any OpenAI-compatible
server. Everything else is an extra (the names of ``[project.optional-dependencies]`` in
``pyproject.toml``), and a module that needs one calls :func:`require_extra` before importing it,
so a user without it gets a :class:`~agent_memory.errors.MissingExtraError` that says what to
install instead of a bare ``ModuleNotFoundError``. ``agent-memory[all]`` installs every extra.
"""

from __future__ import annotations

import importlib.util

from agent_memory.errors import MissingExtraError

__all__ = ["EXTRAS", "require_extra"]

EXTRAS: dict[str, tuple[str, ...]] = {
    "cli": ("typer", "rich"),
    "mcp": ("mcp",),
    "inspector": ("jinja2", "starlette", "uvicorn"),
    "replay": ("matplotlib", "typer", "rich"),
    "anthropic": ("anthropic",),
    "postgres": ("psycopg", "psycopg_pool", "pgvector"),
    "openai-agents": ("agents",),
    "langchain": ("langchain", "langchain_core", "langgraph"),
    "pydantic-ai": ("pydantic_ai",),
}
"""Each extra and the top-level modules it provides (import names, not distribution names); kept
equal to ``pyproject.toml``'s extras by ``tests/test_light_core.py``."""


def require_extra(extra: str, feature: str) -> None:
    """Check that ``extra``'s modules can be imported (found, not imported: O(1) per module).

    Args:
        extra: a key of :data:`EXTRAS`.
        feature: what needs it, for the message (``"the agent-memory command"``).

    Raises:
        MissingExtraError: naming ``feature``, the missing modules and
            ``pip install 'agent-memory[<extra>]'``.
        KeyError: if ``extra`` is not a key of :data:`EXTRAS` (a bug of the caller).
    """
    missing = [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingExtraError(
            f"{feature} needs the {extra!r} extra, which is not installed (missing: {', '.join(missing)}): "
            f"pip install 'agent-memory[{extra}]' (or 'agent-memory[all]')", name=missing[0])
