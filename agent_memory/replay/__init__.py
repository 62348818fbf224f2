"""Replay real agent runs through AgentMemory and count every prompt (``agent-memory replay``).

:mod:`~agent_memory.replay.loaders` reads runs (OpenAI chat format, SWE-agent ``.traj``, ReAct
logs) and the agent's own tool definitions, :mod:`~agent_memory.replay.pages` builds a research
session from real web pages, :mod:`~agent_memory.replay.strategies` names what is compared,
:mod:`~agent_memory.replay.engine` replays and counts (gross and net of tool definitions),
:mod:`~agent_memory.replay.react_check` checks retrievability on ReAct runs,
:mod:`~agent_memory.replay.report` sums and prices what was counted,
:mod:`~agent_memory.replay.report_text` renders it as text and
:mod:`~agent_memory.replay.report_plots` plots it and writes the report. Nothing here is imported
by ``agent_memory`` itself.
"""

from agent_memory.replay.engine import RunResult, StrategyCurve, replay_many, replay_run
from agent_memory.replay.loaders import (
    ReplayRun,
    ResultHint,
    call_points,
    load_tool_definitions,
    load_trace_file,
    load_traces,
    with_tool_definitions,
)
from agent_memory.replay.pages import load_page_session
from agent_memory.replay.react_check import ReactCheck, react_query_check
from agent_memory.replay.report import ReplayReport, summarize
from agent_memory.replay.report_plots import write_report
from agent_memory.replay.strategies import (
    DEFAULT_STRATEGIES,
    MASKING,
    NAIVE,
    ReplayStrategy,
    parse_policy,
    parse_strategy,
)

__all__ = [
    "DEFAULT_STRATEGIES",
    "MASKING",
    "NAIVE",
    "ReactCheck",
    "ReplayReport",
    "ReplayRun",
    "ReplayStrategy",
    "ResultHint",
    "RunResult",
    "StrategyCurve",
    "call_points",
    "load_page_session",
    "load_tool_definitions",
    "load_trace_file",
    "load_traces",
    "parse_policy",
    "parse_strategy",
    "react_query_check",
    "replay_many",
    "replay_run",
    "summarize",
    "with_tool_definitions",
    "write_report",
]
