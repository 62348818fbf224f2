"""Quickstart: a real page stored, cited, retrieved around a term and queried, then a MemoryAgent
turn against a scripted stand-in for a model. Offline, no key: python examples/quickstart.py"""
import json

from agent_memory import AgentMemory, ContextBuilder, MemoryAgent, OpenAIChatModel, sample_page, tool
from agent_memory.testing import FakeLLMServer, ScriptedReply, ScriptedToolCall

page = sample_page("fetch-api")  # a small web page shipped with the package; any HTML page works

memory = AgentMemory("quickstart", "./quickstart-memory")
page_id = memory.store(page, type="web_content", source="https://example.org/fetch-api")
print(ContextBuilder(memory).view(page_id).cited)              # what the model sees after one showing
print(memory.retrieve(page_id, around="XMLHttpRequest").content[:300])
print([(hit.item.id, hit.match) for hit in memory.query("replacement for XHR", limit=2)])


@tool
def fetch_page(url: str) -> str:
    """Fetch a web page.

    Args:
        url: the page's address.
    """
    return page


with FakeLLMServer() as model_server:  # stands in for any OpenAI-compatible server (vLLM, Ollama, llama.cpp)
    model_server.enqueue(ScriptedReply(tool_calls=(ScriptedToolCall("fetch_page", json.dumps({"url": "https://example.org"})),)),
                         "The Fetch API replaces XMLHttpRequest.")
    model = OpenAIChatModel("gpt-4o", base_url=model_server.base_url, api_key="none")
    with MemoryAgent(model, tools=[fetch_page], memory=memory) as agent:
        run = agent.run("What does the Fetch API replace?")
print(run.answer, [step.tool_calls for step in run.steps])
