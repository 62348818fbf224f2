"""Truncation notices (issue 27, item 7): a :class:`Truncated` notice compares like with like (the
kernel's own count of the prompt before and after, never a provider's size against ours), a live
memory still warns of each truncation, and ``agent-memory replay --budget`` (a measurement of
recorded runs) reports how many there were once, in its report and summary line, instead of
warning once per truncation on stderr. Real tau-bench runs, the real CLI in its own process."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.kernel.budget import ModelLimits
from agent_memory.kernel.manager import MemoryManager
from agent_memory.observers import NoticeRecorder, Truncated
from agent_memory.replay.kernel_replay import replay_kernel_run
from agent_memory.replay.loaders import load_tool_definitions, load_traces, with_tool_definitions

TRUNCATING_RUN = "gpt-4o-airline-dev-003-task3-trial0"
"""A tau-bench run whose kernel replay at ``--budget 1000`` truncates once: its last turn grows past
the budget after the previous call, so the size of that call (the old ``tokens_before``) was
smaller than the prompt left after the truncation."""


@pytest.mark.data
def test_a_truncation_notice_counts_before_and_after_alike(data_dir: Path, tmp_path: Path) -> None:
    runs = load_traces([data_dir / "traces" / "tau_bench"])
    runs = with_tool_definitions(runs, {"tau_bench": load_tool_definitions(data_dir / "agent_tools" / "tau_bench_airline.json")})
    (run,) = [r for r in runs if r.run_id == TRUNCATING_RUN]
    recorder = NoticeRecorder()
    result = replay_kernel_run(run, budget=1_000, workdir=tmp_path, observers=[recorder])
    notices = recorder.of_type(Truncated)
    assert result.truncations == len(notices) >= 1 and result.failures == []
    for notice in notices:
        assert isinstance(notice, Truncated)
        assert 0 < notice.tokens_after <= notice.tokens_before, notice.describe()
        assert "kernel's count" in notice.describe()


def test_a_live_memory_still_warns_of_each_truncation(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    recorder = NoticeRecorder()
    memory = AgentMemory("kernel", tmp_path, config=MemoryConfig(index_on_store=False))
    manager = MemoryManager(memory, system_prompt="You are terse.", observers=[recorder], tail_turns=20,
                            limits=ModelLimits(max_context_tokens=3_000, max_output_tokens=500, safety_margin_tokens=0))
    for i in range(12):
        manager.ingest_user_message(f"turn {i}: " + " ".join(f"w{i}_{j}" for j in range(60)))
        manager.ingest_assistant_response(f"ok {i}")
    ours = manager.count_tokens(manager.build_prompt().messages)
    manager.observe_usage(ours + 500, estimate=ours)  # the provider counted 500 more than we did
    assert manager.truncation_required
    with caplog.at_level(logging.WARNING, logger="agent_memory"):
        dropped = manager.truncate_oldest()
    (notice,) = recorder.of_type(Truncated)
    assert isinstance(notice, Truncated) and notice.turn_ids == dropped
    # both sizes from one counter: the kernel's, calibrated by the provider's last report
    assert notice.tokens_before == ours + 500
    assert notice.tokens_after == manager.count_tokens(manager.build_prompt().messages) + 500
    assert notice.tokens_after <= notice.tokens_before
    warned = [r for r in caplog.records if r.name == "agent_memory" and r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warned] == [notice.describe()]


@pytest.mark.data
def test_replay_reports_truncations_once_and_warns_of_none(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "agent_memory.cli", "replay", str(data_dir / "traces" / "tau_bench"),
         "--limit-runs", "4", "--tool-definitions", f"tau_bench={data_dir / 'agent_tools' / 'tau_bench_airline.json'}",
         "--budget", "1000", "--policy", "full_once", "--no-react-check", "--out", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (row,) = json.loads((out / "report.json").read_text(encoding="utf-8"))["kernel"]["sources"]
    assert row["source"] == "tau_bench" and row["truncations"] >= 1  # the run above is among the first 4
    assert "truncated" not in done.stderr.lower(), done.stderr[-3000:]  # no warning per truncation
    assert "truncated in" not in done.stdout
    summary = [line for line in done.stdout.splitlines() if line.startswith("Kernel, ")]
    assert len(summary) == 1 and f"{row['truncations']:,} truncations" in summary[0]  # the count, once
