"""What the library's background threads do so that the agent's own thread comes first.

An agent waits on its own thread (a step: storing a result, building the next prompt), while the
memory's background threads (indexing, embedding, opening the index, importing the page
extractor) work beside it. Two things let the agent's thread go first:

- **Priority.** On a machine with few cores the background threads take the cores the agent's step
  needs (on 2 cores, the 2.43 MB query result's indexing, whose tokenizer and ONNX runtime run
  without the interpreter lock, left the step about a third of a core). Those threads lower their
  own CPU priority when they start (:func:`background_priority`): the operating system then runs
  the agent's thread first wherever they compete, and gives the background every cycle the agent
  leaves idle (waiting for the model).
- **Checkpoints.** Python code of two threads shares one interpreter lock, handed over every
  5 ms (https://docs.python.org/3/library/sys.html#sys.setswitchinterval): a step running beside
  the indexing thread's Python gets about half of it. The indexing thread waits while a foreground
  call runs (:class:`~agent_memory.index.foreground.Foreground`), at its checkpoints: between items
  and stages, and, through :func:`checkpoint`, inside the long loops of a stage (a table's rows
  turned into lines, a text cut into chunks), where no lock is held.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

BACKGROUND_NICE = 10
"""How much a background thread raises its nice value (Linux: -20 highest to 19 lowest, 0 the
default): at +10 it gets about 1/10 of a core's time where it competes with a thread at 0 (the
kernel's weight table, ``sched_prio_to_weight`` in kernel/sched/core.c of
github.com/torvalds/linux: weight 1024 at nice 0, 110 at nice 10), and all of a core nobody else
wants."""


def background_priority() -> bool:
    """Lower the calling thread's CPU priority by :data:`BACKGROUND_NICE`, for the rest of its
    life; call it first thing in a thread that only does background work. On Linux the nice value
    belongs to each thread (``setpriority(2)``, NOTES: "the nice value is a per-thread attribute":
    ``PRIO_PROCESS`` with a thread id changes that thread only), and threads the thread starts
    inherit it (an ONNX runtime pool started there). Elsewhere the value is the process's, so
    nothing is changed. An unprivileged thread can lower its priority, never raise it back.

    Returns:
        Whether the priority was lowered (``False``: not Linux, or the system refused, which is
        never an error: the work is done at the normal priority).
    """
    if not sys.platform.startswith("linux"):
        return False
    thread = threading.get_native_id()
    try:
        now = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, now + BACKGROUND_NICE))
    except OSError:
        return False
    return True


_hooks = threading.local()


def checkpoint() -> None:
    """A place in a long loop where background work may pause for the agent: runs the step-back
    the calling thread registered (:func:`checkpoints`), which waits while a foreground call runs;
    on any other thread, nothing. Call it only where no lock is held (a caller waiting on that lock
    would wait for the pause too) and not in every turn of a tight loop (a few hundred rows apart:
    a call costs a lock acquisition when it registered one)."""
    step_back = getattr(_hooks, "step_back", None)
    if step_back is not None:
        step_back()


@contextmanager
def checkpoints(step_back: Callable[[], None]) -> Iterator[None]:
    """Inside the block, :func:`checkpoint` on this thread calls ``step_back``."""
    previous = getattr(_hooks, "step_back", None)
    _hooks.step_back = step_back
    try:
        yield
    finally:
        _hooks.step_back = previous


CHECKPOINT_ROWS = 256
"""Rows, lines or chunks a loop handles between two :func:`checkpoint` calls (256 rows of a table
take ~1-2 ms)."""
