"""Where the library's background work pauses for the agent's own thread.

An agent waits on its own thread (a step: storing a result, building the next prompt), while the
memory's indexing thread works beside it. Python code of two threads shares one interpreter lock,
handed over every 5 ms (https://docs.python.org/3/library/sys.html#sys.setswitchinterval): a
step running beside the indexing thread's Python gets about half of it. The indexing thread
therefore waits while a foreground call runs (:class:`~agent_memory.index.foreground.Foreground`),
at its checkpoints: between items and stages, and, through :func:`checkpoint`, inside the long
loops of a stage (a table's rows turned into lines, a text cut into chunks), where no lock is held.

(Lowering the background threads' CPU priority was tried and left out: it showed no gain beside
this machine's noise, and a nice value counts against every other process too, so that on a busy
machine the index fell far behind.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

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
