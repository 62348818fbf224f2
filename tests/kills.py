"""Killing a child process with SIGKILL in the middle of its work, for the crash tests: once it has
acknowledged a (seeded) number of steps, never after a wall-clock delay. How far a child gets in a
given time depends on the machine and its load; how far it got before the kill does not."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable


def kill_after(child: subprocess.Popen[str], steps: int, is_step: Callable[[str], bool]) -> list[str]:
    """Read ``child``'s stdout line by line until ``steps`` lines that ``is_step`` accepts have
    come, then kill it with SIGKILL, wherever its next step is. Returns every line read; the rest
    of its output is in ``child.communicate()``.

    Raises:
        AssertionError: if the child's output ends first (it finished or died), with its stderr.
    """
    assert child.stdout is not None
    lines: list[str] = []
    seen = 0
    while seen < steps:
        line = child.stdout.readline()
        if not line:
            _, err = child.communicate(timeout=60)
            raise AssertionError(f"the child ended after {seen} of {steps} steps: {(err or '')[-2000:]}")
        lines.append(line)
        seen += is_step(line)
    os.kill(child.pid, signal.SIGKILL)
    return lines
