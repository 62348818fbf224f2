"""Memory snapshots for the sub-agents a framework runs (seed 002, ``ShareMemoryWithSubAgents``).

A framework's sub-agent (an agent run as a tool, a handoff) gets the memory its parent chooses,
as :func:`agent_memory.agent.sub_agents.spawn` gives a ``MemoryAgent``'s child:

- ``shared``: the parent's memory itself (the child's results are the parent's);
- ``isolated``: a fork (:class:`~agent_memory.fork.MemoryFork`): the parent's items as of the call,
  read in place, no copy and no re-embedding; the child's writes go to its own agent;
- ``none``: an empty memory of its own.

The child's id is new and claimed in the parent's backend before anything is written
(``<parent>.subNN``, the first number free), in every mode: it names the child's conversation.
"""

from __future__ import annotations

from typing import Literal

from agent_memory.errors import InvalidArgumentError, StoreError
from agent_memory.fork import MemoryFork
from agent_memory.ids import sub_agent_id
from agent_memory.memory import AgentMemory

__all__ = ["MAX_CHILD_ID_ATTEMPTS", "MemoryScope", "check_scope", "sub_agent_memory"]

MemoryScope = Literal["shared", "isolated", "none"]
"""What memory a sub-agent gets (module docstring)."""

MAX_CHILD_ID_ATTEMPTS = 1_000
"""Generated child ids tried at most (each taken one is an agent the backend holds)."""


def check_scope(scope: str) -> MemoryScope:
    """``scope`` if it is one of ``shared``, ``isolated``, ``none``.

    Raises:
        InvalidArgumentError: otherwise.
    """
    if scope not in ("shared", "isolated", "none"):
        raise InvalidArgumentError(f"scope must be 'shared', 'isolated' or 'none', not {scope!r}")
    return scope  # type: ignore[return-value]


def sub_agent_memory(parent: AgentMemory, scope: MemoryScope) -> tuple[AgentMemory, str]:
    """The memory of a new sub-agent of ``parent`` and the child's claimed id.

    For ``shared`` the memory is ``parent`` itself (do not close it); otherwise a new
    :class:`AgentMemory` in the parent's backend, which the caller closes.

    Raises:
        InvalidArgumentError: for an unknown ``scope``.
        StoreError: if no id can be claimed, or the fork cannot be written (the id is released).
    """
    check_scope(scope)
    backend = parent.backend
    taken = {parent.agent_id} | ({parent.fork.parent_agent_id} if parent.fork is not None else set())
    child_id = next((candidate for n in range(1, MAX_CHILD_ID_ATTEMPTS + 1)
                     if (candidate := sub_agent_id(parent.agent_id, n)) not in taken and backend.claim(candidate)),
                    None)
    if child_id is None:
        raise StoreError(f"no free sub-agent id after {MAX_CHILD_ID_ATTEMPTS} tries in {backend.url}")
    if scope == "shared":
        return parent, child_id
    try:
        if scope == "isolated":
            MemoryFork.of(parent).save_for(backend, child_id)
        return AgentMemory(child_id, store=backend, config=parent.config), child_id
    except BaseException:
        backend.release_claim(child_id)
        raise
