"""agent-memory: memory as a fourth channel for LLM agents.

Full action results are stored out of the context (:class:`AgentMemory`), shown to the model once,
then cited by memory id; the model gets content back with the Store / Retrieve / Query memory
tools (package ``actions``). A trace memory kernel (:class:`MemoryManager`) keeps the conversation
inside the model's budget, and :class:`MemoryAgent` runs an agent loop with both, sub-agents
included. Importing this package is fast: chromadb, torch and sentence-transformers load on first
use of the index.

This is the public face, what the README and docs/ use (40 names): the memory (:class:`AgentMemory`,
:class:`MemoryConfig`, its items, criteria, hits and snapshots); the agent loop
(:class:`MemoryAgent`, its config, run, tools, sub-agents, event processor); the kernel
(:class:`MemoryManager`, :class:`ModelLimits`, :class:`LLMRequestAssembler`); the chat models;
what the model is shown (:class:`Message`, :class:`ToolCall`, :class:`ContextBuilder`, its policy,
citations, plugins and the memory tools' offer, :func:`load_toolkit`); money (:class:`PriceModel`,
:class:`Cost`); what observers hear (:class:`MemoryNotice`); the errors most callers catch; and
a small web page to try it on (:func:`sample_page`).
Everything else stays importable from its module (``agent_memory.errors`` for the whole error
tree, ``agent_memory.observers`` for every notice,
``agent_memory.storage`` for backends); the framework adapters are in
``agent_memory.integrations.<framework>`` (each needs its extra), the test helpers and the
backends' conformance suite in ``agent_memory.testing``.
"""

from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version

from agent_memory.agent.config import AgentConfig, MemoryMode
from agent_memory.agent.events import EventProcessor
from agent_memory.agent.loop import AgentRun, MemoryAgent
from agent_memory.agent.sub_agents import SubAgentResult
from agent_memory.agent.tools import FunctionTool, tool
from agent_memory.config import MemoryConfig
from agent_memory.errors import (
    AgentMemoryError,
    ConfigurationError,
    InvalidArgumentError,
    ItemNotFoundError,
    LLMError,
    StoreError,
)
from agent_memory.kernel.assembler import LLMRequestAssembler
from agent_memory.kernel.budget import ModelLimits
from agent_memory.kernel.manager import MemoryManager
from agent_memory.llm.chat import AnthropicChatModel, ChatModel, OpenAIChatModel, OpenAIResponsesModel
from agent_memory.memory import AgentMemory
from agent_memory.models.items import ItemMetadata, MemoryCriteria, MemoryItem, MemorySnapshot, QueryHit
from agent_memory.models.messages import Message, ToolCall
from agent_memory.observers import MemoryNotice
from agent_memory.plugins import PluginRegistry
from agent_memory.presentation.citations import CitationBuilder
from agent_memory.presentation.context import ContextBuilder
from agent_memory.presentation.offer import OfferState, load_toolkit
from agent_memory.presentation.policy import PresentationPolicy
from agent_memory.pricing import Cost, PriceModel
from agent_memory.samples import sample_page

try:
    __version__ = _version("agent-memory")
except _PackageNotFoundError:  # a source checkout on sys.path that was never installed
    __version__ = "0+unknown"
"""This release (from the installed package's metadata); ``"0+unknown"`` when no metadata is
installed (a source checkout put on ``sys.path``)."""

__all__ = [
    "AgentConfig",
    "AgentMemory",
    "AgentMemoryError",
    "AgentRun",
    "AnthropicChatModel",
    "ChatModel",
    "CitationBuilder",
    "ConfigurationError",
    "ContextBuilder",
    "Cost",
    "EventProcessor",
    "FunctionTool",
    "InvalidArgumentError",
    "ItemMetadata",
    "ItemNotFoundError",
    "LLMError",
    "LLMRequestAssembler",
    "MemoryAgent",
    "MemoryConfig",
    "MemoryCriteria",
    "MemoryItem",
    "MemoryManager",
    "MemoryMode",
    "MemoryNotice",
    "MemorySnapshot",
    "Message",
    "ModelLimits",
    "OfferState",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "PluginRegistry",
    "PresentationPolicy",
    "PriceModel",
    "QueryHit",
    "StoreError",
    "SubAgentResult",
    "ToolCall",
    "load_toolkit",
    "sample_page",
    "tool",
]
