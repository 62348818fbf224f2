"""Language models behind small Protocols.

- :class:`ChatModel` (:mod:`agent_memory.llm.chat`): messages and tools in, the assistant's message
  with its tool calls and the provider's usage out; on the OpenAI (Chat Completions, Responses)
  and Anthropic SDKs. The agent loop and the memory kernel call it.
- :class:`PromptRenderer` (:mod:`agent_memory.llm.renderers`): provider-neutral messages to one
  provider's request payload, pure.
- :class:`LLMClient` (:mod:`agent_memory.llm.client`): one text completion from OpenAI-format
  message dicts; :class:`OpenAIChatClient` serves the LLM citation writer
  (:mod:`agent_memory.presentation.llm_citations`).
"""

from agent_memory.llm.chat import (
    DEFAULT_ANTHROPIC_MAX_OUTPUT_TOKENS,
    DEFAULT_MAX_RETRIES,
    LLAMA_CPP_PYTHON,
    TOOLS_SEEN_RATIO,
    AnthropicChatModel,
    ChatModel,
    ChatResult,
    OpenAIChatModel,
    OpenAIResponsesModel,
    ServerCompat,
    Usage,
)
from agent_memory.llm.client import DEFAULT_LLM_TIMEOUT_S, LLMClient, LLMResponse, OpenAIChatClient, map_sdk_errors
from agent_memory.llm.renderers import (
    AnthropicRenderer,
    OpenAIChatRenderer,
    OpenAIResponsesRenderer,
    PromptRenderer,
    ToolSpec,
    tool_spec,
)

__all__ = [
    "DEFAULT_ANTHROPIC_MAX_OUTPUT_TOKENS",
    "DEFAULT_LLM_TIMEOUT_S",
    "DEFAULT_MAX_RETRIES",
    "LLAMA_CPP_PYTHON",
    "TOOLS_SEEN_RATIO",
    "AnthropicChatModel",
    "AnthropicRenderer",
    "ChatModel",
    "ChatResult",
    "LLMClient",
    "LLMResponse",
    "OpenAIChatClient",
    "OpenAIChatModel",
    "OpenAIChatRenderer",
    "OpenAIResponsesModel",
    "OpenAIResponsesRenderer",
    "PromptRenderer",
    "ServerCompat",
    "ToolSpec",
    "Usage",
    "map_sdk_errors",
    "tool_spec",
]
