"""LLMCitationWriter: goal-aware citations written by a language model (MemberJunction's LLM-based
compaction of action results, github.com/MemberJunction/MJ).

The writer asks an :class:`~agent_memory.llm.LLMClient` for a 2-3 sentence summary and 3-5
key facts of a stored result, relevant to the agent's goal, as one JSON object. The answer is
validated by :class:`LLMCitation` (which also rejects placeholders copied from the prompt's
template, as SmolLM2-135M does); its summary and facts become the key content of a
:class:`~agent_memory.presentation.citations.Citation` (``plugin="llm"``), capped by the
:class:`~agent_memory.presentation.citations.CitationBuilder` like any plugin's.

The LLM is an optimisation, never a dependency of the agent: on a timeout, an unreachable
server, an HTTP error status, or an answer that is not JSON or fails validation, the writer
falls back to the deterministic plugin citation (``builder.cite(item)``), logs a warning, and
reports why in :attr:`CitationOutcome.error` and :attr:`LLMCitationWriter.failures`. :meth:`cite`
does not raise for anything the model or its server does.

Results are cached per (item id, content sha256, goal): asking again for the same item and goal
does not call the model again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import threading

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent_memory.errors import ConfigurationError, LLMError, LLMOutputError
from agent_memory.limits import shorten
from agent_memory.llm.client import LLMClient, LLMResponse
from agent_memory.models.items import MemoryItem, content_to_bytes
from agent_memory.presentation.citations import Citation, CitationBuilder
from agent_memory.transforms import readable_text

__all__ = [
    "DEFAULT_LLM_COMPACTION_TIMEOUT_S",
    "DEFAULT_LLM_MAX_INPUT_TOKENS",
    "DEFAULT_LLM_MAX_OUTPUT_TOKENS",
    "LLM_PLUGIN_NAME",
    "CitationOutcome",
    "LLMCitation",
    "LLMCitationWriter",
    "build_citation_messages",
    "parse_llm_citation",
]

DEFAULT_LLM_MAX_INPUT_TOKENS = 3_000
"""Tokens of the result (counted by the builder's counter) sent to the model; the rest is cut.
The seed sends the first 5,000 characters (~1,200 tokens); small local models have 2k-4k windows."""

DEFAULT_LLM_MAX_OUTPUT_TOKENS = 300
"""Most tokens the model may answer with: a 2-3 sentence summary and 3-5 facts fit in ~150."""

DEFAULT_LLM_COMPACTION_TIMEOUT_S = 20.0
"""Longest wait for one written citation, in seconds; past it the plugin citation is used."""

logger = logging.getLogger(__name__)

LLM_PLUGIN_NAME = "llm"
"""The ``plugin`` recorded in citations the LLM wrote."""

MAX_KEY_FACTS = 10
"""Most key facts accepted from the model (the prompt asks for 3-5)."""

SYSTEM_PROMPT = """\
You compact tool results for an AI agent. After this, the agent sees only your compaction and a \
memory id it can use to retrieve the full result, so keep what the agent needs for its goal.
Answer with ONE JSON object and nothing else, in this form (replace each <...> with your text):
{"summary": "<2-3 sentences>", "key_facts": ["<fact>", "<fact>", "<fact>"]}
The summary says what the result contains. Give 3-5 key facts relevant to the goal, each a short \
sentence with the concrete names, numbers and dates from the result, the most relevant first. Use \
only information found in the result."""

_TEMPLATE_ECHO = re.compile(r"^(<[^<>]*>|\.\.\.|…|(key )?facts?( \d+)?|summary|2-3 sentences\.?)$", re.IGNORECASE)
"""Values a small model copies from the prompt's template instead of writing content."""


def _is_template(text: str) -> bool:
    return bool(_TEMPLATE_ECHO.match(text.strip()))


class LLMCitation(BaseModel):
    """The model's answer: what a written citation must contain to be used."""

    model_config = ConfigDict(frozen=True, extra="ignore", str_strip_whitespace=True)

    summary: str = Field(min_length=1, max_length=4_000)
    """What the result contains, in 2-3 sentences."""
    key_facts: list[str] = Field(min_length=1, max_length=MAX_KEY_FACTS)
    """Facts relevant to the goal, most relevant first (blank entries are dropped)."""

    @field_validator("summary")
    @classmethod
    def _not_template(cls, value: str) -> str:
        if _is_template(value):
            raise ValueError(f"{value!r} is copied from the prompt's template, not a summary")
        return value

    @field_validator("key_facts")
    @classmethod
    def _drop_blank(cls, value: list[str]) -> list[str]:
        facts = [fact.strip() for fact in value if fact.strip()]
        if not facts:
            raise ValueError("key_facts has no non-blank fact")
        copied = [fact for fact in facts if _is_template(fact)]
        if copied:
            raise ValueError(f"{copied[0]!r} is copied from the prompt's template, not a fact")
        return list(dict.fromkeys(facts))  # duplicates once

    def key_content(self) -> str:
        """The citation body: the summary, then one line per fact (the builder caps its length)."""
        return "\n".join([self.summary, *(f"- {fact}" for fact in self.key_facts)])


class CitationOutcome(BaseModel):
    """What :meth:`LLMCitationWriter.cite` made, and how."""

    model_config = ConfigDict(frozen=True)

    citation: Citation
    """The citation to show: written by the LLM (``plugin="llm"``) or the plugin fallback."""
    used_llm: bool
    """``True`` when the key content is the LLM's (also for a cached LLM result)."""
    cached: bool = False
    """``True`` when the outcome came from the cache without calling the model."""
    error: str | None = None
    """Why the LLM result was not used (the fallback's reason); ``None`` when it was used or was
    not needed (a result too small for key content)."""
    error_kind: str | None = None
    """The :attr:`~agent_memory.errors.LLMError.kind` of ``error``: ``"timeout"``,
    ``"connection"``, ``"http_status"``, ``"invalid_output"`` or ``"error"``; ``None`` without one."""
    response: LLMResponse | None = None
    """The model's raw answer when one came back (also when it was invalid); ``None`` otherwise."""
    answer: LLMCitation | None = None
    """The validated answer when the LLM was used; ``None`` otherwise."""

    @property
    def fell_back(self) -> bool:
        """``True`` when the plugin citation replaced a failed LLM citation."""
        return self.error is not None


def build_citation_messages(
    item: MemoryItem, text: str, *, goal: str | None, cut_note: str | None = None
) -> list[dict[str, str]]:
    """The chat messages that ask for a citation of ``item`` (whose readable text is ``text``).

    Args:
        item: the stored result (its id, type, source and title are named in the prompt).
        text: the result's text as sent (already cut to the input budget).
        goal: what the agent is working on; ``None``: no stated goal.
        cut_note: a line saying how the text was cut, or ``None`` when it is whole.
    """
    meta = item.metadata
    described = f"{item.type} from {meta.source}" + (f', titled "{meta.title}"' if meta.title else "")
    goal_line = goal.strip() if goal and goal.strip() else "not stated; keep the facts most likely to matter later"
    parts = [
        f'The agent is working on: "{goal_line}"',
        f"Result {item.id}: {described}.",
        "<result>",
        text,
        "</result>",
    ]
    if cut_note:
        parts.append(cut_note)
    parts.append('Answer with the JSON object {"summary": ..., "key_facts": [...]} only.')
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n".join(parts)}]


_FENCE = re.compile(r"^```[a-zA-Z]*\s*(.*?)\s*```$", re.DOTALL)


def parse_llm_citation(text: str) -> LLMCitation:
    """Validate the model's answer (one JSON object, optionally inside a Markdown code fence).

    Raises:
        LLMOutputError: if the answer is not a JSON object or fails :class:`LLMCitation`.
    """
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1)
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise LLMOutputError(f"the answer is not JSON ({exc})", text=text) from exc
    if not isinstance(data, dict):
        raise LLMOutputError(f"the answer is JSON but not an object ({type(data).__name__})", text=text)
    try:
        return LLMCitation.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'answer'}: {e['msg']}" for e in exc.errors())
        raise LLMOutputError(f"the JSON answer fails validation ({problems})", text=text) from exc


class LLMCitationWriter:
    """Citations whose key content a language model wrote for the agent's goal, with the plugin
    citation as the fallback.

    Args:
        client: the model.
        builder: makes the citation (header, size cap) and the plugin fallback.
        goal: the agent's goal used when :meth:`cite` gets none; ``None``: no stated goal.
        max_input_tokens: tokens of the result sent to the model (counted by ``builder.counter``,
            which need not be the model's tokenizer: leave room in its context window).
        max_output_tokens: most tokens the model may answer with.
        timeout_s: longest wait for one written citation, in seconds.
        temperature: sampling temperature (0: as repeatable as the server allows).
        json_mode: ask for ``response_format={"type": "json_object"}`` (servers that support it
            constrain the answer to JSON); ``False``: rely on the prompt alone.
        cache: reuse outcomes per (item id, content sha256, goal). LLM results and invalid
            answers are cached; timeouts, connection and HTTP errors are not (they may pass).

    Raises:
        ConfigurationError: if a size or the timeout is not positive.
    """

    def __init__(
        self,
        client: LLMClient,
        builder: CitationBuilder,
        *,
        goal: str | None = None,
        max_input_tokens: int = DEFAULT_LLM_MAX_INPUT_TOKENS,
        max_output_tokens: int = DEFAULT_LLM_MAX_OUTPUT_TOKENS,
        timeout_s: float = DEFAULT_LLM_COMPACTION_TIMEOUT_S,
        temperature: float = 0.0,
        json_mode: bool = True,
        cache: bool = True,
    ) -> None:
        if max_input_tokens < 1 or max_output_tokens < 1 or timeout_s <= 0:
            raise ConfigurationError("max_input_tokens, max_output_tokens and timeout_s must be positive")
        self.client = client
        self.builder = builder
        self.goal = goal
        self.max_input_tokens = max_input_tokens
        self.max_output_tokens = max_output_tokens
        self.timeout_s = timeout_s
        self.temperature = temperature
        self.json_mode = json_mode
        self.cache = cache
        self.failures: list[CitationOutcome] = []
        """Every fallback since this writer was made, oldest first (cache hits not repeated)."""
        self._cache: dict[tuple[str, str, str], CitationOutcome] = {}
        self._lock = threading.Lock()

    def cite(self, item: MemoryItem, goal: str | None = None) -> CitationOutcome:
        """The citation of ``item`` for ``goal`` (``None``: the writer's goal).

        Never raises for a failure of the model or its server: the outcome then holds the plugin
        citation and the reason in ``error``.
        """
        goal = goal if goal is not None else self.goal
        key = (item.id, _content_sha256(item), goal or "")
        if self.cache:
            with self._lock:
                hit = self._cache.get(key)
            if hit is not None:
                return hit.model_copy(update={"cached": True})
        outcome = self._write(item, goal)
        if outcome.error is not None:
            logger.warning("LLM citation of %s fell back to the plugin citation: %s", item.id, outcome.error)
            with self._lock:
                self.failures.append(outcome)
        if self.cache and outcome.error_kind in (None, LLMOutputError.kind):
            with self._lock:
                self._cache[key] = outcome
        return outcome

    async def acite(self, item: MemoryItem, goal: str | None = None) -> CitationOutcome:
        """:meth:`cite` in a worker thread, for async agents."""
        return await asyncio.to_thread(self.cite, item, goal)

    def clear_cache(self) -> None:
        """Forget every cached outcome."""
        with self._lock:
            self._cache.clear()

    def _write(self, item: MemoryItem, goal: str | None) -> CitationOutcome:
        probe = self.builder.cite(item, key_content=".", plugin=LLM_PLUGIN_NAME)
        text, _notes = readable_text(item)
        if not probe.key_content or not text.strip():  # too small for key content, or nothing to read
            return CitationOutcome(citation=self.builder.cite(item), used_llm=False)
        text, cut_note = self._cut(text)
        messages = build_citation_messages(item, text, goal=goal, cut_note=cut_note)
        response: LLMResponse | None = None
        try:
            response = self.client.complete(
                messages,
                max_tokens=self.max_output_tokens,
                temperature=self.temperature,
                response_format={"type": "json_object"} if self.json_mode else None,
                timeout_s=self.timeout_s,
            )
            answer = parse_llm_citation(response.text)
        except LLMError as exc:
            return self._fallback(item, f"{exc.kind}: {exc}", exc.kind, response)
        except Exception as exc:  # noqa: BLE001 - a third-party LLMClient must not break the agent
            logger.debug("LLM client failed", exc_info=True)
            return self._fallback(item, f"error: {type(exc).__name__}: {exc}", LLMError.kind, response)
        citation = self.builder.cite(item, key_content=answer.key_content(), plugin=LLM_PLUGIN_NAME)
        return CitationOutcome(citation=citation, used_llm=True, response=response, answer=answer)

    def _fallback(self, item: MemoryItem, error: str, kind: str, response: LLMResponse | None) -> CitationOutcome:
        return CitationOutcome(
            citation=self.builder.cite(item), used_llm=False, error=error, error_kind=kind, response=response
        )

    def _cut(self, text: str) -> tuple[str, str | None]:
        counter = self.builder.counter
        total = counter.count(text)
        if total <= self.max_input_tokens:
            return text, None
        cut = shorten(text, self.max_input_tokens, counter=counter, marker="")
        return cut, f"(The result was cut to its first {self.max_input_tokens:,} of {total:,} tokens.)"


def _content_sha256(item: MemoryItem) -> str:
    if item.metadata.content_sha256:
        return item.metadata.content_sha256
    return hashlib.sha256(content_to_bytes(item.content, item.metadata.content_encoding)[0]).hexdigest()
