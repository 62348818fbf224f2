"""Peers: the tool-result clearing a user would otherwise turn on, replayed beside agent-memory.

Each peer builds, for every LLM call of a run, the messages it would send, from the same history
as ``naive`` (every message before the call, results in full); the engine counts them net and
gross and prices them like every other strategy. The agent's own tools go with every call
unchanged (no peer touches them). Four peers ship (:data:`DEFAULT_PEERS`):

- :class:`LangChainClearToolUses`: LangChain v1's ``ContextEditingMiddleware`` with its default
  edit, ``ClearToolUsesEdit()`` (trigger 100,000 tokens by LangChain's approximate count of the
  messages, keep the 3 newest tool results, placeholder ``[cleared]``), run from the installed
  ``langchain`` package: its own ``wrap_model_call`` edits a copy of the history before each
  model call, as in an agent built with ``create_agent``.
- :class:`LangChainSummarization`: LangChain's ``SummarizationMiddleware``, run from the package
  (its own ``before_model``: trigger, cut-off that keeps tool calls with their results, trimming
  of what is summarized, the summary message), with agent-memory's extractive summary
  (:func:`~agent_memory.transforms.extractive_summary`) standing in for the summary model
  through the middleware's ``summarizer`` hook. At its defaults (``trigger=None``) the middleware
  never summarizes, so it runs at the trigger of LangChain's own documentation example,
  ``("tokens", 4000)``, and the default ``keep=("messages", 20)``. Its edits persist: the summary
  replaces the history in the agent's state, and later calls build on it.
- :class:`OpenAIAgentsTrimmer`: the OpenAI Agents SDK's ``ToolOutputTrimmer``
  (``agents.extensions``, a ``call_model_input_filter``) at its defaults (the last 2 user turns
  untouched; older outputs over 500 characters replaced by a 200-character preview), run from the
  installed ``openai-agents`` package on the Responses input items of
  :class:`~agent_memory.llm.renderers.OpenAIResponsesRenderer`.
- :class:`AnthropicClearToolUses`: Anthropic's server-side ``clear_tool_uses_20250919`` context
  edit. The server is not reachable: this is a **re-implementation** of its documented semantics
  (platform.claude.com, "Context editing"; configured with the SDK's own
  ``BetaClearToolUses20250919EditParam``), at the defaults (trigger 100,000 input tokens, keep 3
  tool uses, no ``clear_at_least``, no ``exclude_tools``, ``clear_tool_inputs`` false) and, as a
  second strategy, with the trigger lowered to 5,000 input tokens so that it fires on traces
  whose prompts never reach 100,000 tokens.

Text-action traces (SWE-agent without function calling, ReAct) have tool results whose call is
only text in the assistant message. For the LangChain peers each such result is given a tool
call on the assistant message before it (its tool name and id, empty arguments), as a
tool-calling agent would have sent: LangChain clears and cuts only results it can pair with a
call. The call is added on LangChain's side only; what is counted is the trace's messages with
the peer's edits.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from agent_memory.errors import AgentMemoryError, ConfigurationError
from agent_memory.kernel.summarizer import DEFAULT_SUMMARY_MAX_TOKENS
from agent_memory.llm.renderers import OpenAIResponsesRenderer
from agent_memory.models.messages import Message, ToolCall
from agent_memory.prompt_tokens import message_tokens, tool_tokens
from agent_memory.tokens import TokenCounter
from agent_memory.transforms import extractive_summary

if TYPE_CHECKING:
    from anthropic.types.beta import BetaClearToolUses20250919EditParam
    from langchain_core.messages import AnyMessage, BaseMessage

__all__ = [
    "ANTHROPIC_PLACEHOLDER",
    "DEFAULT_PEERS",
    "AnthropicClearToolUses",
    "LangChainClearToolUses",
    "LangChainSummarization",
    "OpenAIAgentsTrimmer",
    "PeerStrategy",
    "anthropic_clear_tool_uses",
    "installed_peers",
    "parse_peer",
]

ANTHROPIC_PLACEHOLDER = "[cleared]"
"""What the Anthropic re-implementation puts in place of a cleared result. Anthropic documents
only that "each cleared result is replaced with placeholder text"; this is LangChain's mirror's
text, a few tokens like any short placeholder."""

ANTHROPIC_DEFAULT_TRIGGER_TOKENS = 100_000
"""``clear_tool_uses_20250919``'s documented default trigger, in input tokens."""

ANTHROPIC_DEFAULT_KEEP = 3
"""``clear_tool_uses_20250919``'s documented default ``keep``, in tool uses."""

ANTHROPIC_LOW_TRIGGER_TOKENS = 5_000
"""The trigger of the second Anthropic strategy, in input tokens: under the largest prompt of the
median run on tau-bench (6.3k) and SWE-agent (6.8k), so that clearing fires there (no prompt of
those traces reaches the default 100,000, nor the 30,000 of Anthropic's own configuration example)."""

LANGCHAIN_SUMMARY_TRIGGER_TOKENS = 4_000
"""The trigger of :class:`LangChainSummarization`: LangChain's documentation example
(``SummarizationMiddleware(model=..., trigger=("tokens", 4000), keep=("messages", 20))``)."""

Prompts = Iterator[list[Message]]
"""One prompt (the messages sent) per LLM call, in call order."""


@runtime_checkable
class PeerStrategy(Protocol):
    """A peer's context editing, replayed call by call.

    ``label`` names it in reports; ``description`` says what it is and at what settings;
    ``package`` is the distribution whose code runs (``None``: a re-implementation);
    ``module`` is what must be importable for it to run.
    """

    @property
    def label(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def package(self) -> str | None: ...

    @property
    def module(self) -> str | None: ...

    def prompts(self, messages: Sequence[Message], calls: Sequence[int], *,
                tool_definitions: Sequence[dict[str, Any]], counter: TokenCounter) -> Prompts:
        """The messages the peer sends for each call: for ``call`` in ``calls`` (oldest first),
        an edit of ``messages[:call]`` (every message before the assistant message the call
        produced, results in full). ``tool_definitions``: the agent's own tool definitions sent with every
        call (OpenAI JSON); ``counter``: the token counter of the replay.

        ``messages`` and ``calls`` are lists the replay extends between two prompts (the run's
        next messages, and, when it prices a lost value as a tool re-run, the re-run call and its
        results, which the original run never had): read ``messages[:call]`` only when ``call``
        comes, and iterate ``calls`` itself. Messages already read never change.

        Raises:
            ConfigurationError: if the peer's package is not installed.
        """
        ...


def _require(module: str, package: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise ConfigurationError(f"the {package} peer needs {package}: pip install 'agent-memory[bench]'")


def _memo(counter: TokenCounter) -> Callable[[str], int]:
    cache: dict[str, int] = {}

    def count(text: str) -> int:
        found = cache.get(text)
        if found is None:
            found = cache[text] = counter.count(text)
        return found

    return count


def _at(settings: dict[str, Any], defaults: dict[str, str]) -> str:
    """``at <settings>, the rest at its defaults (<defaults not set>)`` for a peer's description;
    ``defaults``: per setting, its default in words."""
    rest = ", ".join(text for key, text in defaults.items() if key not in settings)
    if not settings:
        return f"at its defaults ({rest})"
    shown = ", ".join(f"{k}={json.dumps(v)}" for k, v in settings.items())
    return f"at {shown}, the rest at its defaults ({rest})" if rest else f"at {shown}"


def _leading_system(messages: Sequence[Message]) -> int:
    lead = 0
    while lead < len(messages) and messages[lead].role == "system":
        lead += 1
    return lead


# -- LangChain ----------------------------------------------------------------------------------
def _langchain_messages(messages: Sequence[Message]) -> list[BaseMessage]:
    """LangChain messages, index for index. A tool result whose call the assistant message before
    it does not carry (a text action) gets a call there (its name and id, empty arguments)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    added: dict[int, list[dict[str, Any]]] = {}
    last_assistant: int | None = None
    for n, message in enumerate(messages):
        if message.role == "assistant":
            last_assistant = n
        elif message.role == "tool" and last_assistant is not None:
            owner = messages[last_assistant]
            known = {c.id for c in owner.tool_calls} | {c["id"] for c in added.get(last_assistant, [])}
            if message.tool_call_id not in known:
                added.setdefault(last_assistant, []).append(
                    {"name": message.name or "tool", "args": {}, "id": message.tool_call_id, "type": "tool_call"})
    out: list[BaseMessage] = []
    for n, message in enumerate(messages):
        text = message.content or ""
        if message.role == "system":
            out.append(SystemMessage(content=text))
        elif message.role == "user":
            out.append(HumanMessage(content=text))
        elif message.role == "assistant":
            calls = [{"name": c.name, "args": dict(c.input or {}), "id": c.id, "type": "tool_call"}
                     for c in message.tool_calls] + added.get(n, [])
            out.append(AIMessage(content=text, tool_calls=calls))
        else:
            out.append(ToolMessage(content=text, tool_call_id=message.tool_call_id or "", name=message.name))
    return out


class _Converted:
    """:func:`_langchain_messages` of a history that grows, converted as far as asked, in the
    stretches between LLM calls (a stretch starts at an assistant message and holds its results,
    so that a text action's result finds its call); a message, once converted, is the same
    object from then on (the edits are mapped back by identity)."""

    def __init__(self, messages: Sequence[Message]) -> None:
        self.messages = messages
        self.out: list[BaseMessage] = []

    def upto(self, end: int) -> list[BaseMessage]:
        """The LangChain messages of ``messages[:end]``."""
        if end > len(self.out):
            self.out += _langchain_messages(self.messages[len(self.out):end])
        return self.out


def _edited(original: Message, before: BaseMessage, after: BaseMessage) -> Message:
    """``original`` with what a LangChain edit changed between ``before`` and ``after``: a tool
    result's text, an assistant's call arguments."""
    from langchain_core.messages import AIMessage

    if after is before:
        return original
    if original.role == "tool" and after.content != before.content:
        text = after.content if isinstance(after.content, str) else json.dumps(after.content, ensure_ascii=False)
        return original.model_copy(update={"content": text})
    if original.role == "assistant" and isinstance(after, AIMessage) and isinstance(before, AIMessage):
        args = {c["id"]: c["args"] for c in after.tool_calls}
        if args != {c["id"]: c["args"] for c in before.tool_calls}:
            calls = tuple(ToolCall(id=c.id, name=c.name, arguments=json.dumps(args[c.id], ensure_ascii=False))
                          if c.id in args and args[c.id] != (c.input or {}) else c for c in original.tool_calls)
            return original.model_copy(update={"tool_calls": calls})
    return original


def _replay_model() -> Any:
    """A LangChain chat model standing for the agent's model where a middleware needs one for its
    type and profile; it is never called (calling it raises :class:`AgentMemoryError`)."""
    from langchain_core.language_models import BaseChatModel

    class ReplayChatModel(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "agent-memory-replay"

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
            raise AgentMemoryError("the replay's stand-in model is never called: a peer asked it to answer")

    return ReplayChatModel()


@dataclass(frozen=True)
class LangChainClearToolUses:
    """LangChain v1 ``ContextEditingMiddleware(edits=[ClearToolUsesEdit(...)])``, from the package.

    Before every call the middleware's own ``wrap_model_call`` edits a copy of the history (the
    messages after the leading system prompt; the system prompt goes as the request's
    ``system_message``) and hands the edited request to the model; the replay takes that
    request's messages. Edits are not kept: each call starts from the full history. Tokens are
    counted the middleware's default way (``token_count_method="approximate"``: LangChain's
    ``count_tokens_approximately`` of the messages, about 4 characters a token, system prompt and
    tools not included).

    ``None`` fields take ``ClearToolUsesEdit``'s own defaults (trigger 100,000, keep 3,
    clear_at_least 0, clear_tool_inputs false, no excluded tools, placeholder ``[cleared]``).
    """

    trigger: int | None = None
    """Tokens (LangChain's approximate count) above which results are cleared; ``None``: default."""
    keep: int | None = None
    """Newest tool results kept; ``None``: default (3)."""
    clear_at_least: int | None = None
    """Tokens to reclaim before stopping (0: clear every older result); ``None``: default (0)."""
    exclude_tools: tuple[str, ...] | None = None
    """Tools whose results are never cleared; ``None``: default (none)."""
    label: str = "langchain_clear_tool_uses"
    package: str | None = "langchain"
    module: str | None = "langchain.agents.middleware"

    @property
    def description(self) -> str:
        defaults = {"trigger": "trigger 100,000 tokens by LangChain's approximate count of the messages",
                    "keep": "keep 3 tool results", "clear_at_least": "clear_at_least 0",
                    "exclude_tools": "no excluded tools", "placeholder": "placeholder `[cleared]`"}
        return (f"LangChain v1 `ContextEditingMiddleware` + `ClearToolUsesEdit` {_at(self._settings(), defaults)}, "
                "run from the `langchain` package; edits a copy of the history before each call")

    def _settings(self) -> dict[str, Any]:
        values = {"trigger": self.trigger, "keep": self.keep, "clear_at_least": self.clear_at_least,
                  "exclude_tools": self.exclude_tools}
        return {k: v for k, v in values.items() if v is not None}

    def prompts(self, messages: Sequence[Message], calls: Sequence[int], *,
                tool_definitions: Sequence[dict[str, Any]], counter: TokenCounter) -> Prompts:
        _require("langchain", "langchain")
        from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
        from langchain.agents.middleware.types import ModelRequest, ModelResponse
        from langchain_core.messages import AIMessage, SystemMessage

        middleware = ContextEditingMiddleware[Any, Any](edits=[ClearToolUsesEdit(**self._settings())])
        model = _replay_model()
        converted = _Converted(messages)
        lead = _leading_system(messages)
        system = SystemMessage(content="\n\n".join(m.content or "" for m in messages[:lead])) if lead else None
        sent: list[list[AnyMessage]] = []

        def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
            sent.append(list(request.messages))
            return ModelResponse(result=[AIMessage(content="")])

        for call in calls:
            before = cast("list[AnyMessage]", converted.upto(call)[lead:call])
            request: ModelRequest[Any] = ModelRequest(model=model, messages=before, system_message=system,
                                                      tools=list(tool_definitions))
            middleware.wrap_model_call(request, handler)
            after = sent.pop()
            if len(after) != len(before):
                raise AgentMemoryError("ClearToolUsesEdit changed the number of messages; the replay cannot map them")
            yield list(messages[:lead]) + [_edited(m, b, a) for m, b, a in zip(messages[lead:call], before, after)]


@dataclass(frozen=True)
class LangChainSummarization:
    """LangChain v1 ``SummarizationMiddleware``, from the package, with agent-memory's extractive
    summary as its ``summarizer`` (the middleware's hook for summaries not written by a chat model).

    The agent's state holds the messages after the leading system prompt (``create_agent`` sends
    the system prompt apart); before every call the new messages of the trace are appended to
    the state and the middleware's own ``before_model`` runs; when it summarizes, its update
    (remove everything, then the summary message and the kept messages) becomes the state, as
    LangGraph's ``add_messages`` applies it. The prompt of the call is the system prompt and the
    state. Tokens are counted the middleware's default way (``count_tokens_approximately``).
    """

    trigger_tokens: int = LANGCHAIN_SUMMARY_TRIGGER_TOKENS
    """Summarize when the state reaches this many tokens (LangChain's approximate count)."""
    keep_messages: int = 20
    """Newest messages kept after a summary (the middleware's default ``keep``)."""
    summary_max_tokens: int = DEFAULT_SUMMARY_MAX_TOKENS
    """Most tokens of one extractive summary (the kernel's episodic summary size)."""
    label: str = "langchain_summarization_4k"
    package: str | None = "langchain"
    module: str | None = "langchain.agents.middleware"

    @property
    def description(self) -> str:
        return (f"LangChain v1 `SummarizationMiddleware(trigger=(\"tokens\", {self.trigger_tokens}), "
                f"keep=(\"messages\", {self.keep_messages}))` (the trigger of LangChain's documentation example; at "
                "its default `trigger=None` it never summarizes), run from the `langchain` package, with "
                f"agent-memory's extractive summary (at most {self.summary_max_tokens} tokens) standing in for the "
                "summary model; summaries persist in the agent's state")

    def prompts(self, messages: Sequence[Message], calls: Sequence[int], *,
                tool_definitions: Sequence[dict[str, Any]], counter: TokenCounter) -> Prompts:
        _require("langchain", "langchain")
        from langchain.agents.middleware import SummarizationMiddleware
        from langchain_core.messages import HumanMessage, RemoveMessage, get_buffer_string
        from langgraph.runtime import Runtime

        max_tokens = self.summary_max_tokens

        def summarize(to_summarize: list[AnyMessage]) -> str:
            return extractive_summary(get_buffer_string(to_summarize), max_tokens, counter)

        middleware = SummarizationMiddleware[Any, Any](
            _replay_model(), trigger=("tokens", self.trigger_tokens), keep=("messages", self.keep_messages),
            summarizer=summarize)
        converted = _Converted(messages)
        # by object id; the object is held too, so that no id is reused by a later summary message
        back: dict[int, tuple[BaseMessage, Message]] = {}
        lead = _leading_system(messages)
        state: list[AnyMessage] = []
        seen = lead
        runtime: Runtime[Any] = Runtime()
        for call in calls:
            fresh = converted.upto(call)[seen:call]
            back.update({id(lc): (lc, m) for lc, m in zip(fresh, messages[seen:call])})
            state.extend(cast("list[AnyMessage]", fresh))
            seen = call
            update = middleware.before_model({"messages": state}, runtime)
            if update is not None:
                new = [m for m in update["messages"] if not isinstance(m, RemoveMessage)]
                for message in new:
                    if id(message) not in back and isinstance(message, HumanMessage):
                        back[id(message)] = (message, Message(role="user", content=str(message.content)))
                state = new
            yield list(messages[:lead]) + [back[id(m)][1] for m in state]


# -- OpenAI Agents SDK ---------------------------------------------------------------------------
@dataclass(frozen=True)
class OpenAIAgentsTrimmer:
    """The OpenAI Agents SDK's ``ToolOutputTrimmer`` (``agents.extensions``), from the package.

    Before every call the history is rendered as Responses input items
    (:class:`~agent_memory.llm.renderers.OpenAIResponsesRenderer`, the system prompt as
    ``instructions``) and passed to the trimmer as the SDK's run loop passes it to a
    ``call_model_input_filter``; each ``function_call_output`` it rewrote replaces the text of
    the tool message it came from. Edits are not kept. ``None`` fields take the trimmer's own
    defaults (``recent_turns=2``, ``max_output_chars=500``, ``preview_chars=200``, every tool).
    """

    recent_turns: int | None = None
    """User messages from the end whose turns are never trimmed; ``None``: default (2)."""
    max_output_chars: int | None = None
    """Outputs longer than this (characters) are trimmed; ``None``: default (500)."""
    preview_chars: int | None = None
    """Characters of a trimmed output kept as a preview; ``None``: default (200)."""
    label: str = "openai_agents_trimmer"
    package: str | None = "openai-agents"
    module: str | None = "agents.extensions"

    def _settings(self) -> dict[str, Any]:
        values = {"recent_turns": self.recent_turns, "max_output_chars": self.max_output_chars,
                  "preview_chars": self.preview_chars}
        return {k: v for k, v in values.items() if v is not None}

    @property
    def description(self) -> str:
        defaults = {"recent_turns": "recent_turns 2: the last 2 user turns untouched",
                    "max_output_chars": "older tool outputs over 500 characters trimmed",
                    "preview_chars": "to a 200-character preview"}
        return (f"OpenAI Agents SDK `ToolOutputTrimmer` (a `call_model_input_filter`) {_at(self._settings(), defaults)}, "
                "run from the `openai-agents` package on the Responses input items; it trims only turns before "
                "the last user messages, so never a run with a single user message")

    def prompts(self, messages: Sequence[Message], calls: Sequence[int], *,
                tool_definitions: Sequence[dict[str, Any]], counter: TokenCounter) -> Prompts:
        _require("agents", "openai-agents")
        from agents import Agent
        from agents.extensions import ToolOutputTrimmer
        from agents.items import TResponseInputItem
        from agents.run_config import CallModelData, ModelInputData

        trimmer = ToolOutputTrimmer(**self._settings())
        agent: Agent[Any] = Agent(name="replay")
        renderer = OpenAIResponsesRenderer()
        for call in calls:
            prefix = list(messages[:call])
            payload = renderer.render(prefix)
            items = cast("list[TResponseInputItem]", payload["input"])
            data: CallModelData[Any] = CallModelData(
                model_data=ModelInputData(input=list(items), instructions=payload.get("instructions")),
                agent=agent, context=None)
            trimmed = trimmer(data).input
            if len(trimmed) != len(items):
                raise AgentMemoryError("ToolOutputTrimmer changed the number of items; the replay cannot map them")
            outputs = [cast("dict[str, Any]", item).get("output") for before, item in zip(items, trimmed)
                       if cast("dict[str, Any]", before).get("type") == "function_call_output"]
            results = [n for n, m in enumerate(prefix) if m.role == "tool"]
            for n, output in zip(results, outputs):
                if isinstance(output, str) and output != prefix[n].content:
                    prefix[n] = prefix[n].model_copy(update={"content": output})
            yield prefix


# -- Anthropic (re-implementation) ---------------------------------------------------------------
def _tool_uses(messages: Sequence[Message]) -> list[tuple[int, str, tuple[int, int] | None]]:
    """Every tool use of a prompt, oldest first: (index of its result, tool name, (assistant
    message index, call index) of its ``tool_use`` or ``None`` when the call is only text)."""
    uses = []
    where: dict[str, tuple[int, int]] = {}
    for n, message in enumerate(messages):
        for k, call in enumerate(message.tool_calls):
            where[call.id] = (n, k)
        if message.role == "tool":
            at = where.get(message.tool_call_id or "")
            name = message.name or (messages[at[0]].tool_calls[at[1]].name if at else "") or "tool"
            uses.append((n, name, at))
    return uses


def anthropic_clear_tool_uses(
    messages: Sequence[Message],
    edit: BetaClearToolUses20250919EditParam,
    *,
    tool_definitions: Sequence[dict[str, Any]] = (),
    count: Callable[[str], int],
) -> list[Message]:
    """The prompt Anthropic's ``clear_tool_uses_20250919`` edit would leave, re-implemented from
    its documentation (the server is not reachable).

    - ``trigger`` (default 100,000 ``input_tokens``): the edit runs once the prompt exceeds it:
      its input tokens (``messages`` and ``tool_definitions``, counted with ``count``: 4 framing tokens
      a message + its content, as :mod:`agent_memory.prompt_tokens`) or, for ``tool_uses``, its number of tool uses.
    - ``keep`` (default 3 ``tool_uses``): the newest tool uses stay; every older one's result is
      replaced by :data:`ANTHROPIC_PLACEHOLDER`, oldest first. The documentation does not say
      whether the server stops once under the trigger; as LangChain's mirror does, every older
      use is cleared. Excluded tools count among the kept uses (the documentation is silent).
    - ``exclude_tools`` (default none): those tools' uses are never cleared.
    - ``clear_at_least`` (``input_tokens``, default none): when clearing would free fewer tokens,
      nothing is cleared ("the strategy will not be applied").
    - ``clear_tool_inputs`` (default false; ``true`` or a list of tool names): the cleared uses'
      call arguments become ``{}`` as well.

    Args:
        messages: the prompt, oldest first, tool results in full; a tool result pairs with the
            call of the same id before it, or (a text action) stands alone as one tool use.
        edit: the edit as sent to the API (``{"type": "clear_tool_uses_20250919", ...}``).
        tool_definitions: the tool definitions sent with the prompt (they count toward the trigger).
        count: tokens of a text.

    Returns:
        The edited prompt (``messages`` unchanged when the edit does not run).

    Raises:
        ValueError: for an edit of another type, or a trigger, keep or clear_at_least of an
            unknown type or a negative value.
    """
    if edit.get("type") != "clear_tool_uses_20250919":
        raise ValueError(f"not a clear_tool_uses_20250919 edit: {edit.get('type')!r}")
    trigger = edit.get("trigger") or {"type": "input_tokens", "value": ANTHROPIC_DEFAULT_TRIGGER_TOKENS}
    keep = edit.get("keep") or {"type": "tool_uses", "value": ANTHROPIC_DEFAULT_KEEP}
    at_least = edit.get("clear_at_least")
    if trigger["type"] not in ("input_tokens", "tool_uses") or keep["type"] != "tool_uses" or (
            at_least is not None and at_least["type"] != "input_tokens"):
        raise ValueError("trigger takes input_tokens or tool_uses, keep tool_uses, clear_at_least input_tokens")
    if min(trigger["value"], keep["value"], at_least["value"] if at_least else 0) < 0:
        raise ValueError("trigger, keep and clear_at_least values must not be negative")
    uses = _tool_uses(messages)
    sizes = [message_tokens(m, count) for m in messages]
    size = sum(sizes) + tool_tokens(tool_definitions, count)
    if (size if trigger["type"] == "input_tokens" else len(uses)) <= trigger["value"]:
        return list(messages)
    excluded = set(edit.get("exclude_tools") or ())
    inputs = edit.get("clear_tool_inputs") or False
    out = list(messages)
    older = uses[: max(0, len(uses) - keep["value"])]
    for index, name, at in older:
        if name in excluded:
            continue
        out[index] = out[index].model_copy(update={"content": ANTHROPIC_PLACEHOLDER})
        if at is not None and (inputs is True or (not isinstance(inputs, bool) and name in inputs)):
            owner = out[at[0]]
            calls = list(owner.tool_calls)
            calls[at[1]] = ToolCall(id=calls[at[1]].id, name=calls[at[1]].name, arguments="{}")
            out[at[0]] = owner.model_copy(update={"tool_calls": tuple(calls)})
    freed = sum(sizes) - sum(message_tokens(m, count) for m in out)
    if at_least is not None and freed < at_least["value"]:
        return list(messages)
    return out


def _default_edit() -> BetaClearToolUses20250919EditParam:
    return {"type": "clear_tool_uses_20250919"}


@dataclass(frozen=True)
class AnthropicClearToolUses:
    """Anthropic's ``clear_tool_uses_20250919`` context edit, **re-implemented**
    (:func:`anthropic_clear_tool_uses`): applied server-side to every request from the full
    history the client keeps, so each call starts from the full history."""

    edit: BetaClearToolUses20250919EditParam = field(default_factory=_default_edit)
    """The edit as sent to the API; unset keys take the documented defaults."""
    label: str = "anthropic_clear_tool_uses"
    why: str = ""
    """Why these settings, for the report (empty: none said)."""
    package: str | None = None
    module: str | None = None

    @property
    def description(self) -> str:
        defaults = {"trigger": "trigger 100,000 input tokens", "keep": "keep 3 tool uses",
                    "clear_at_least": "no clear_at_least", "exclude_tools": "no exclude_tools",
                    "clear_tool_inputs": "clear_tool_inputs false"}
        settings = {k: v for k, v in self.edit.items() if k != "type"}
        return (f"Anthropic `clear_tool_uses_20250919` {_at(settings, defaults)}: a **re-implementation** of its "
                "documented semantics (the server is not reachable), placeholder `[cleared]`, input tokens counted "
                "with o200k" + (f"; {self.why}" if self.why else ""))

    def prompts(self, messages: Sequence[Message], calls: Sequence[int], *,
                tool_definitions: Sequence[dict[str, Any]], counter: TokenCounter) -> Prompts:
        count = _memo(counter)
        for call in calls:
            yield anthropic_clear_tool_uses(messages[:call], self.edit, tool_definitions=tool_definitions, count=count)


DEFAULT_PEERS: tuple[PeerStrategy, ...] = (
    LangChainClearToolUses(),
    LangChainSummarization(),
    OpenAIAgentsTrimmer(),
    AnthropicClearToolUses(),
    AnthropicClearToolUses(
        edit={"type": "clear_tool_uses_20250919",
              "trigger": {"type": "input_tokens", "value": ANTHROPIC_LOW_TRIGGER_TOKENS}},
        label="anthropic_clear_tool_uses_5k",
        why="the trigger lowered to 5,000 so that it fires: no prompt of the tau-bench or SWE-agent traces reaches "
            "100,000 input tokens (the largest is 12k), nor the 30,000 of Anthropic's own configuration example"),
)
"""The peers ``agent-memory replay`` runs by default (those whose package is installed)."""


def installed_peers(peers: Sequence[PeerStrategy] = DEFAULT_PEERS) -> tuple[list[PeerStrategy], list[str]]:
    """The peers whose package is installed, and one note per peer left out (why, how to install)."""
    ready, missing = [], []
    for peer in peers:
        if peer.module is None or importlib.util.find_spec(peer.module.split(".")[0]) is not None:
            ready.append(peer)
        else:
            missing.append(f"peer `{peer.label}` not replayed: {peer.package} is not installed "
                           "(pip install 'agent-memory[bench]')")
    return ready, missing


def parse_peer(name: str) -> PeerStrategy:
    """The default peer labelled ``name`` (:data:`DEFAULT_PEERS`).

    Raises:
        ValueError: if no default peer has that label.
    """
    for peer in DEFAULT_PEERS:
        if peer.label == name.strip():
            return peer
    raise ValueError(f"unknown peer {name!r}; use one of {', '.join(p.label for p in DEFAULT_PEERS)}")
