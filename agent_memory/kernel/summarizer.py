"""Summarizers: compacted turns in, an episodic summary and semantic facts out (AutoByteus'
compaction pipeline, github.com/AutoByteus/autobyteus).

:class:`Summarizer` is the plugin point (a Protocol). Two ship:

- :class:`ExtractiveSummarizer` (default, offline, deterministic): per turn, what the user asked,
  what the assistant concluded and which tools ran; user statements that read as preferences,
  constraints or decisions become semantic facts; finished work goes to ``done`` so it is not
  re-planned.
- :class:`LLMSummarizer`: asks any OpenAI-compatible endpoint (:class:`~agent_memory.llm.client.LLMClient`)
  for JSON, validated by pydantic (:class:`SummaryPayload`). On a timeout, an HTTP error or
  invalid output it falls back to the extractive summary and says why
  (:attr:`CompactionResult.fallback_reason`): a summarizer failure never drops a turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_memory.errors import LLMError
from agent_memory.kernel.transcript import group_turns, render_turns
from agent_memory.limits import shorten
from agent_memory.llm.client import LLMClient
from agent_memory.models.traces import RawTraceItem
from agent_memory.tokens import TokenCounter, default_token_counter

__all__ = [
    "DEFAULT_SUMMARY_MAX_TOKENS",
    "SUMMARIZER_PROMPT",
    "CompactionResult",
    "ExtractiveSummarizer",
    "FactPayload",
    "LLMSummarizer",
    "SummaryPayload",
    "Summarizer",
]

DEFAULT_SUMMARY_MAX_TOKENS = 600
"""Most tokens of one episodic summary (several summaries share the compaction snapshot)."""

MAX_FACTS = 20
"""Most semantic facts taken from one compaction (AutoByteus' compaction snapshot: 20 semantic
items in a bundle)."""

MAX_NOTES = 8
"""Most decisions, constraints, open questions, next steps or done items kept per compaction."""

NOTE_CHARS = 240
"""Longest note or fact, in characters."""


class FactPayload(BaseModel):
    """One semantic fact as a summarizer gives it."""

    model_config = ConfigDict(extra="ignore")

    fact: str = Field(min_length=1, max_length=2_000)
    tags: list[str] = Field(default_factory=list, max_length=8)
    confidence: float = Field(default=0.7, ge=0.0, le=1.0)


class SummaryPayload(BaseModel):
    """What a summarizer returns for a window of turns (the LLM summarizer's JSON schema)."""

    model_config = ConfigDict(extra="ignore")

    episodic_summary: str = Field(min_length=1, max_length=20_000)
    """What happened in these turns, in a few sentences."""
    semantic_facts: list[FactPayload] = Field(default_factory=list, max_length=50)
    """Stable facts, preferences, constraints, decisions worth keeping beyond these turns."""
    decisions: list[str] = Field(default_factory=list, max_length=32)
    constraints: list[str] = Field(default_factory=list, max_length=32)
    open_questions: list[str] = Field(default_factory=list, max_length=32)
    next_steps: list[str] = Field(default_factory=list, max_length=32)
    done: list[str] = Field(default_factory=list, max_length=32)
    """Work already finished (so it is not re-planned)."""


class CompactionResult(BaseModel):
    """A summarizer's output for one window of turns."""

    model_config = ConfigDict(frozen=True)

    turn_ids: tuple[str, ...]
    """The turns summarized, oldest first."""
    payload: SummaryPayload
    summarizer: str
    """``extractive`` or ``llm``."""
    fallback_reason: str | None = None
    """Why the LLM summarizer fell back to the extractive one (``timeout``, ``http_status``,
    ``invalid_output``, ...); ``None`` when it did not."""


@runtime_checkable
class Summarizer(Protocol):
    """Turns a window of whole turns into a :class:`CompactionResult`."""

    name: str

    def summarize(self, traces: Sequence[RawTraceItem]) -> CompactionResult:
        """Summarize the raw traces of whole turns (any order; grouped by turn). Must not raise
        for the content of the traces."""
        ...


_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_FACT_CUES = re.compile(
    r"\b(i prefer|i like|i want|i need|please (?:always|never|use|don't)|always|never|must|should not|don't|do not|"
    r"make sure|remember|my name is|i am|i'm|we use|use [a-z0-9_.-]+ for|deadline|budget|constraint|"
    r"we decided|let's use|the goal is)\b",
    re.I,
)
_DONE_CUES = re.compile(
    r"\b(done|finished|completed|fixed|created|added|updated|wrote|saved|booked|sent|merged|passed|resolved)\b", re.I
)
_DECISION_CUES = re.compile(r"\b(i will|i'll|we will|we'll|decided|going to|plan is|chose|choose)\b", re.I)
_NEXT_CUES = re.compile(r"\b(next|then|after that|remaining|todo|to do)\b", re.I)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]{3,}")
_STOP = frozenset(
    "this that with from have what when where which would could should there their about your they them "
    "been were will just like into than then also some more most very only over such user assistant tool".split()
)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(" ".join(text.split())) if len(s.strip()) > 2]


def _tags(text: str, limit: int = 3) -> list[str]:
    words: dict[str, int] = {}
    for word in _WORD.findall(text.lower()):
        if word not in _STOP:
            words[word] = words.get(word, 0) + 1
    return [w for w, _ in sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]]


def _dedupe(values: list[str], limit: int) -> list[str]:
    seen: dict[str, str] = {}
    for value in values:
        seen.setdefault(value.casefold(), value)
    return list(seen.values())[:limit]


class ExtractiveSummarizer:
    """A deterministic, offline summarizer (the default, and the LLM summarizer's fallback).

    Args:
        max_tokens: most tokens of the episodic summary.
        counter: token counter; ``None``: o200k_base.
    """

    name = "extractive"

    def __init__(self, *, max_tokens: int = DEFAULT_SUMMARY_MAX_TOKENS, counter: TokenCounter | None = None) -> None:
        self.max_tokens = max_tokens
        self.counter = counter or default_token_counter()

    def summarize(self, traces: Sequence[RawTraceItem]) -> CompactionResult:
        turns = group_turns(traces)
        lines: list[str] = []
        facts: list[FactPayload] = []
        decisions: list[str] = []
        done: list[str] = []
        next_steps: list[str] = []
        questions: list[str] = []
        for turn_id, items in turns.items():
            asked = " ".join(i.content for i in items if i.trace_type == "user").strip()
            said = [i.content for i in items if i.trace_type == "assistant" and i.content.strip()]
            tool_names = [i.tool_name or "tool" for i in items if i.trace_type == "tool_call"]
            errors = [i.tool_name or "tool" for i in items if i.trace_type == "tool_result" and i.tool_error]
            part = [f"{turn_id}:"]
            if asked:
                part.append(f"user: {shorten(_sentences(asked)[0] if _sentences(asked) else asked, 200, one_line=True)}")
            if tool_names:
                part.append("tools: " + ", ".join(dict.fromkeys(tool_names)) + (f" (failed: {', '.join(errors)})" if errors else ""))
            if said:
                last = _sentences(said[-1])
                part.append(f"assistant: {shorten(last[-1] if last else said[-1], 200, one_line=True)}")
            lines.append(" ".join(part))
            for sentence in _sentences(asked):
                if _FACT_CUES.search(sentence):
                    facts.append(FactPayload(fact=shorten(sentence, NOTE_CHARS, one_line=True), tags=_tags(sentence), confidence=0.6))
                if sentence.endswith("?"):
                    questions.append(shorten(sentence, NOTE_CHARS, one_line=True))
            for text in said:
                for sentence in _sentences(text):
                    if _DONE_CUES.search(sentence):
                        done.append(shorten(sentence, NOTE_CHARS, one_line=True))
                    elif _DECISION_CUES.search(sentence):
                        decisions.append(shorten(sentence, NOTE_CHARS, one_line=True))
                    if _NEXT_CUES.search(sentence) and _DECISION_CUES.search(sentence):
                        next_steps.append(shorten(sentence, NOTE_CHARS, one_line=True))
            answered = {i.tool_call_id for i in items if i.trace_type == "tool_result" and not i.tool_error}
            for item in items:
                if item.trace_type == "tool_call" and item.tool_call_id in answered:
                    done.append(shorten(f"ran {item.tool_name or 'tool'}({json.dumps(item.tool_args or {}, ensure_ascii=False)})",
                                        NOTE_CHARS, one_line=True))
        summary = shorten("\n".join(lines), self.max_tokens, counter=self.counter) or f"{len(turns)} turns."
        payload = SummaryPayload(
            episodic_summary=summary,
            semantic_facts=list({f.fact.casefold(): f for f in reversed(facts)}.values())[::-1][:MAX_FACTS],
            decisions=_dedupe(decisions, MAX_NOTES),
            open_questions=_dedupe(questions[-MAX_NOTES:], MAX_NOTES),
            next_steps=_dedupe(next_steps[-MAX_NOTES:], MAX_NOTES),
            done=_dedupe(done, MAX_NOTES),
        )
        return CompactionResult(turn_ids=tuple(turns), payload=payload, summarizer=self.name)


SUMMARIZER_PROMPT = (
    "You compact an agent's conversation. Summarize the turns below for the agent itself, who will "
    "continue the task without them. Answer with one JSON object with these keys: "
    '"episodic_summary" (what happened, a few sentences, keep names, numbers, ids like mem_… and turn_…), '
    '"semantic_facts" (list of {"fact", "tags", "confidence"}: stable facts, user preferences, constraints, '
    'decisions worth keeping beyond these turns), "decisions", "constraints", "open_questions", '
    '"next_steps", "done" (lists of short strings; "done" lists work already finished so it is not '
    "redone). Do not invent anything that is not in the turns."
)
"""The LLM summarizer's default instructions (replaceable per agent)."""


class LLMSummarizer:
    """Summaries by a language model, validated, with the extractive summarizer as fallback.

    Args:
        client: any :class:`~agent_memory.llm.client.LLMClient` (e.g. ``OpenAIChatClient``).
        prompt: the instructions; :data:`SUMMARIZER_PROMPT` by default.
        max_input_tokens: the transcript sent is cut to this many tokens (oldest turns kept, the
            cut marked), so a huge window cannot exceed the summarizer's own context window; the
            compacted turns stay whole in the archive either way.
        max_output_tokens: most tokens of the answer.
        timeout_s: longest wait for the answer, in seconds.
        fallback: used when the model fails; ``None``: :class:`ExtractiveSummarizer`.
        counter: token counter; ``None``: o200k_base.
    """

    name = "llm"

    def __init__(
        self,
        client: LLMClient,
        *,
        prompt: str = SUMMARIZER_PROMPT,
        max_input_tokens: int = 24_000,
        max_output_tokens: int = 1_200,
        timeout_s: float = 60.0,
        fallback: Summarizer | None = None,
        counter: TokenCounter | None = None,
    ) -> None:
        self.client = client
        self.prompt = prompt
        self.max_input_tokens = max_input_tokens
        self.max_output_tokens = max_output_tokens
        self.timeout_s = timeout_s
        self.counter = counter or default_token_counter()
        self.fallback = fallback if fallback is not None else ExtractiveSummarizer(counter=self.counter)

    def summarize(self, traces: Sequence[RawTraceItem]) -> CompactionResult:
        transcript = render_turns(traces)
        if self.counter.count(transcript) > self.max_input_tokens:
            transcript = shorten(transcript, self.max_input_tokens, counter=self.counter, marker="\n[… cut]")
        messages = [{"role": "system", "content": self.prompt}, {"role": "user", "content": transcript}]
        try:
            answer = self.client.complete(
                messages, max_tokens=self.max_output_tokens, temperature=0.0,
                response_format={"type": "json_object"}, timeout_s=self.timeout_s,
            )
            payload = SummaryPayload.model_validate_json(_json_object(answer.text))
        except LLMError as exc:
            return self._fallback(traces, exc.kind)
        except (ValidationError, ValueError):
            return self._fallback(traces, "invalid_output")
        turn_ids = tuple(group_turns(traces))
        return CompactionResult(turn_ids=turn_ids, payload=payload, summarizer=self.name)

    def _fallback(self, traces: Sequence[RawTraceItem], reason: str) -> CompactionResult:
        result = self.fallback.summarize(traces)
        return result.model_copy(update={"fallback_reason": reason})


def _json_object(text: str) -> str:
    """The first JSON object in ``text`` (models wrap JSON in prose or code fences)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in the answer")
    return text[start : end + 1]
