"""The kernel lock: one process at a time changes an agent's conversation kernel.

A :class:`~agent_memory.kernel.manager.MemoryManager` keeps state read from the store (the working
context, the pins). A process that compacts, forgets or pins holds the agent's :data:`KERNEL_LOCK`
while it builds a manager from the store, changes it and saves it, so each works on state the
previous one wrote: MCP servers (their ``forget_memory`` and ``pin_memory`` tools), the
``agent-memory forget / pin / unpin / stats`` commands, and any process of yours that does the same.
The lock is the backend's (:meth:`Locks.hold <agent_memory.storage.contracts.Locks>`): a file lock
on files (``kernel.lock``), an advisory lock of the holder's session on Postgres; it dies with its
holder.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_memory.memory import AgentMemory

__all__ = ["KERNEL_LOCK", "KERNEL_LOCK_TIMEOUT_S", "kernel_lock"]

KERNEL_LOCK = "kernel"
"""The agent's lock held while a process changes the conversation kernel's state (the file
backend's ``kernel.lock``)."""

KERNEL_LOCK_TIMEOUT_S = 60.0
"""Longest wait for :data:`KERNEL_LOCK`, in seconds, before the call fails (an MCP tool answers it
as a tool error)."""


def kernel_lock(memory: AgentMemory) -> AbstractContextManager[None]:
    """Hold the agent's :data:`KERNEL_LOCK` for the ``with`` block: a process holds it while it
    changes the agent's conversation kernel (compact, forget, pin), so each works on state read
    from the store after the previous one wrote.

    Raises:
        LockTimeoutError: if another process held it more than :data:`KERNEL_LOCK_TIMEOUT_S` seconds.
    """
    return memory.backend.locks(memory.agent_id).hold(KERNEL_LOCK, timeout_s=KERNEL_LOCK_TIMEOUT_S)
