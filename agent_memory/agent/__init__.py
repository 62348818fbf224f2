"""The agent layer: the MemoryAgent loop (:mod:`~agent_memory.agent.loop`), its tools
(:mod:`~agent_memory.agent.tools`), sub-agents (:mod:`~agent_memory.agent.sub_agents`), and serial,
durable processing of memory events (:mod:`agent_memory.agent.events`)."""

from agent_memory.agent.config import AgentConfig, MemoryMode
from agent_memory.agent.events import EventProcessor, ExecutionMode, StepResult, event_memory_id, result_memory_id
from agent_memory.agent.loop import AgentRun, AgentStep, MemoryAgent
from agent_memory.agent.prompt import MEMORY_PROMPT
from agent_memory.agent.step_lock import StepLock, StepLockHolder
from agent_memory.agent.sub_agents import SubAgentResult
from agent_memory.agent.tools import FunctionTool, ToolFailure, as_tool, tool
from agent_memory.storage.journal import EventKind, JournalEntry

__all__ = [
    "MEMORY_PROMPT",
    "AgentConfig",
    "AgentRun",
    "AgentStep",
    "FunctionTool",
    "MemoryAgent",
    "MemoryMode",
    "SubAgentResult",
    "ToolFailure",
    "as_tool",
    "tool",
    "EventKind",
    "EventProcessor",
    "ExecutionMode",
    "JournalEntry",
    "StepLock",
    "StepLockHolder",
    "StepResult",
    "event_memory_id",
    "result_memory_id",
]
