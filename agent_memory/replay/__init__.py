"""Replay real agent runs through AgentMemory and count every prompt (``agent-memory replay``).

:mod:`~agent_memory.replay.loaders` reads runs (OpenAI chat format, SWE-agent ``.traj``, ReAct
logs), :mod:`~agent_memory.replay.pages` builds a research session from real web pages,
:mod:`~agent_memory.replay.engine` replays them and :mod:`~agent_memory.replay.report` writes the
report. Nothing here is imported by ``agent_memory`` itself.
"""

from agent_memory.replay.engine import DEFAULT_POLICIES, ReactCheck, RunResult, replay_many, replay_run
from agent_memory.replay.loaders import ReplayRun, ResultHint, call_points, load_trace_file, load_traces
from agent_memory.replay.pages import load_page_session
from agent_memory.replay.report import ReplayReport, summarize, write_report

__all__ = [
    "DEFAULT_POLICIES",
    "ReactCheck",
    "ReplayReport",
    "ReplayRun",
    "ResultHint",
    "RunResult",
    "call_points",
    "load_page_session",
    "load_trace_file",
    "load_traces",
    "replay_many",
    "replay_run",
    "summarize",
    "write_report",
]
