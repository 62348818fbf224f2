"""The token budget: how many prompt tokens a model takes, and when memory must act (AutoByteus'
token budget, github.com/AutoByteus/autobyteus, autobyteus/memory/; the thresholds of team9's agent
framework, github.com/team9ai/team9, apps/server/libs/agent-framework/ at b753b7c0).

``input_budget = max_context_tokens - max_output_tokens - safety_margin_tokens``. The provider's
reported ``prompt_tokens`` of the last response decide (as in AutoByteus' compaction trigger: no
estimate in the request path); our own count (messages and tool definitions, o200k) stands in only
when a provider reports no usage. ``prompt_tokens`` is the whole prompt, whatever part of it the
provider's prompt cache served or stored (:class:`~agent_memory.llm.chat.Usage`: Anthropic reports
``input_tokens``, ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` apart, and the
three are summed): caching changes the bill, not the context window, so the thresholds below check
the sum. The cost of cache reads and writes is reported per call beside it (``MemoryAgent``'s
``AgentStep``).

Three thresholds, as fractions of the input budget (team9's "soft / hard / truncation", there
50k / 80k / 100k tokens of a 100k budget):

- **soft** (default 0.6): memory is under pressure; the agent is told and may call
  ``compact_memory`` at a task break.
- **hard** (``compaction_ratio``, default 0.8, AutoByteus' early trigger): compaction runs before
  the next call.
- **truncation** (1.0): even after compaction the prompt would not fit; the oldest raw turns go to
  the archive without a summary.

After a compaction the prompt must be at most ``target_ratio`` (default 0.5, issue #7) of the
input budget, or truncation follows. The soft threshold sits above that target (team9 puts it at
0.5) so that a fresh compaction does not at once suggest the next one.
"""

from __future__ import annotations

from enum import IntEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agent_memory.diagnostics import UnknownModelWarning, warn_once
from agent_memory.errors import ConfigurationError

__all__ = [
    "DEFAULT_COMPACTION_RATIO",
    "DEFAULT_MAX_CONTEXT_TOKENS",
    "DEFAULT_SAFETY_MARGIN_TOKENS",
    "DEFAULT_SOFT_RATIO",
    "DEFAULT_TARGET_RATIO",
    "MODEL_LIMITS",
    "BudgetCheck",
    "Pressure",
    "ModelLimits",
    "TokenBudget",
    "model_limits",
]

DEFAULT_MAX_CONTEXT_TOKENS = 200_000
"""Context window assumed for a model whose family is unknown (AutoByteus' temporary default:
"when model metadata is missing, we use max_context_tokens=200000")."""

DEFAULT_COMPACTION_RATIO = 0.8
"""Hard threshold as a fraction of the input budget (AutoByteus' early trigger:
``0.8 * input_budget``)."""

DEFAULT_SOFT_RATIO = 0.6
"""Soft threshold as a fraction of the input budget (above :data:`DEFAULT_TARGET_RATIO`)."""

DEFAULT_TARGET_RATIO = 0.5
"""Most a prompt may be, as a fraction of the input budget, right after a compaction (issue #7)."""

DEFAULT_SAFETY_MARGIN_TOKENS = 1_024
"""Tokens kept free besides the output budget: provider-side framing our count cannot see."""


class ModelLimits(BaseModel):
    """What a model family takes and gives, in tokens. Immutable.

    Raises:
        ConfigurationError: if the values leave no input budget or the ratios are out of order.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_context_tokens: int = Field(default=DEFAULT_MAX_CONTEXT_TOKENS, ge=256)
    """The context window (prompt + answer), in tokens."""
    max_output_tokens: int = Field(default=8_192, ge=1)
    """Most tokens of one answer (the output budget reserved in every call)."""
    safety_margin_tokens: int = Field(default=DEFAULT_SAFETY_MARGIN_TOKENS, ge=0)
    """Tokens kept free for what the provider adds around the prompt."""
    compaction_ratio: float = Field(default=DEFAULT_COMPACTION_RATIO, gt=0.0, le=1.0)
    """Hard threshold: compaction when the prompt passes this fraction of the input budget."""
    soft_ratio: float = Field(default=DEFAULT_SOFT_RATIO, gt=0.0, le=1.0)
    """Soft threshold: the agent is told memory is under pressure."""
    target_ratio: float = Field(default=DEFAULT_TARGET_RATIO, gt=0.0, le=1.0)
    """Most a prompt may be right after a compaction (else truncation follows)."""

    def __init__(self, **data: object) -> None:
        try:
            super().__init__(**data)
        except ValueError as exc:
            raise ConfigurationError(f"invalid model limits: {exc}") from exc

    @model_validator(mode="after")
    def _consistent(self) -> ModelLimits:
        if self.max_context_tokens - self.max_output_tokens - self.safety_margin_tokens < 128:
            raise ValueError(
                f"max_context_tokens {self.max_context_tokens:,} leaves no input budget after "
                f"max_output_tokens {self.max_output_tokens:,} and safety_margin_tokens {self.safety_margin_tokens:,}"
            )
        if not self.target_ratio <= self.soft_ratio <= self.compaction_ratio:
            raise ValueError("need target_ratio <= soft_ratio <= compaction_ratio")
        return self

    @property
    def input_budget(self) -> int:
        """``max_context_tokens - max_output_tokens - safety_margin_tokens``, in tokens."""
        return self.max_context_tokens - self.max_output_tokens - self.safety_margin_tokens


MODEL_LIMITS: dict[str, ModelLimits] = {
    # OpenAI (platform.openai.com/docs/models, context window / max output tokens)
    "gpt-4o-mini": ModelLimits(max_context_tokens=128_000, max_output_tokens=16_384),
    "gpt-4o": ModelLimits(max_context_tokens=128_000, max_output_tokens=16_384),
    "gpt-4.1": ModelLimits(max_context_tokens=1_047_576, max_output_tokens=32_768),
    "gpt-4-turbo": ModelLimits(max_context_tokens=128_000, max_output_tokens=4_096),
    "gpt-5": ModelLimits(max_context_tokens=400_000, max_output_tokens=128_000),
    "o1": ModelLimits(max_context_tokens=200_000, max_output_tokens=100_000),
    "o3": ModelLimits(max_context_tokens=200_000, max_output_tokens=100_000),
    "o4-mini": ModelLimits(max_context_tokens=200_000, max_output_tokens=100_000),
    # Anthropic (docs.anthropic.com, models overview): every Claude model takes 200k tokens
    "claude": ModelLimits(max_context_tokens=200_000, max_output_tokens=8_192),
    "claude-3-5-haiku": ModelLimits(max_context_tokens=200_000, max_output_tokens=8_192),
    "claude-3-5-sonnet": ModelLimits(max_context_tokens=200_000, max_output_tokens=8_192),
    "claude-3-7-sonnet": ModelLimits(max_context_tokens=200_000, max_output_tokens=64_000),
    "claude-sonnet-4": ModelLimits(max_context_tokens=200_000, max_output_tokens=64_000),
    "claude-opus-4": ModelLimits(max_context_tokens=200_000, max_output_tokens=32_000),
    "claude-haiku-4": ModelLimits(max_context_tokens=200_000, max_output_tokens=64_000),
    # Google (ai.google.dev, models)
    "gemini-1.5-pro": ModelLimits(max_context_tokens=2_097_152, max_output_tokens=8_192),
    "gemini-2.0-flash": ModelLimits(max_context_tokens=1_048_576, max_output_tokens=8_192),
    "gemini-2.5": ModelLimits(max_context_tokens=1_048_576, max_output_tokens=65_536),
    # Open-weight families as usually served
    "llama-3.1": ModelLimits(max_context_tokens=131_072, max_output_tokens=4_096),
    "llama-3.2": ModelLimits(max_context_tokens=131_072, max_output_tokens=4_096),
    "llama-3.3": ModelLimits(max_context_tokens=131_072, max_output_tokens=4_096),
    "qwen2.5": ModelLimits(max_context_tokens=32_768, max_output_tokens=8_192),
    "smollm2": ModelLimits(max_context_tokens=8_192, max_output_tokens=1_024, safety_margin_tokens=256),
}
"""Limits per model family, looked up by the longest key the model name starts with (after
dropping a provider prefix such as ``openai/``). Override any of them per agent."""


def model_limits(model: str | None, **overrides: object) -> ModelLimits:
    """The limits of ``model`` (longest matching family prefix, case-insensitive), with
    ``overrides`` (any :class:`ModelLimits` field) applied; an unknown or ``None`` model gets the
    defaults (a :data:`DEFAULT_MAX_CONTEXT_TOKENS` window).

    A model name that matches no family of :data:`MODEL_LIMITS` and no ``max_context_tokens``
    override gives an :class:`~agent_memory.diagnostics.UnknownModelWarning` (once per name per
    process) naming the window assumed and how to set it: a smaller real window would make
    compaction come too late. ``None`` (no model named) gives none.

    Raises:
        ConfigurationError: if an override is unknown or makes the limits inconsistent.
    """
    name = (model or "").lower().rsplit("/", 1)[-1]
    family = max((key for key in MODEL_LIMITS if name.startswith(key)), key=len, default=None)
    base = MODEL_LIMITS[family] if family is not None else ModelLimits()
    if family is None and model and "max_context_tokens" not in overrides:
        warn_once(UnknownModelWarning, model, _unknown_model_message(model, base), stacklevel=2)
    if not overrides:
        return base
    unknown = set(overrides) - set(ModelLimits.model_fields)
    if unknown:
        raise ConfigurationError(f"unknown model limit(s): {', '.join(sorted(unknown))}")
    return ModelLimits(**{**base.model_dump(), **overrides})


def _unknown_model_message(model: str, limits: ModelLimits) -> str:
    return (
        f"model {model!r} is not a known model family: assuming a {limits.max_context_tokens:,}-token context "
        f"window ({limits.input_budget:,} input tokens after {limits.max_output_tokens:,} output and "
        f"{limits.safety_margin_tokens:,} safety tokens); if the real window is smaller, compaction comes too "
        f"late and calls fail. Set it with limits=ModelLimits(max_context_tokens=..., max_output_tokens=...) "
        f"(MemoryAgent, MemoryManager; agent_memory.kernel.budget.ModelLimits), or "
        f"model_limits({model!r}, max_context_tokens=...)"
    )


class Pressure(IntEnum):
    """How full the prompt is, in increasing order."""

    OK = 0
    """Below the soft threshold."""
    SOFT = 1
    """At or above the soft threshold: suggest compaction to the agent."""
    HARD = 2
    """At or above the hard threshold: compact before the next call."""
    OVER = 3
    """Above the input budget: the next prompt must shrink (compaction, then truncation)."""


class BudgetCheck(BaseModel):
    """One prompt size checked against the thresholds."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int
    """The prompt's size, in tokens."""
    reported: bool
    """``True`` when the size is the provider's ``prompt_tokens``; ``False`` for our own count."""
    pressure: Pressure
    input_budget: int
    soft_tokens: int
    hard_tokens: int


class TokenBudget:
    """The thresholds of one agent's model, in tokens.

    Args:
        limits: the model's limits (see :func:`model_limits`).
    """

    def __init__(self, limits: ModelLimits) -> None:
        self.limits = limits

    @property
    def input_budget(self) -> int:
        return self.limits.input_budget

    @property
    def soft_tokens(self) -> int:
        """Prompt size from which the agent is told to consider compacting."""
        return int(self.limits.soft_ratio * self.input_budget)

    @property
    def hard_tokens(self) -> int:
        """Prompt size from which compaction runs before the next call."""
        return int(self.limits.compaction_ratio * self.input_budget)

    @property
    def target_tokens(self) -> int:
        """Most a prompt may be right after a compaction."""
        return int(self.limits.target_ratio * self.input_budget)

    def check(self, prompt_tokens: int, *, reported: bool = True) -> BudgetCheck:
        """Where a prompt of ``prompt_tokens`` tokens stands (the whole prompt: cache reads and
        writes count like any other prompt token)."""
        if prompt_tokens > self.input_budget:
            pressure = Pressure.OVER
        elif prompt_tokens >= self.hard_tokens:
            pressure = Pressure.HARD
        elif prompt_tokens >= self.soft_tokens:
            pressure = Pressure.SOFT
        else:
            pressure = Pressure.OK
        return BudgetCheck(prompt_tokens=prompt_tokens, reported=reported, pressure=pressure,
                           input_budget=self.input_budget, soft_tokens=self.soft_tokens,
                           hard_tokens=self.hard_tokens)

    def __repr__(self) -> str:
        return (f"TokenBudget(input={self.input_budget:,}, soft={self.soft_tokens:,}, hard={self.hard_tokens:,}, "
                f"target={self.target_tokens:,})")
