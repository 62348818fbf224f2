"""How the command line talks to its user: the consoles, and errors as one line on stderr with
exit code 1 (usage mistakes exit with 2, from typer). Shared by every command of
:mod:`agent_memory.cli` and the ones in their own modules (``replay``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer  # the cli extra: agent_memory.cli and agent_memory.replay.command check it before importing this
from pydantic import ValidationError
from rich.console import Console

from agent_memory.errors import AgentMemoryError, ItemNotFoundError
from agent_memory.storage.urls import redacted_text

__all__ = ["PROG", "CliError", "fail", "reported_errors", "stderr", "stdout"]

PROG = "agent-memory"
"""The command's name, as the user types it."""


class CliError(Exception):
    """An error reported to the user as one line on stderr, with exit code 1."""


def stdout() -> Console:
    """The console for results (no highlighting, no soft wrap: output can be piped)."""
    return Console(highlight=False, soft_wrap=False)


def stderr() -> Console:
    """The console for progress and warnings."""
    return Console(stderr=True, highlight=False)


def fail(message: str) -> NoReturn:
    """Stop the command with ``message`` on stderr and exit code 1 (inside :func:`reported_errors`).

    Raises:
        CliError: always.
    """
    raise CliError(message)


@contextmanager
def reported_errors() -> Iterator[None]:
    """Turn library errors into one line on stderr and exit code 1 (no traceback), without any
    password a URL in it shows (:func:`~agent_memory.storage.urls.redacted_text`).

    Raises:
        typer.Exit: code 1, for a :class:`CliError`, an :class:`~agent_memory.errors.AgentMemoryError`,
            an ``OSError`` or a pydantic ``ValidationError`` raised inside.
    """
    try:
        yield
    except ItemNotFoundError as exc:
        typer.echo(f"Error: {redacted_text(str(exc))}. Use `{PROG} list` or `{PROG} query TEXT` to find ids.", err=True)
        raise typer.Exit(1) from None
    except (CliError, AgentMemoryError, OSError) as exc:
        typer.echo(f"Error: {redacted_text(str(exc))}", err=True)
        raise typer.Exit(1) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        typer.echo(f"Error: {where}: {first['msg']}" if where else f"Error: {first['msg']}", err=True)
        raise typer.Exit(1) from None
