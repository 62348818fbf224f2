"""Helpers for testing code that uses agent-memory: real servers on loopback, and the one fake.

:mod:`~agent_memory.testing.servers` starts and stops real servers on 127.0.0.1 (Chroma, Postgres
with pgvector, llama-cpp-python's server with a local model). :mod:`~agent_memory.testing.fake_llm`
holds :class:`FakeLLMServer`, the one fake: a remote LLM service (OpenAI Chat Completions, OpenAI
Responses, Anthropic Messages) with real HTTP on loopback and scripted answers instead of a model;
:mod:`~agent_memory.testing.api_shapes` the requests it accepts and the errors it answers others with.
:mod:`~agent_memory.testing.conformance` is the storage backends' conformance suite. Nothing here
fakes agent-memory itself. Every name below is importable from ``agent_memory.testing``.
"""

from agent_memory.testing.fake_llm import (
    ANTHROPIC_CACHE_LOOKBACK_BLOCKS,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_READ_TIMEOUT_S,
    FAKE_MODEL,
    FakeLLMServer,
    FakeOpenAIServer,
    RecordedRequest,
    ScriptedReply,
    ScriptedToolCall,
    ScriptedUsage,
)
from agent_memory.testing.servers import (
    POSTGRES_URL_ENV,
    SMOLLM2_GGUF,
    ChromaServer,
    LlamaServer,
    PostgresServer,
    free_port,
    smollm2_model_path,
)

__all__ = [
    "ANTHROPIC_CACHE_LOOKBACK_BLOCKS",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_READ_TIMEOUT_S",
    "FAKE_MODEL",
    "POSTGRES_URL_ENV",
    "SMOLLM2_GGUF",
    "ChromaServer",
    "FakeLLMServer",
    "FakeOpenAIServer",
    "LlamaServer",
    "PostgresServer",
    "RecordedRequest",
    "ScriptedReply",
    "ScriptedToolCall",
    "ScriptedUsage",
    "free_port",
    "smollm2_model_path",
]
