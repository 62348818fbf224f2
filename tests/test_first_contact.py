"""What a new user meets first (issue 18, the probe's findings): ``memory.query("heron")`` takes
the text as every peer's ``search("…")`` does, and a library call prints no progress bar."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_memory import AgentMemory
from agent_memory.errors import InvalidArgumentError
from agent_memory.models.items import MemoryCriteria

ROOT = Path(__file__).resolve().parents[1]


def test_query_takes_the_text_first(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path)
    heron = memory.store("A grey heron waited in the reeds for an hour.", tags=["birds"])
    memory.store("The tide tables for the estuary are printed weekly.")
    by_text = [hit.item.id for hit in memory.query("heron")]
    assert by_text[0] == heron
    assert by_text == [hit.item.id for hit in memory.query(text="heron")]
    assert [h.item.id for h in memory.query("heron", tags=["birds"], limit=1)] == [heron]  # filters still apply
    assert [h.item.id for h in memory.query(MemoryCriteria(text="heron"))] == by_text
    with pytest.raises(InvalidArgumentError):
        memory.query("heron", text="heron")
    with pytest.raises(InvalidArgumentError):
        memory.query("   ")


def test_a_library_call_prints_no_progress_bar(tmp_path: Path) -> None:
    code = ("from agent_memory import AgentMemory\n"
            f"m = AgentMemory('agent', {str(tmp_path)!r})\n"
            "m.store('A grey heron waited in the reeds.')\n"
            "print(len(m.query('heron')))\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "1"
    assert "Loading weights" not in done.stderr and "it/s]" not in done.stderr
