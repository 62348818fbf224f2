"""Loaders: real agent runs from their own formats into one provider-neutral :class:`ReplayRun`.

- OpenAI chat format (``.json``): a list of messages, a ``{"messages": [...]}`` object, or a list
  of records each with a ``traj`` (tau-bench) or ``messages`` list.
- SWE-agent ``.traj`` files: the ``history`` when it holds the conversation, else rebuilt from the
  ``trajectory`` (thought + action as the assistant message, observation as the tool result).
- ReAct text logs (``.txt``): ``Question:`` then ``Thought n / Action n / Observation n`` blocks;
  each Observation is the tool result of the Action before it.
- smolagents benchmark runs (``.jsonl``, one run per line with ``intermediate_steps``: the agent's
  memory as chat messages with roles ``tool-call`` and ``tool-response``; the format of
  https://github.com/huggingface/smolagents ``examples/smolagents_benchmark/run.py``).
- TapeAgents tapes (``.json`` with ``metadata`` and ``steps``, https://github.com/ServiceNow/TapeAgents
  ``tapeagents/core.py``): the steps of one ``prompt_id`` are one LLM call's output (its thoughts
  the assistant text, its ``*_action`` steps the tool calls); observation steps are the tool
  results, in the order of the actions; the question or task is the user message.

A file in none of these shapes raises ``ValueError`` naming it: it is never replayed as an empty
run.

In every run an LLM call happens before each assistant message (for ReAct: before each Thought);
its prompt is every message before it (so tau-bench's dev runs make 2,023 calls, SWE-agent's 143,
ReAct's 1,131).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent_memory.models.items import MemoryType
from agent_memory.models.messages import Message, ToolCall

__all__ = [
    "ReplayRun",
    "ResultHint",
    "call_points",
    "limit_per_source",
    "load_openai_chat",
    "load_react_log",
    "load_smolagents",
    "load_tape",
    "load_swe_agent",
    "load_tool_definitions",
    "load_traces",
    "with_tool_definitions",
]

TRACE_SUFFIXES = (".json", ".jsonl", ".traj", ".txt")
"""File endings :func:`load_traces` reads when given a directory."""


@dataclass(frozen=True, slots=True)
class ResultHint:
    """What a loader knows about one tool result (how to store it); ``None`` fields: guess."""

    type: MemoryType | None = None
    """Memory type; ``None``: chosen from the content."""
    media_type: str | None = None
    """MIME type; ``None``: chosen from the content."""
    source: str | None = None
    """Where it came from (URL, tool); ``None``: the tool name."""
    title: str | None = None
    """A human title; ``None``: the tool call."""


@dataclass(frozen=True)
class ReplayRun:
    """One agent run, provider-neutral, ready to replay."""

    source: str
    """Name of the trace source (its directory: ``tau_bench``, ``swe_agent``, ...)."""
    run_id: str
    """Unique within the source (lower case ``a-z 0-9 . _ -``)."""
    messages: tuple[Message, ...]
    """The conversation, oldest first; tool results hold their content (not yet stored)."""
    question: str | None = None
    """The task's question (ReAct), else ``None``."""
    answer: str | None = None
    """The run's final answer (ReAct ``Finish[...]``), else ``None``."""
    hints: dict[int, ResultHint] = field(default_factory=dict)
    """Per tool message index: how to store its result."""
    scripted: bool = False
    """``True`` when the run is assembled, not recorded as is (the page session: real ReAct turns, a
    real page substituted for each Search result); the report keeps it out of the total."""
    tool_definitions: tuple[dict[str, Any], ...] = ()
    """The agent's own tool definitions (OpenAI ``tools`` format), sent with every LLM call of
    the run; ``()`` when the agent had none or they are described in its prompt (SWE-agent,
    ReAct). Traces rarely carry them: :func:`with_tool_definitions` adds them from a file."""
    vocabulary: frozenset[str] = frozenset()
    """Words the agent's framework defines rather than reads in a result (a tape's step kinds):
    never counted as a value the model needed from a result
    (:mod:`~agent_memory.replay.used_values`)."""

    @property
    def calls(self) -> list[int]:
        """Indices of the messages an LLM call produced (each prompt is everything before)."""
        return call_points(self.messages)


def call_points(messages: Sequence[Message]) -> list[int]:
    """Indices of assistant messages: an LLM call happens right before each."""
    return [i for i, message in enumerate(messages) if message.role == "assistant"]


def _safe_id(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-") or "run"


# -- OpenAI chat format ----------------------------------------------------------------------------
def _tool_calls(raw: Any) -> tuple[ToolCall, ...]:
    """Tool calls from an OpenAI ``tool_calls`` list (or its Python repr, as SWE-agent saves it)."""
    if not raw:
        return ()
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            try:
                raw = ast.literal_eval(raw)
            except (ValueError, SyntaxError):
                return ()
    calls = []
    for n, call in enumerate(raw):
        function = call.get("function", call)
        arguments = function.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        calls.append(ToolCall(id=str(call.get("id") or f"call_{n}"), name=str(function.get("name", "")), arguments=arguments))
    return tuple(calls)


def _content(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts
        return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in value)
    return json.dumps(value, ensure_ascii=False)


def chat_messages(raw: Iterable[dict[str, Any]]) -> tuple[Message, ...]:
    """Provider-neutral messages from OpenAI chat messages (``function`` role read as ``tool``)."""
    out: list[Message] = []
    for message in raw:
        role = message.get("role")
        if role == "function":
            role = "tool"
        if role not in ("system", "user", "assistant", "tool"):
            continue
        content = _content(message.get("content"))
        out.append(
            Message(
                role=role,
                content=(content or "") if role == "tool" else content,  # a tool message always has a result
                tool_calls=_tool_calls(message.get("tool_calls")) if role == "assistant" else (),
                # the legacy ``function`` role has no call id
                tool_call_id=(message.get("tool_call_id") or f"call_{len(out)}") if role == "tool" else None,
                name=message.get("name") if role == "tool" else None,
            )
        )
    return tuple(out)


def load_openai_chat(path: Path, *, source: str | None = None) -> list[ReplayRun]:
    """Runs of an OpenAI chat-format JSON file (see the module docstring for the shapes)."""
    path = Path(path)
    return _chat_runs(json.loads(path.read_text(encoding="utf-8")), path, source or path.parent.name)


def _chat_runs(data: Any, path: Path, source: str) -> list[ReplayRun]:
    """:func:`load_openai_chat` of data already parsed from ``path``."""
    if isinstance(data, dict):
        data = [data] if "messages" in data or "traj" in data else []
    if data and all(isinstance(m, dict) and "role" in m for m in data):
        return [ReplayRun(source=source, run_id=_safe_id(path.stem), messages=chat_messages(data))]
    runs = []
    for n, record in enumerate(data):
        raw = record.get("traj") or record.get("messages") or []
        label = f"{path.stem}-{n:03d}"
        if "task_id" in record:
            label += f"-task{record['task_id']}" + (f"-trial{record['trial']}" if "trial" in record else "")
        runs.append(ReplayRun(source=source, run_id=_safe_id(label), messages=chat_messages(raw)))
    return runs


# -- SWE-agent -----------------------------------------------------------------------------------
def load_swe_agent(path: Path, *, source: str | None = None) -> list[ReplayRun]:
    """The run of a SWE-agent ``.traj`` file.

    From ``history`` when it has assistant messages: a ``user`` or ``tool`` message after the first
    assistant message is an observation (a tool result); earlier ones (task, demonstrations) stay
    user messages. Otherwise rebuilt from ``trajectory``.
    """
    path = Path(path)
    source = source or path.parent.name
    data = json.loads(path.read_text(encoding="utf-8"))
    history = [m for m in data.get("history", []) if m.get("role") in ("system", "user", "assistant", "tool")]
    messages: list[Message] = []
    if any(m["role"] == "assistant" for m in history):
        seen_assistant = False
        last_calls: tuple[ToolCall, ...] = ()
        for raw in history:
            role = raw["role"]
            content = _content(raw.get("content"))
            if role == "assistant":
                seen_assistant = True
                last_calls = _tool_calls(raw.get("tool_calls"))
                messages.append(Message(role="assistant", content=content, tool_calls=last_calls))
            elif role in ("user", "tool") and seen_assistant:
                call_id = last_calls[0].id if last_calls else f"obs_{len(messages)}"  # text actions: no call id
                name = last_calls[0].name if last_calls else "shell"
                messages.append(Message(role="tool", content=content or "", tool_call_id=call_id, name=name))
            else:
                messages.append(Message(role="user" if role == "tool" else role, content=content))
    else:
        for n, step in enumerate(data.get("trajectory", [])):
            thought = step.get("thought") or step.get("response") or ""
            action = step.get("action") or ""
            messages.append(Message(role="assistant", content=f"{thought}\n\n```\n{action}\n```"))
            messages.append(Message(role="tool", content=step.get("observation") or "", tool_call_id=f"step_{n}",
                                    name="shell"))
    return [ReplayRun(source=source, run_id=_safe_id(path.stem)[:120], messages=tuple(messages))]


# -- ReAct text logs ------------------------------------------------------------------------------
_STEP = re.compile(r"^(Thought|Action|Observation) (\d+):[ ]?(.*)$")
_ACTION = re.compile(r"^(\w+)\[(.*)\]\s*$", re.S)
_SEPARATORS = ("Correct answer:", "---", "###", "BEGIN ", "Trial summary", "Reflections", "Reflection:")


def load_react_log(path: Path, *, source: str | None = None) -> list[ReplayRun]:
    """Runs of a ReAct text log; one run per ``Question:`` block.

    Messages: ``user`` ``Question: ...``; per step an ``assistant`` ``Thought n: ...\\nAction n:
    ...`` and a ``tool`` message with the observation's text (continuation lines included). Run
    ids name the trial, the outcome section and the position (``trial1-correct-000``).
    """
    path = Path(path)
    source = source or path.parent.name
    trial, section = 0, "run"
    blocks: list[dict[str, Any]] = []
    block: dict[str, Any] | None = None
    current: str | None = None
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line.startswith("BEGIN TRIAL"):
            trial = int(re.sub(r"\D", "", line) or 0)
        elif line.startswith("------------- BEGIN"):
            section = line.split("BEGIN", 1)[1].strip(" -").split()[0].lower()
        if line.startswith("Question:"):
            block = {"question": line.split(":", 1)[1].strip(), "steps": [], "trial": trial, "section": section}
            blocks.append(block)
            current = None
            continue
        if block is None:
            continue
        match = _STEP.match(line)
        if match:
            kind, number, body = match.groups()
            if kind == "Thought" or not block["steps"]:
                block["steps"].append({"n": int(number)})
            block["steps"][-1][kind] = body
            current = kind
        elif line.startswith(_SEPARATORS):
            if line.startswith("Correct answer:"):
                block["gold"] = line.split(":", 1)[1].strip()
            current = None
        elif current is not None:
            block["steps"][-1][current] += "\n" + line
    runs = []
    counters: dict[tuple[int, str], int] = {}
    for block in blocks:
        key = (block["trial"], block["section"])
        position = counters.get(key, 0)
        counters[key] = position + 1
        messages = [Message(role="user", content=f"Question: {block['question']}")]
        answer = None
        for step in block["steps"]:
            action = step.get("Action", "").rstrip("\n")
            text = f"Thought {step['n']}: {step.get('Thought', '').rstrip()}\nAction {step['n']}: {action}"
            match = _ACTION.match(action.strip())
            tool, argument = (match.group(1), match.group(2)) if match else ("Action", action)
            call = ToolCall(id=f"react_{step['n']}", name=tool, arguments=json.dumps({"query": argument}))
            messages.append(Message(role="assistant", content=text))
            if tool == "Finish":
                answer = argument.strip()
            if "Observation" in step:
                observation = step["Observation"].rstrip("\n")
                messages.append(Message(role="tool", content=observation, tool_call_id=call.id, name=tool))
        run_id = f"trial{block['trial']}-{block['section']}-{position:03d}"
        runs.append(
            ReplayRun(source=source, run_id=run_id, messages=tuple(messages), question=block["question"], answer=answer)
        )
    return runs


# -- smolagents benchmark runs --------------------------------------------------------------------
def _parts_text(content: Any) -> str:
    """The text of smolagents content parts (``[{"type": "text", "text": ...}]``) or a string."""
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def _smolagents_calls(text: str) -> tuple[ToolCall, ...]:
    """The calls of a ``tool-call`` message: ``Calling tools:\n[{'id': ..., 'function': ...}]``
    (a Python repr; arguments a dict or a string of code)."""
    body = text.split("Calling tools:", 1)[-1].strip()
    try:
        raw = ast.literal_eval(body)
    except (ValueError, SyntaxError):
        return ()
    return _tool_calls(raw if isinstance(raw, list) else [])


def load_smolagents(path: Path, *, source: str | None = None) -> list[ReplayRun]:
    """Runs of a smolagents benchmark ``.jsonl`` file, one per line.

    ``intermediate_steps`` become messages: ``system`` and ``user`` as they are; an ``assistant``
    message (one LLM call) takes the calls of the ``tool-call`` message after it; a
    ``tool-response`` is the tool result of that call (a response with no call pending, such as a
    parsing error fed back, is a user message). Run ids name the agent type and the line
    (``tool-calling-000``); :attr:`ReplayRun.question` is the task, :attr:`ReplayRun.answer` the
    run's answer.

    Raises:
        ValueError: if a line is not JSON or has no ``intermediate_steps`` list.
    """
    path = Path(path)
    records = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: line {n + 1} is not JSON ({exc.msg})") from exc
    return _smolagents_runs(records, path, source or path.parent.name)


def _smolagents_runs(records: list[Any], path: Path, source: str) -> list[ReplayRun]:
    """:func:`load_smolagents` of the records already parsed from ``path`` (one per line)."""
    runs = []
    for n, record in enumerate(records):
        steps = record.get("intermediate_steps") if isinstance(record, dict) else None
        if not isinstance(steps, list):
            raise ValueError(f"{path}: run {n + 1} has no intermediate_steps list (not a smolagents run)")
        messages: list[Message] = []
        pending: tuple[ToolCall, ...] = ()
        for step in steps:
            role, text = step.get("role"), _parts_text(step.get("content"))
            if role in ("system", "user"):
                messages.append(Message(role=role, content=text))
            elif role == "assistant":
                messages.append(Message(role="assistant", content=text))
                pending = ()
            elif role == "tool-call" and messages and messages[-1].role == "assistant":
                pending = _smolagents_calls(text)
                messages[-1] = messages[-1].model_copy(update={"tool_calls": pending})
            elif role == "tool-response":
                if pending:
                    messages.append(Message(role="tool", content=text, tool_call_id=pending[0].id,
                                            name=pending[0].name))
                    pending = ()
                else:
                    messages.append(Message(role="user", content=text))
        kind = str(record.get("agent_action_type") or "run")
        answer = record.get("answer")
        runs.append(ReplayRun(source=source, run_id=_safe_id(f"{kind}-{n:03d}"), messages=tuple(messages),
                              question=record.get("question"), answer=None if answer is None else str(answer)))
    return runs


# -- TapeAgents tapes ------------------------------------------------------------------------------
_TAPE_USER_KINDS = ("question", "task")


def _step_json(step: dict[str, Any]) -> str:
    """A tape step as the agent's prompt holds it: its JSON without ``metadata``."""
    return json.dumps({key: value for key, value in step.items() if key != "metadata"}, ensure_ascii=False)


def load_tape(path: Path, *, source: str | None = None) -> list[ReplayRun]:
    """The run of a TapeAgents tape (``{"metadata", "context", "steps"}``).

    Consecutive steps with one non-empty ``metadata.prompt_id`` are one LLM call: one assistant
    message whose text is the JSON of its non-action steps (thoughts, ``set_next_node``) and whose
    tool calls are its ``*_action`` steps (name the kind, arguments the step's fields). Steps with
    an empty ``prompt_id``: ``question`` and ``task`` are user messages; every other one is an
    observation (search results, a page, a calculation, a failure), the tool result of the next
    unanswered action, as its step JSON; an observation before any action (a browser agent's
    first page) is user input, and user input steps in a row are one user message (the first
    page and the task: what the agent starts from).

    Raises:
        ValueError: if the file is not a tape.
    """
    path = Path(path)
    return _tape_runs(json.loads(path.read_text(encoding="utf-8")), path, source or path.parent.name)


def _tape_runs(data: Any, path: Path, source: str) -> list[ReplayRun]:
    """:func:`load_tape` of data already parsed from ``path``."""
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list) or "metadata" not in data:
        raise ValueError(f"{path}: not a TapeAgents tape (an object with metadata and steps)")
    messages: list[Message] = []
    pending: list[ToolCall] = []
    group: str | None = None
    for n, step in enumerate(data["steps"]):
        kind = str(step.get("kind", ""))
        prompt_id = (step.get("metadata") or {}).get("prompt_id") or ""
        if prompt_id:
            if prompt_id != group:
                messages.append(Message(role="assistant", content=""))
                group = prompt_id
            last = messages[-1]
            if kind.endswith("_action"):
                arguments = {k: v for k, v in step.items() if k not in ("metadata", "kind")}
                call = ToolCall(id=f"step_{n}", name=kind, arguments=json.dumps(arguments, ensure_ascii=False))
                pending.append(call)
                messages[-1] = last.model_copy(update={"tool_calls": (*last.tool_calls, call)})
            else:
                text = f"{last.content}\n{_step_json(step)}" if last.content else _step_json(step)
                messages[-1] = last.model_copy(update={"content": text})
            continue
        group = None
        if kind not in _TAPE_USER_KINDS and pending:
            call = pending.pop(0)
            messages.append(Message(role="tool", content=_step_json(step), tool_call_id=call.id, name=call.name))
        elif messages and messages[-1].role == "user":  # the environment's input before a call: one message
            messages[-1] = messages[-1].model_copy(update={"content": f"{messages[-1].content}\n{_step_json(step)}"})
        else:
            messages.append(Message(role="user", content=_step_json(step)))
    author = str((data.get("metadata") or {}).get("author") or "tape")
    kinds = frozenset(str(step.get("kind", "")) for step in data["steps"]) - {""}
    return [ReplayRun(source=source, run_id=_safe_id(f"{author}-{path.stem}"), messages=tuple(messages),
                      vocabulary=kinds)]


# -- dispatch -------------------------------------------------------------------------------------
def _trace_files(paths: Iterable[Path]) -> Iterator[Path]:
    for path in paths:
        path = Path(path)
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                if child.is_file() and child.suffix in TRACE_SUFFIXES and not child.name.upper().startswith("LICENSE"):
                    yield child
        elif path.is_file():
            yield path
        else:
            raise FileNotFoundError(f"no trace file or directory at {path}")


def load_trace_file(path: Path, *, source: str | None = None) -> list[ReplayRun]:
    """Runs of one trace file, its format chosen by its ending and its shape; ``source`` names
    their source (``None``: the file's directory).

    Raises:
        ValueError: if the file is not a format the loaders read, or holds no LLM call.
    """
    path = Path(path)
    if path.suffix == ".traj":
        return load_swe_agent(path, source=source)
    if path.suffix == ".jsonl":
        return _with_calls(path, _load_jsonl(path, source))
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not JSON ({exc.msg})") from exc
        name = source or path.parent.name
        if isinstance(data, dict) and "steps" in data and "metadata" in data:
            return _with_calls(path, _tape_runs(data, path, name))
        return _with_calls(path, _chat_runs(data, path, name))
    if path.suffix == ".txt":
        head = path.read_text(encoding="utf-8")[:20_000]
        if "Question:" in head and re.search(r"^Thought \d+:", head, re.M):
            return _with_calls(path, load_react_log(path, source=source))
    raise ValueError(f"{path}: not a trace format replay reads ({FORMATS})")


FORMATS = ("OpenAI chat .json or .jsonl, SWE-agent .traj, ReAct .txt, smolagents benchmark .jsonl, "
           "TapeAgents tape .json")
"""The formats :func:`load_trace_file` reads, as error messages name them."""


def _load_jsonl(path: Path, source: str | None) -> list[ReplayRun]:
    """A ``.jsonl`` of smolagents runs or of chat records (``messages`` / ``traj`` / a list)."""
    try:
        lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: a line is not JSON ({exc.msg})") from exc
    head = lines[0] if lines else None
    if isinstance(head, dict) and "intermediate_steps" in head:
        return _smolagents_runs(lines, path, source or path.parent.name)
    if not (isinstance(head, list) or (isinstance(head, dict) and ("messages" in head or "traj" in head))):
        raise ValueError(f"{path}: not a trace format replay reads ({FORMATS})")
    records = [{"messages": m} if isinstance(m, list) else m for m in lines]
    return [
        ReplayRun(source=source or path.parent.name, run_id=_safe_id(f"{path.stem}-{n:03d}"),
                  messages=chat_messages(r.get("traj") or r.get("messages") or []))
        for n, r in enumerate(records)
    ]


def _with_calls(path: Path, runs: list[ReplayRun]) -> list[ReplayRun]:
    """``runs``, or ``ValueError`` naming ``path`` when none has an LLM call (a shape misread)."""
    if not any(run.calls for run in runs):
        raise ValueError(f"{path}: no run with an LLM call (an assistant message) in it; formats read: {FORMATS}")
    return runs


def load_traces(paths: Iterable[Path | str]) -> list[ReplayRun]:
    """Every run in these files and directories (directories recursively, sorted: files ending in
    ``.json``, ``.jsonl``, ``.traj`` or ``.txt``; licenses skipped, and ``.txt`` files that are
    not ReAct logs, such as notes). A run's source is the directory below the one given that
    holds its file (``traces/tapeagents_gaia_workarena/workarena/x.json`` given ``traces``:
    ``tapeagents_gaia_workarena``), else the file's directory.

    Raises:
        FileNotFoundError: if a path does not exist.
        ValueError: if a trace file (any ``.json``, ``.jsonl`` or ``.traj``, or a ``.txt`` given
            by name) is in no shape a loader reads, or holds no LLM call: the message names it.
    """
    runs: list[ReplayRun] = []
    for path in paths:
        path = Path(path)
        for file in _trace_files([path]):
            parts = file.relative_to(path).parts if path.is_dir() else ()
            try:
                runs.extend(load_trace_file(file, source=parts[0] if len(parts) > 1 else None))
            except ValueError:
                if path.is_file() or file.suffix != ".txt":
                    raise
    return runs


def limit_per_source(runs: list[ReplayRun], limit: int) -> list[ReplayRun]:
    """The first ``limit`` runs of each source, in their order (for quick partial replays)."""
    seen: dict[str, int] = {}
    kept: list[ReplayRun] = []
    for run in runs:
        seen[run.source] = seen.get(run.source, 0) + 1
        if seen[run.source] <= limit:
            kept.append(run)
    return kept


def load_tool_definitions(path: Path | str) -> tuple[dict[str, Any], ...]:
    """Tool definitions from a JSON file: a list of OpenAI tools (``{"type": "function",
    "function": {...}}``) or an object with such a ``tools`` list.

    Raises:
        FileNotFoundError: if the file does not exist.
        ValueError: if it is not JSON or holds no such list.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc.msg})") from exc
    tool_definitions = data.get("tools") if isinstance(data, dict) else data
    if not isinstance(tool_definitions, list) or not all(isinstance(t, dict) and ("function" in t or "name" in t) for t in tool_definitions):
        raise ValueError(f"{path}: not a list of tool definitions")
    return tuple(tool_definitions)


def with_tool_definitions(runs: list[ReplayRun], definitions_by_source: dict[str, tuple[dict[str, Any], ...]]) -> list[ReplayRun]:
    """The runs, each with the tool definitions of its source (runs of other sources unchanged).

    Raises:
        ValueError: if a source named in ``definitions_by_source`` has no run (a typo would otherwise
            silently leave the tools uncounted).
    """
    missing = set(definitions_by_source) - {run.source for run in runs}
    if missing:
        raise ValueError(f"no runs of source(s) {', '.join(sorted(missing))} to give tools to")
    return [replace(run, tool_definitions=definitions_by_source[run.source]) if run.source in definitions_by_source else run for run in runs]
