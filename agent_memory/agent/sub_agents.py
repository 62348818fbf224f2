"""Sub-agents: a parent hands a task to a child agent and gets one result back (memory snapshots for
sub-agents, MemberJunction's ``ShareMemoryWithSubAgents``, github.com/MemberJunction/MJ).

Inheritance is declarative: the parent says what the child gets, and nothing else leaks:

- **memory** (:data:`~agent_memory.agent.config.MemoryMode`): ``shared``, the parent's memory
  itself (the child's stored results are the parent's); ``isolated``, a fork
  (:mod:`agent_memory.fork`: the parent's items as of the spawn, read in place, no copy and no
  re-embedding; the child's writes go to its own directory and the parent takes the ones it wants
  with :func:`merge`); ``none``, an empty memory of its own.
- **pinned facts**: kept verbatim in the child's every prompt, through its compactions.
- **history**: the parent's last N turns, rendered as context in the child's task message.
- **tools**: the parent's tools, or the ones named (``tool_names``).

The child's conversation lives under its own agent id in the parent's backend (for files
``<memory_dir>/agents/<child id>/``), also when it shares the parent's memory. An isolated child's
fork is a document of the child in the backend (``fork.json`` in its directory, or a row):
any process that opens ``AgentMemory(child_id, backend=...)`` gets the same isolated view, so a
child can run in another process, or on another machine with the Postgres backend.

**A child's id is new.** It is checked (:func:`~agent_memory.ids.validate_agent_id`) before any
path or key is built from it, and claimed in the backend atomically
(:meth:`~agent_memory.storage.contracts.Backend.claim`: one ``mkdir``, never ``exist_ok``, or one
insert) before anything is written, in every memory mode: an id already taken (any agent's, the
parent's included), the parent's own id, or the id of an agent in use beside it (its memory's
agent, its earlier children, the parent of its fork) is refused with
:class:`~agent_memory.errors.InvalidArgumentError`, and nothing is written. Two spawns racing for
one id cannot both take it. A generated id (``<parent>.subNN``, :func:`~agent_memory.ids.sub_agent_id`)
moves on to the next free number instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_memory.agent.config import AgentConfig, MemoryMode
from agent_memory.agent.tools import FunctionTool
from agent_memory.errors import AgentMemoryError, InvalidArgumentError, LLMError, StoreError
from agent_memory.fork import SPAWN_DOCUMENT, MemoryFork, SpawnRecord
from agent_memory.ids import sub_agent_id, validate_agent_id
from agent_memory.kernel.manager import MemoryManager
from agent_memory.kernel.transcript import render_turns
from agent_memory.limits import shorten
from agent_memory.llm.client import LLMClient
from agent_memory.memory import AgentMemory
from agent_memory.models.tool_arguments import read_tool_arguments
from agent_memory.storage.contracts import Backend
from agent_memory.storage import common

__all__ = [
    "MAX_CHILD_ID_ATTEMPTS",
    "MAX_SPAWN_TASK_CHARS",
    "ParentAgent",
    "SPAWN_TOOL_NAME",
    "SpawnArguments",
    "SubAgentResult",
    "child_memory",
    "claim_child_id",
    "merge",
    "spawn",
]

SPAWN_TOOL_NAME = "spawn_agent"
"""The model-facing tool that spawns a sub-agent (offered with ``AgentConfig(allow_sub_agents=True)``)."""

MAX_SPAWN_TASK_CHARS = 4_000
"""Longest task a model may hand a sub-agent, in characters."""

MAX_CHILD_ID_ATTEMPTS = 1_000
"""Generated child ids (``<parent>.subNN``) tried at most before a spawn gives up: each taken one
is an existing directory."""


class SubAgentResult(BaseModel):
    """The one result a sub-agent returns to its parent."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    """The child's id (its directory under ``<memory_dir>/agents/``)."""
    task: str
    memory_mode: MemoryMode
    answer: str | None
    """The child's final answer; ``None`` if it stopped at its step limit."""
    stopped: Literal["answer", "max_steps"]
    steps: int
    """LLM calls the child made."""
    prompt_tokens: tuple[int | None, ...]
    """The reported prompt size of each of its calls."""
    item_ids: tuple[str, ...]
    """Items the child stored (its tool results and notes): in the parent's memory when shared,
    in the child's own layer otherwise (see :func:`merge`)."""


class FinishedRun(Protocol):
    """What a spawn reads of its child's run (a :class:`~agent_memory.agent.loop.AgentRun`)."""

    @property
    def answer(self) -> str | None: ...

    @property
    def stopped(self) -> Literal["answer", "max_steps"]: ...

    @property
    def steps(self) -> Sequence[Any]: ...

    @property
    def prompt_tokens(self) -> list[int | None]: ...


class ParentAgent(Protocol):
    """What a spawn reads of the agent that spawns (a :class:`~agent_memory.agent.loop.MemoryAgent`),
    and what it runs as the child: an agent of the parent's own class, built with the same
    arguments as ``MemoryAgent``."""

    agent_id: str
    model: Any
    config: AgentConfig
    system_prompt: str | None
    tools: dict[str, FunctionTool]
    memory: AgentMemory
    manager: MemoryManager
    compaction_llm: LLMClient | None
    children: list[SubAgentResult]

    def run(self, task: str, *, max_steps: int | None = None) -> FinishedRun: ...

    def spawn(self, task: str, *, memory: MemoryMode | None = None, **options: Any) -> SubAgentResult: ...

    def merge(self, result: SubAgentResult, item_ids: Iterable[str] | None = None) -> list[str]: ...

    def close(self) -> None: ...


class SpawnArguments(BaseModel):
    """Arguments of the ``spawn_agent`` tool."""

    model_config = ConfigDict(extra="forbid")

    task: str = Field(min_length=1, max_length=MAX_SPAWN_TASK_CHARS, description="what the sub-agent must do, self-contained")
    memory: MemoryMode = Field(default="isolated", description="shared: your memory; isolated: a copy it cannot change; none: empty")


def spawn_tool_schema() -> dict[str, Any]:
    """The ``spawn_agent`` tool definition (OpenAI format)."""
    schema = SpawnArguments.model_json_schema()
    for value in schema.get("properties", {}).values():
        value.pop("title", None)
    schema.pop("title", None)
    return {"type": "function", "function": {
        "name": SPAWN_TOOL_NAME,
        "description": ("Delegate a self-contained task to a sub-agent with your tools; returns its answer. With "
                        "memory='isolated' what it stores is merged into your memory."),
        "parameters": schema,
    }}


def _ids_in_use(parent: ParentAgent) -> set[str]:
    """Agent ids a child may not take even when they have no directory (yet): the parent's own
    names, its earlier children, the agent its memory is a fork of."""
    used = {parent.agent_id, parent.memory.agent_id, parent.manager.agent_id}
    used.update(result.agent_id for result in parent.children)
    fork = parent.memory.fork
    if fork is not None:
        used.add(fork.parent_agent_id)
    return used


def _claim_child(parent: ParentAgent, agent_id: str | None) -> str:
    """A new id for the child, claimed in the parent's backend by this call (see the module
    docstring).

    Raises:
        InvalidIdError: if ``agent_id`` is malformed.
        InvalidArgumentError: if ``agent_id`` is taken.
        StoreError: if no id can be claimed.
    """
    return claim_child_id(parent.memory.backend, parent.agent_id, in_use=_ids_in_use(parent), agent_id=agent_id,
                          first=len(parent.children) + 1)


def claim_child_id(backend: Backend, parent_id: str, *, in_use: set[str], agent_id: str | None = None,
                   first: int = 1) -> str:
    """A new sub-agent id claimed in ``backend`` by this call: ``agent_id`` when given and free,
    else ``<parent_id>.subNN``, the first number from ``first`` on that is neither in ``in_use``
    nor taken in the backend.

    Raises:
        InvalidIdError: if ``agent_id`` is malformed.
        InvalidArgumentError: if ``agent_id`` is taken.
        StoreError: if no id can be claimed.
    """
    if agent_id is not None:
        child_id = validate_agent_id(agent_id)  # before any path or key is built from it
        if child_id in in_use or not backend.claim(child_id):
            raise InvalidArgumentError(
                f"agent id {child_id!r} is taken (the parent, an agent in use or an agent stored in "
                f"{backend.url}): a sub-agent needs a new id; pass another, or none for a generated one")
        return child_id
    for n in range(first, first + MAX_CHILD_ID_ATTEMPTS):
        child_id = sub_agent_id(parent_id, n)
        if child_id not in in_use and backend.claim(child_id):
            return child_id
    raise StoreError(f"no free sub-agent id after {MAX_CHILD_ID_ATTEMPTS} tries in {backend.url}")


def child_memory(base: AgentMemory, mode: MemoryMode, child_id: str, *, parent_id: str | None = None,
                 task: str = "") -> AgentMemory | None:
    """The memory of a child whose id ``child_id`` is claimed: ``None`` for ``shared`` (the child
    uses ``base`` itself); for ``isolated`` a fork of ``base`` as of now (no copy, no re-embedding),
    for ``none`` an empty memory, each a new :class:`AgentMemory` the caller closes.

    First it saves the child's spawn document (:class:`~agent_memory.fork.SpawnRecord`: its parent
    ``parent_id``, ``None``: ``base``'s agent; its scope; ``task``, cut to 500 characters), which
    the inspector reads to show every sub-agent with its parent and scope."""
    record = SpawnRecord(parent_agent_id=parent_id or base.agent_id, memory_mode=mode, task=shorten(task, 500),
                         memory_agent_id=base.agent_id if mode == "shared" else child_id)
    common.document(base.backend, child_id, SPAWN_DOCUMENT).put(record.model_dump_json().encode("utf-8"))
    if mode == "shared":
        return None
    if mode == "isolated":
        MemoryFork.of(base).save_for(base.backend, child_id)
    return AgentMemory(child_id, backend=base.backend, config=base.config)


def spawn(
    parent: ParentAgent,
    task: str,
    *,
    memory: MemoryMode | None = None,
    tool_names: Sequence[str] | None = None,
    pinned_facts: Sequence[str] = (),
    history_turns: int = 0,
    system_prompt: str | None = None,
    max_steps: int | None = None,
    model: Any = None,
    agent_id: str | None = None,
) -> SubAgentResult:
    """Run a child agent on ``task`` in this process and return its result.

    Args:
        parent: the spawning agent.
        task: the child's task (its first user message).
        memory: ``shared``, ``isolated`` or ``none``; ``None``: shared when the parent's
            ``config.share_memory_with_sub_agents``, else isolated.
        tool_names: names of the parent's tools the child gets; ``None``: all of them.
        pinned_facts: facts kept verbatim in every prompt of the child.
        history_turns: the parent's last N turns given to the child as context (0: none).
        system_prompt: the child's instructions; ``None``: the parent's.
        max_steps: the child's step limit; ``None``: the parent's ``config.max_steps``.
        model: the child's chat model; ``None``: the parent's.
        agent_id: the child's id, a new one (see the module docstring); ``None``: ``<parent>.subNN``,
            the first number free (:func:`~agent_memory.ids.sub_agent_id`).

    Raises:
        InvalidArgumentError: for an unknown memory mode or tool name, a negative history, or an
            ``agent_id`` that is taken (nothing is written then).
        InvalidIdError: for a malformed ``agent_id`` (nothing is written).
        LLMError: if the child's LLM calls fail.
        AgentMemoryError: any other failure of the child's run (its directory keeps what it did).
    """
    mode = memory or ("shared" if parent.config.share_memory_with_sub_agents else "isolated")
    if mode not in ("shared", "isolated", "none"):
        raise InvalidArgumentError(f"memory must be 'shared', 'isolated' or 'none', not {mode!r}")
    if not isinstance(history_turns, int) or history_turns < 0:
        raise InvalidArgumentError(f"history_turns must be an int >= 0, not {history_turns!r}")
    names = list(parent.tools) if tool_names is None else list(tool_names)
    unknown = [name for name in names if name not in parent.tools]
    if unknown:
        raise InvalidArgumentError(f"the parent has no tools {unknown}; it has {list(parent.tools)}")
    base = parent.memory
    text = task
    if history_turns:
        turn_ids = parent.manager.traces.active_turn_ids()[-history_turns:]
        history = render_turns(parent.manager.traces.list_raw(turn_ids))
        text = f"Context from the agent that gave you this task (its last turns):\n{history}\n\nYour task: {task}"
    child_id = _claim_child(parent, agent_id)  # the first write: nothing is written before it
    own_memory: AgentMemory | None = None  # the child's memory when it is not the parent's
    try:
        own_memory = child_memory(base, mode, child_id, parent_id=parent.manager.agent_id, task=task)
        agent_class: Callable[..., ParentAgent] = type(parent)  # the child is an agent like its parent
        child = agent_class(
            model or parent.model, tools=[parent.tools[name] for name in names],
            system_prompt=system_prompt if system_prompt is not None else parent.system_prompt,
            memory=own_memory if own_memory is not None else base,
            config=parent.config.model_copy(update={"allow_sub_agents": False}),
            limits=parent.manager.budget.limits, compaction_llm=parent.compaction_llm,
            conversation_id=child_id if own_memory is None else None, name=child_id,
        )
        try:
            for fact in pinned_facts:
                child.manager.pin_fact(fact)
        except BaseException:
            child.close()
            raise
    except BaseException:
        if own_memory is not None:
            own_memory.close()
        base.backend.release_claim(child_id)  # what this call wrote: the id is free again
        raise
    before = {record.id for record in base.records()} if own_memory is None else set()
    try:
        run = child.run(text, max_steps=max_steps)
        if own_memory is None:
            stored = tuple(record.id for record in base.records() if record.id not in before)
        else:
            stored = tuple(record.id for record in own_memory.own_records())
    finally:
        child.close()
        if own_memory is not None:
            own_memory.close()
    return SubAgentResult(agent_id=child_id, task=task, memory_mode=mode, answer=run.answer, stopped=run.stopped,
                          steps=len(run.steps), prompt_tokens=tuple(run.prompt_tokens), item_ids=stored)


def merge(parent: ParentAgent, result: SubAgentResult, item_ids: Iterable[str] | None = None) -> list[str]:
    """Copy items an isolated (or memory-less) child stored into the parent's memory.

    Each copy keeps the item's type, source, title, tags and media type, and records where it came
    from (``extra["merged_from"]``); it is embedded once, here (the child's own items were never
    in the parent's index). A shared child's items are the parent's already: nothing to copy.

    Args:
        parent: the agent that spawned the child.
        result: the child's result.
        item_ids: which of ``result.item_ids`` to take; ``None``: all.

    Returns:
        The new ids in the parent's memory, in order (``[]`` for a shared child).

    Raises:
        InvalidArgumentError: if an id is not one the child stored.
    """
    if result.memory_mode == "shared":
        return []
    chosen = list(result.item_ids if item_ids is None else item_ids)
    foreign = [item_id for item_id in chosen if item_id not in result.item_ids]
    if foreign:
        raise InvalidArgumentError(f"{foreign} were not stored by sub-agent {result.agent_id}")
    if not chosen:
        return []
    with AgentMemory(result.agent_id, backend=parent.memory.backend, config=parent.memory.config) as child:
        entries = []
        for item_id in chosen:
            item = child.get(item_id)
            meta = item.metadata
            entries.append({
                "content": item.content, "type": item.type, "source": meta.source, "title": meta.title,
                "tags": meta.tags, "media_type": meta.media_type,
                "extra": {**(meta.extra or {}), "merged_from": f"{result.agent_id}/{item_id}"},
            })
    return parent.memory.store_many(entries)


def run_spawn_call(parent: ParentAgent, arguments: Any) -> tuple[str, bool]:
    """Run a model's ``spawn_agent`` call: the text to send back and whether it succeeded.

    Never raises for what a model's call can cause: wrong arguments, a child whose LLM fails, or
    any other :class:`~agent_memory.errors.AgentMemoryError` of the spawn or the merge (a child
    directory that cannot be made, a memory that fails) become the text the model reads."""
    try:
        args = SpawnArguments.model_validate(read_tool_arguments(arguments, what=f"the arguments of {SPAWN_TOOL_NAME}"))
    except InvalidArgumentError as exc:  # not a JSON object of valid text and finite numbers
        return str(exc), False
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)[:3])
        return f"wrong arguments for {SPAWN_TOOL_NAME} ({shorten(problems, 300)}); it takes task and memory.", False
    try:
        result = parent.spawn(args.task, memory=args.memory)
    except LLMError as exc:
        return f"the sub-agent failed: {shorten(str(exc), 300)}", False
    except AgentMemoryError as exc:  # a model's call never raises out of the loop
        return (f"the sub-agent could not run ({type(exc).__name__}: {shorten(str(exc), 300)}). Do the task "
                "yourself, or try again with a smaller task."), False
    answer = result.answer if result.answer is not None else "(no answer: it reached its step limit)"
    text = f"Sub-agent {result.agent_id} ({args.memory} memory, {result.steps} steps) answered: {answer}"
    try:
        merged = parent.merge(result) if args.memory != "shared" else []
    except AgentMemoryError as exc:
        return (f"{text}\nWhat it stored could not be copied into your memory "
                f"({type(exc).__name__}: {shorten(str(exc), 300)})."), False
    if merged:
        text += f"\nWhat it stored is now in your memory: {', '.join(merged)}."
    elif result.item_ids and args.memory == "shared":
        text += f"\nIt stored in your memory: {', '.join(result.item_ids)}."
    return text, True
