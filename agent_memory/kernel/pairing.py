"""Tool-call pairs, kept intact in every prompt.

Providers refuse a prompt in which an assistant tool call is not followed by its result, or a tool
result answers no call (OpenAI: "tool_call_id ... did not have response messages"; Anthropic: a
``tool_result`` must follow its ``tool_use``). The working context is append-only, so a result that
arrives after the next user message (it keeps its intent's turn, as in AutoByteus) sits after it.
:func:`pair_tool_messages` builds the order providers need, without changing the stored history:

- each assistant message with tool calls is followed at once by the results of its calls, in the
  order of the calls (a result appended later is moved up);
- a call that has no result yet gets a placeholder result that says so (:data:`PENDING_RESULT`);
- a result whose call is not in the messages (its turn was compacted) becomes a short user note
  naming the result's memory id, so nothing is silently lost.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_memory.models.messages import Message

__all__ = ["PENDING_RESULT", "pair_tool_messages"]

PENDING_RESULT = "[no result yet: the tool is still running]"
"""Content of the placeholder result of a call that has not answered yet."""


def _orphan_note(message: Message) -> Message:
    name = message.name or "a tool"
    where = f" ({message.turn_id})" if getattr(message, "turn_id", None) else ""
    if message.tool_result_ref:
        body = f'retrieve_memory(id="{message.tool_result_ref}")'
    else:
        body = (message.content or "")[:2_000]
    return Message(role="user", content=f"[Late result of {name}{where}, call {message.tool_call_id}: {body}]")


def pair_tool_messages(messages: Sequence[Message]) -> list[Message]:
    """``messages`` reordered so that every tool call is followed by its result (see the module
    docstring). Messages without tool calls or results keep their order."""
    calls = {call.id for m in messages if m.role == "assistant" for call in m.tool_calls}
    results: dict[str, Message] = {}
    for message in messages:
        if message.role == "tool" and message.tool_call_id in calls:
            results.setdefault(message.tool_call_id or "", message)
    out: list[Message] = []
    for message in messages:
        if message.role == "tool":
            if message.tool_call_id not in calls:
                out.append(_orphan_note(message))
            continue  # placed after its call below
        out.append(message)
        if message.role == "assistant":
            for call in message.tool_calls:
                result = results.get(call.id)
                if result is None:
                    result = Message(role="tool", tool_call_id=call.id, name=call.name, content=PENDING_RESULT)
                out.append(result)
    return out
