"""``agent-memory replay --budget N``: the real runs through the trace memory kernel.

Each run is fed to a :class:`~agent_memory.kernel.manager.MemoryManager` whose model has an input
budget of ``N`` tokens: its first system message becomes the system prompt, each user message a
turn, each tool result a stored result; before every assistant message (an LLM call) the request
is prepared by the :class:`~agent_memory.kernel.assembler.LLMRequestAssembler` as a ``MemoryAgent``
prepares it (compacting when the kernel says so; the memory prompt section in the system prompt
while memory tools are offered), counted (messages and every tool definition: the agent's own and
the memory tools offered) and checked, then the run's real assistant message is committed as the model's answer
(no provider usage: the kernel's own count decides, as it does for a provider that reports none).

Checks per run: no prompt over the budget; the system prompt first in every prompt (followed by
the memory section when it is sent); every turn
accounted for (active or archived, none lost); every tool call answered right after its message.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent_memory.agent.prompt import MEMORY_PROMPT
from agent_memory.config import MemoryConfig
from agent_memory.kernel.assembler import LLMRequestAssembler
from agent_memory.kernel.budget import ModelLimits
from agent_memory.kernel.manager import MemoryManager
from agent_memory.llm.chat import ChatResult, Usage
from agent_memory.memory import AgentMemory
from agent_memory.models.messages import Message, ToolCall
from agent_memory.observers import Compacted, MemoryObserver, NoticeRecorder, Truncated
from agent_memory.presentation.offer import load_toolkit, with_memory_prompt
from agent_memory.replay.loaders import ReplayRun
from agent_memory.tokens import TokenCounter

__all__ = ["KernelRunResult", "OUTPUT_TOKENS", "replay_kernel", "replay_kernel_run"]

OUTPUT_TOKENS = 1_024
"""Output budget of the replayed model (the context window is the budget plus this)."""


@dataclass
class KernelRunResult:
    """What the kernel did with one run."""

    source: str
    run_id: str
    budget: int
    """The input budget of the replayed model, in tokens (see :func:`replay_kernel_run`)."""
    calls: int = 0
    compactions: int = 0
    truncations: int = 0
    turns: int = 0
    largest_prompt: int = 0
    """Largest prompt, net of nothing: messages and every tool definition, in tokens."""
    prompt_tokens: int = 0
    """Σ prompt tokens over the calls (messages and tools)."""
    tool_tokens: int = 0
    """Σ tokens of the tool definitions sent."""
    failures: list[str] = field(default_factory=list)
    """What a check found (empty: every check held)."""



def _pairs_intact(messages: Sequence[Message]) -> bool:
    for i, message in enumerate(messages):
        calls = [call.id for call in message.tool_calls]
        if [m.tool_call_id for m in messages[i + 1 : i + 1 + len(calls)]] != calls:
            return False
        if message.role == "tool" and not any(
            call.id == message.tool_call_id for m in messages[:i] for call in m.tool_calls
        ):
            return False
    return True


def replay_kernel_run(run: ReplayRun, *, budget: int, workdir: Path, counter: TokenCounter | None = None,
                      observers: Sequence[MemoryObserver] = ()) -> KernelRunResult:
    """Replay one run through the kernel with ``budget`` tokens for its conversation.

    The model's input budget is the run's fixed parts (the system prompt, the agent's tool
    definitions and every memory tool that may be offered: sent with every call; the task, the
    first user message: kept verbatim) plus ``budget``, and the thresholds apply to the
    conversation beyond the fixed parts: the soft one at 60% of ``budget``, compaction at 80%, a
    compaction brings it back to 50% (the kernel's default ratios, set per agent through
    :class:`~agent_memory.kernel.budget.ModelLimits`). So one ``budget`` forces compaction in
    sources whose fixed parts differ tenfold (tau-bench's tools alone are 2.4k tokens).

    ``observers`` hear the kernel's notices (compactions, truncations...). A replay is a
    measurement: its truncations are counted in the result (:attr:`KernelRunResult.truncations`,
    a figure of the report), so they are logged at DEBUG, not as the WARNING a live agent's
    memory logs (observers still hear every one)."""
    messages = list(run.messages)
    system = messages[0].content if messages and messages[0].role == "system" else None
    memory = AgentMemory("kernel", workdir / "memory", config=MemoryConfig(index_on_store=False), token_counter=counter)
    recorder = NoticeRecorder()
    probe = MemoryManager(memory, system_prompt=None)
    task = next((m for m in messages if m.role == "user"), None)
    every_definition = [*run.tool_definitions, *load_toolkit(memory, manager=probe).tool_definitions()]
    head = with_memory_prompt([messages[0]] if system else [], MEMORY_PROMPT)  # as the agent sends it
    fixed = probe.count_tokens([*head, *([task] if task is not None else [])], every_definition)
    total = fixed + budget
    result = KernelRunResult(source=run.source, run_id=run.run_id, budget=total)
    limits = ModelLimits(
        max_context_tokens=total + OUTPUT_TOKENS, max_output_tokens=OUTPUT_TOKENS, safety_margin_tokens=0,
        target_ratio=(fixed + 0.5 * budget) / total, soft_ratio=(fixed + 0.6 * budget) / total,
        compaction_ratio=(fixed + 0.8 * budget) / total,
    )
    manager = MemoryManager(memory, system_prompt=system, limits=limits, observers=[recorder, *observers])
    manager.observers.log_at(Truncated, logging.DEBUG)  # a figure of the report, not a warning per run
    toolkit = load_toolkit(memory, manager=manager)
    assembler = LLMRequestAssembler(manager, toolkit=toolkit, tool_definitions=run.tool_definitions, memory_prompt=MEMORY_PROMPT)
    calls = set(run.calls)
    started = 0
    for index, message in enumerate(messages):
        if index == 0 and system is not None:
            continue
        if index in calls:
            package = assembler.prepare_request()
            result.calls += 1
            result.largest_prompt = max(result.largest_prompt, package.estimate_tokens)
            result.prompt_tokens += package.estimate_tokens
            result.tool_tokens += manager.count_tokens([], package.tool_definitions)
            if package.estimate_tokens > manager.budget.input_budget:
                result.failures.append(f"call {result.calls}: {package.estimate_tokens:,} tokens over the budget")
            if system and (package.messages[0].role != "system" or not (package.messages[0].content or "").startswith(system)):
                result.failures.append(f"call {result.calls}: the system prompt is not first")
            if not _pairs_intact(package.messages):
                result.failures.append(f"call {result.calls}: a tool call without its result")
            answer = message.model_copy(update={"id": None, "ts": None, "turn_id": None, "seq": None})
            assembler.commit(package, ChatResult(message=answer, usage=Usage(), finish_reason=None, model=None))
        elif message.role == "user":
            manager.ingest_user_message(message.content or "")
            started += 1
        elif message.role == "tool":
            call_id = message.tool_call_id or f"call_{index}"
            if call_id not in manager.pending_tool_calls:  # an observation without a structured call
                manager.ingest_tool_intent([ToolCall(id=call_id, name=message.name or "tool")])
            manager.ingest_tool_result(call_id, message.content or "", name=message.name)
        elif message.role == "system":
            manager.ingest_user_message(message.content or "")
            started += 1
    result.compactions = len(recorder.of_type(Compacted))
    result.truncations = len(recorder.of_type(Truncated))
    result.turns = len(manager.traces.turn_ids())
    if result.turns < started:
        result.failures.append(f"{started - result.turns} turn(s) lost")
    return result


def replay_kernel(
    runs: Sequence[ReplayRun],
    *,
    budget: int,
    counter: TokenCounter | None = None,
    on_run: Callable[[KernelRunResult], None] | None = None,
) -> list[KernelRunResult]:
    """Replay every run through the kernel (one after another), in a temporary directory."""
    results = []
    with tempfile.TemporaryDirectory(prefix="agent-memory-kernel-") as tmp:
        for n, run in enumerate(runs):
            result = replay_kernel_run(run, budget=budget, workdir=Path(tmp) / f"run{n}", counter=counter)
            results.append(result)
            if on_run is not None:
                on_run(result)
    return results
