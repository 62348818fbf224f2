"""Warnings for the developer: a setting that silently makes the agent worse.

Errors stop a call (:mod:`agent_memory.errors`); these do not. Each is a Python warning
(``warnings.warn``) of a class under :class:`AgentMemoryWarning`, given once per process for one
cause (one model name, one endpoint); when logging is configured (a handler reaches the
``agent_memory`` logger), the same text goes to it at ``WARNING`` level too (without one, Python's
last-resort handler would print it a second time)::

    AgentMemoryWarning (UserWarning)
    ├── ToolsDroppedWarning     the server counted fewer prompt tokens than the tool definitions
    └── UnknownModelWarning     a model name with no known context window: the default is assumed

Silence one with the standard filters: ``warnings.filterwarnings("ignore",
category=UnknownModelWarning)``, or ``-W ignore::agent_memory.UnknownModelWarning``.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Hashable

__all__ = ["AgentMemoryWarning", "ToolsDroppedWarning", "UnknownModelWarning", "warn_once"]

logger = logging.getLogger("agent_memory")


class AgentMemoryWarning(UserWarning):
    """Root of every warning agent-memory gives."""


class ToolsDroppedWarning(AgentMemoryWarning):
    """The provider reported fewer prompt tokens than the request's tool definitions alone count:
    the server (its chat template) seems to drop the tools, so the model cannot call any."""


class UnknownModelWarning(AgentMemoryWarning):
    """The model's name matches no known family, so a default context window is assumed."""


_given: set[tuple[type[Warning], Hashable]] = set()
_lock = threading.Lock()


def warn_once(category: type[AgentMemoryWarning], key: Hashable, message: str, *, stacklevel: int = 2) -> bool:
    """Give ``message`` as a ``category`` warning (and a log line, logging configured), unless this process already gave
    one of ``category`` for ``key``.

    Args:
        category: the warning class.
        key: what the warning is about (a model name, an endpoint); one warning per key.
        message: the text, saying what was seen and how to fix it.
        stacklevel: as for ``warnings.warn``, counted from the caller of this function.

    Returns:
        ``True`` if the warning was given now, ``False`` if it had been given before.
    """
    with _lock:
        if (category, key) in _given:
            return False
        _given.add((category, key))
    if logger.hasHandlers():
        logger.warning(message)
    warnings.warn(message, category, stacklevel=stacklevel + 1)
    return True
