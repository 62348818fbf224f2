"""The CPU priority of the library's background threads.

An agent waits on its own thread (a step: storing a result, building the next prompt), while the
memory's background threads (indexing, embedding, opening the index, importing the page
extractor) work beside it. On a machine with few cores they take the cores the agent's step
needs: on 2 cores, the 2.43 MB query result's indexing (tokenizer and ONNX runtime, which run
without the interpreter lock) left the agent's step about a third of a core. Those threads
therefore lower their own priority when they start: the operating system then runs the agent's
thread first wherever they compete, and gives the background every cycle the agent leaves idle
(waiting for the model). :class:`~agent_memory.index.foreground.Foreground` is the other half:
between its stages the indexing thread waits for a foreground call, so the two threads do not
share the interpreter lock either.
"""

from __future__ import annotations

import os
import sys
import threading

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
