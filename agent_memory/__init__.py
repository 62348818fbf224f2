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
    CorruptRecordError,
    EmbeddingError,
    InvalidArgumentError,
    InvalidIdError,
    ItemNotFoundError,
    LLMConnectionError,
    LLMError,
    LLMOutputError,
    LLMStatusError,
    LLMTimeoutError,
    LockTimeoutError,
    MemoryClosedError,
    StoreError,
    TransformError,
    VectorIndexError,
)
from agent_memory.index.embeddings import Embedder, SentenceTransformerEmbedder
from agent_memory.index.fusion import SCORE_TOLERANCE
from agent_memory.index.vector import ChunkHit, IndexChunk, VectorIndex
from agent_memory.llm.client import LLMClient, LLMResponse, OpenAIChatClient
from agent_memory.memory import AgentMemory
from agent_memory.observers import (
    ContentMissing,
    EventRecorder,
    IndexFailed,
    IndexRecreated,
    MemoryEvent,
    MemoryObserver,
    RecordQuarantined,
)
from agent_memory.models.messages import Message, ToolCall
from agent_memory.presentation.citations import Citation, CitationBuilder
from agent_memory.presentation.context import ContextBuilder, ContextStats
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

__version__ = "0.1.0"

__all__ = [
    "AgentMemory",
    "AgentMemoryError",
    "ChunkHit",
    "Citation",
    "CitationBuilder",
    "CompactionOutcome",
    "CompactionPlugin",
    "ConfigurationError",
    "ContentMissing",
    "ContextBuilder",
    "ContextStats",
    "CorruptRecordError",
    "DEFAULT_CHUNK_OVERLAP_TOKENS",
    "DEFAULT_CHUNK_TOKENS",
    "DEFAULT_QUERY_LIMIT",
    "DEFAULT_RETRIEVE_MAX_TOKENS",
    "Embedder",
    "EmbeddingError",
    "EventRecorder",
    "ExcerptTransform",
    "FilteredTransform",
    "FirstNTransform",
    "FullTransform",
    "IndexChunk",
    "IndexFailed",
    "IndexRecreated",
    "InvalidArgumentError",
    "InvalidIdError",
    "ItemMetadata",
    "ItemNotFoundError",
    "ItemRecord",
    "LLMClient",
    "LLMCompactor",
    "LLMConnectionError",
    "LLMError",
    "LLMOutputError",
    "LLMResponse",
    "LLMStatusError",
    "LLMTimeoutError",
    "LastNTransform",
    "LockTimeoutError",
    "MemoryClosedError",
    "MemoryConfig",
    "MemoryCriteria",
    "MemoryEvent",
    "MemoryItem",
    "MemoryObserver",
    "MemorySnapshot",
    "MemoryTools",
    "MemoryTransform",
    "MemoryType",
    "Message",
    "OfferState",
    "OpenAIChatClient",
    "PluginRegistry",
    "PresentationPolicy",
    "QueryHit",
    "RecordQuarantined",
    "RetrieveResult",
    "SCORE_TOLERANCE",
    "SentenceTransformerEmbedder",
    "StoreError",
    "SummaryTransform",
    "TiktokenCounter",
    "TokenCounter",
    "ToolCall",
    "ToolOffer",
    "TransformError",
    "VectorIndex",
    "VectorIndexError",
    "__version__",
    "load_toolkit",
]
