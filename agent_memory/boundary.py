"""The public boundary of :class:`~agent_memory.memory.AgentMemory`: its public methods refuse a
closed memory and map dependency errors to library errors (:func:`~agent_memory.errors.map_exceptions`),
and the checks of a developer's arguments that ``AgentMemory`` shares."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from agent_memory.errors import InvalidArgumentError, MemoryClosedError, map_exceptions
from agent_memory.storage import common
from agent_memory.storage.contracts import Backend

__all__ = ["int_arg", "mapped_init", "public"]

F = TypeVar("F", bound=Callable[..., Any])


class _Guarded(Protocol):
    """What :func:`public` reads of the memory whose method it guards."""

    _closed: bool
    agent_id: str
    backend: Backend


def public(method: F) -> F:
    """A public method: refused on a closed memory; dependency errors mapped to library errors."""
    what = f"AgentMemory.{method.__name__}"

    @functools.wraps(method)
    def wrapper(self: _Guarded, *args: Any, **kwargs: Any) -> Any:
        if self._closed:
            where = common.describe(self.backend, self.agent_id)  # any backend: not only a directory
            raise MemoryClosedError(f"{what}: this AgentMemory is closed; open a new one on {where}")
        with map_exceptions(what):
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def mapped_init(init: F) -> F:
    """``__init__`` with its errors (also a wrong or unknown argument) mapped like a public method."""

    @functools.wraps(init)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        with map_exceptions("AgentMemory"):
            init(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def int_arg(name: str, value: object, low: int, high: int | None = None) -> int:
    """``value`` if it is an int (not a bool) in ``[low, high]``, else :class:`InvalidArgumentError`."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be an integer, not {type(value).__name__}")
    if value < low or (high is not None and value > high):
        bounds = f"{low:,} to {high:,}" if high is not None else f"{low:,} or more"
        raise InvalidArgumentError(f"{name} must be {bounds}; got {value:,}")
    return value
