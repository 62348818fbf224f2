"""agent-memory: memory as a fourth channel for LLM agents.

Full action results are stored out of the context (:class:`AgentMemory`), shown to the model once,
then cited by memory id; the model gets content back with the Store / Retrieve / Query memory
tools (package ``actions``). Importing this package is fast: chromadb, torch and
sentence-transformers load on first use of the index.
"""

from agent_memory.config import (
    DEFAULT_CHUNK_OVERLAP_TOKENS,
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_QUERY_LIMIT,
    DEFAULT_RETRIEVE_MAX_TOKENS,
    MemoryConfig,
)
from agent_memory.errors import (
    AgentMemoryError,
    ConfigurationError,
    ContextOverflowError,
    CorruptRecordError,
    EmbeddingError,
    EventFailedError,
    InvalidArgumentError,
    InvalidIdError,
    IsolationError,
    ItemNotFoundError,
    KeywordIndexError,
    LLMConnectionError,
    LLMError,
    LLMOutputError,
    LLMStatusError,
    LLMTimeoutError,
    LockTimeoutError,
    MemoryClosedError,
    OutsideSnapshotError,
    StoreError,
    TransformError,
    VectorIndexError,
)
from agent_memory.index.embeddings import Embedder, SentenceTransformerEmbedder
from agent_memory.index.fusion import SCORE_TOLERANCE
from agent_memory.index.vector import ChunkHit, IndexChunk, VectorIndex
from agent_memory.llm.chat import (
    AnthropicChatModel,
    ChatModel,
    ChatResult,
    OpenAIChatModel,
    OpenAIResponsesModel,
    Usage,
)
from agent_memory.llm.client import LLMClient, LLMResponse, OpenAIChatClient
from agent_memory.llm.renderers import AnthropicRenderer, OpenAIChatRenderer, OpenAIResponsesRenderer, PromptRenderer
from agent_memory.memory import AgentMemory
from agent_memory.observers import (
    Compacted,
    CompactionRequested,
    ContentMissing,
    EventApplied,
    EventRecorder,
    IndexFailed,
    IndexRecreated,
    MemoryEvent,
    MemoryObserver,
    RecordQuarantined,
    Retrieved,
    TraceIngested,
    Truncated,
)
from agent_memory.models.messages import Media, Message, ToolCall
from agent_memory.presentation.citations import Citation, CitationBuilder
from agent_memory.presentation.context import BuiltContext, ContextBuilder, ContextStats, PresentationState
from agent_memory.presentation.llm_compactor import CompactionOutcome, LLMCompactor
from agent_memory.presentation.offer import MemoryTools, OfferState, ToolOffer, load_toolkit
from agent_memory.presentation.plugins import CompactionPlugin, PluginRegistry
from agent_memory.presentation.policy import PresentationPolicy
from agent_memory.models.items import (
    ExcerptTransform,
    FilteredTransform,
    FirstNTransform,
    FullTransform,
    ItemMetadata,
    ItemRecord,
    LastNTransform,
    MemoryCriteria,
    MemoryItem,
    MemorySnapshot,
    MemoryTransform,
    MemoryType,
    QueryHit,
    RetrieveResult,
    SummaryTransform,
)
from agent_memory.tokens import TiktokenCounter, TokenCounter
from agent_memory.kernel.turns import TurnTracker
from agent_memory.kernel.budget import BudgetCheck, ModelLimits, Pressure, TokenBudget, model_limits
from agent_memory.kernel.compactor import CompactionRecord, Compactor
from agent_memory.kernel.manager import MemoryManager
from agent_memory.agent.config import AgentConfig, MemoryMode
from agent_memory.agent.events import EventProcessor, ExecutionMode, StepResult
from agent_memory.agent.loop import AgentRun, AgentStep, MemoryAgent
from agent_memory.agent.sub_agents import SubAgentResult
from agent_memory.agent.tools import FunctionTool, ToolFailure, tool
from agent_memory.fork import MemoryFork
from agent_memory.agent.queue import EventKind, EventQueue, QueuedEvent
from agent_memory.agent.step_lock import StepLock, StepLockHolder
from agent_memory.kernel.retriever import Retriever
from agent_memory.kernel.snapshot_builder import CompactionSnapshotBuilder, MemoryBundle
from agent_memory.kernel.summarizer import CompactionResult, ExtractiveSummarizer, LLMSummarizer, Summarizer
from agent_memory.kernel.working_context import WorkingContextSnapshot
from agent_memory.llm.assembler import LLMRequestAssembler, RequestPackage
from agent_memory.models.traces import (
    MAX_TOOL_RESULT_PREVIEW_CHARS,
    EpisodicItem,
    RawTraceItem,
    SemanticItem,
    ToolInteraction,
    ToolInteractionStatus,
    TraceMedia,
    TraceType,
    build_tool_interactions,
    format_turn_id,
    tool_result_preview,
    turn_number,
    window_id_for,
)
from agent_memory.store.traces import FileTraceStore, InMemoryTraceStore, TraceKind, TraceStore

__version__ = "0.1.0"

__all__ = [
    "AgentConfig",
    "AgentMemory",
    "AgentMemoryError",
    "AgentRun",
    "AgentStep",
    "AnthropicChatModel",
    "AnthropicRenderer",
    "BudgetCheck",
    "BuiltContext",
    "ChatModel",
    "ChatResult",
    "ChunkHit",
    "Citation",
    "CitationBuilder",
    "Compacted",
    "CompactionOutcome",
    "CompactionPlugin",
    "CompactionRecord",
    "CompactionRequested",
    "CompactionResult",
    "CompactionSnapshotBuilder",
    "Compactor",
    "ConfigurationError",
    "ContentMissing",
    "ContextBuilder",
    "ContextOverflowError",
    "ContextStats",
    "CorruptRecordError",
    "DEFAULT_CHUNK_OVERLAP_TOKENS",
    "DEFAULT_CHUNK_TOKENS",
    "DEFAULT_QUERY_LIMIT",
    "DEFAULT_RETRIEVE_MAX_TOKENS",
    "Embedder",
    "EmbeddingError",
    "EpisodicItem",
    "EventApplied",
    "EventFailedError",
    "EventKind",
    "EventProcessor",
    "EventQueue",
    "EventRecorder",
    "ExcerptTransform",
    "ExecutionMode",
    "ExtractiveSummarizer",
    "FileTraceStore",
    "FilteredTransform",
    "FirstNTransform",
    "FullTransform",
    "FunctionTool",
    "InMemoryTraceStore",
    "IndexChunk",
    "IndexFailed",
    "IndexRecreated",
    "InvalidArgumentError",
    "InvalidIdError",
    "IsolationError",
    "ItemMetadata",
    "ItemNotFoundError",
    "ItemRecord",
    "KeywordIndexError",
    "LLMClient",
    "LLMCompactor",
    "LLMConnectionError",
    "LLMError",
    "LLMOutputError",
    "LLMRequestAssembler",
    "LLMResponse",
    "LLMStatusError",
    "LLMSummarizer",
    "LLMTimeoutError",
    "LastNTransform",
    "LockTimeoutError",
    "MAX_TOOL_RESULT_PREVIEW_CHARS",
    "Media",
    "MemoryAgent",
    "MemoryBundle",
    "MemoryClosedError",
    "MemoryConfig",
    "MemoryCriteria",
    "MemoryEvent",
    "MemoryFork",
    "MemoryItem",
    "MemoryManager",
    "MemoryMode",
    "MemoryObserver",
    "MemorySnapshot",
    "MemoryTools",
    "MemoryTransform",
    "MemoryType",
    "Message",
    "ModelLimits",
    "OfferState",
    "OpenAIChatClient",
    "OpenAIChatModel",
    "OpenAIChatRenderer",
    "OpenAIResponsesModel",
    "OpenAIResponsesRenderer",
    "OutsideSnapshotError",
    "PluginRegistry",
    "PresentationPolicy",
    "PresentationState",
    "Pressure",
    "PromptRenderer",
    "QueryHit",
    "QueuedEvent",
    "RawTraceItem",
    "RecordQuarantined",
    "RequestPackage",
    "RetrieveResult",
    "Retrieved",
    "Retriever",
    "SCORE_TOLERANCE",
    "SemanticItem",
    "SentenceTransformerEmbedder",
    "StepLock",
    "StepLockHolder",
    "StepResult",
    "StoreError",
    "SubAgentResult",
    "Summarizer",
    "SummaryTransform",
    "TiktokenCounter",
    "TokenBudget",
    "TokenCounter",
    "ToolCall",
    "ToolFailure",
    "ToolInteraction",
    "ToolInteractionStatus",
    "ToolOffer",
    "TraceIngested",
    "TraceKind",
    "TraceMedia",
    "TraceStore",
    "TraceType",
    "TransformError",
    "Truncated",
    "TurnTracker",
    "Usage",
    "VectorIndex",
    "VectorIndexError",
    "WorkingContextSnapshot",
    "__version__",
    "build_tool_interactions",
    "format_turn_id",
    "load_toolkit",
    "model_limits",
    "tool",
    "tool_result_preview",
    "turn_number",
    "window_id_for",
]
