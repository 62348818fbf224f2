"""agent-memory inside the agent frameworks people already run: one module per framework, each an
extra (``pip install 'agent-memory[openai-agents]'``...), all on one
:class:`~agent_memory.integrations.channel.MemoryChannel` per conversation: every tool result
stored, shown once, then cited with its memory id, retrievable by the memory tools, and every
model call's usage priced with prompt caching.

- :mod:`agent_memory.integrations.openai_agents`: the OpenAI Agents SDK.
- :mod:`agent_memory.integrations.langchain`: LangChain v1 agent middleware;
  :mod:`agent_memory.integrations.langgraph_store`: a LangGraph ``BaseStore``.
- :mod:`agent_memory.integrations.pydantic_ai`: a pydantic-ai history processor and toolset.
- :mod:`agent_memory.integrations.anthropic_memory`: Claude's memory tool (``memory_20250818``)
  kept in agent-memory.

Importing this package imports no framework; each module imports its own.
"""
