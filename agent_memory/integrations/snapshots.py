"""Memory snapshots for the sub-agents a framework runs (MemberJunction's
``ShareMemoryWithSubAgents``, github.com/MemberJunction/MJ).

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

from agent_memory.agent.config import MemoryMode
from agent_memory.agent.sub_agents import child_memory, claim_child_id
from agent_memory.errors import InvalidArgumentError
from agent_memory.memory import AgentMemory

__all__ = ["MemoryScope", "check_scope", "sub_agent_memory"]

MemoryScope = MemoryMode
"""What memory a sub-agent gets (module docstring): the agent loop's ``MemoryMode``."""


def check_scope(scope: str) -> MemoryScope:
    """``scope`` if it is one of ``shared``, ``isolated``, ``none``.

    Raises:
        InvalidArgumentError: otherwise.
    """
    if scope not in ("shared", "isolated", "none"):
        raise InvalidArgumentError(f"scope must be 'shared', 'isolated' or 'none', not {scope!r}")
    return scope  # type: ignore[return-value]


def sub_agent_memory(parent: AgentMemory, scope: MemoryScope) -> tuple[AgentMemory, str]:
    """The memory of a new sub-agent of ``parent`` and the child's claimed id, as
    :func:`~agent_memory.agent.sub_agents.spawn` makes them (its :func:`claim_child_id` and
    :func:`child_memory`).

    For ``shared`` the memory is ``parent`` itself (do not close it); otherwise a new
    :class:`AgentMemory` in the parent's backend, which the caller closes.

    Raises:
        InvalidArgumentError: for an unknown ``scope``.
        StoreError: if no id can be claimed, or the fork cannot be written (the id is released).
    """
    check_scope(scope)
    in_use = {parent.agent_id} | ({parent.fork.parent_agent_id} if parent.fork is not None else set())
    child_id = claim_child_id(parent.backend, parent.agent_id, in_use=in_use)
    try:
        own = child_memory(parent, scope, child_id)
    except BaseException:
        parent.backend.release_claim(child_id)
        raise
    return (parent if own is None else own), child_id
