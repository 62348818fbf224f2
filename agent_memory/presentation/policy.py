"""When a stored result is shown in full and when as its citation (MemberJunction's action results,
github.com/MemberJunction/MJ: the full result once, compacted after).

- ``full_once`` (default): in full in the first LLM call after it arrives, as its citation after.
- ``keep_last_k``: the ``k`` newest results in full, older ones as citations (like observation
  masking, but each masked result keeps its memory id and a way back).
- ``always_cite``: citations only, even the first time (whatever the price: a result is never
  sent in full, so there is no swap to weigh).

Citing costs something too: a citation is only useful with the memory tools that bring the result
back, and their definitions are sent with every call (on the public tau-bench airline runs, memory
tools of 2,182 o200k_base tokens turn a −15.1% saving into +25.7%).
``start`` says when citing begins:

- ``when_it_pays`` (default): every result is shown exactly as the tool returned it (the prompt is
  the naive one, no memory tool is needed) until the tokens that citing would save in the prompt
  exceed what offering the memory tools costs per call (and, cache-aware under a price model,
  until the rewrite that starting is pays); from that call on, results are cited per ``kind`` and
  the tools are offered. Citing never stops once begun (stopping would change the
  prompt's prefix again and leave citations the model could not follow). By tokens alone no prompt is ever
  larger than the naive one: before, it *is* the naive one; after, the saving already exceeds the
  tools' cost and only grows. Under a price model, a prompt the provider caches that shares nothing
  with the cache (one after a rewrite of the history) and already holds a result worth citing may
  get the tools at once, before that result is due, when that is cheaper than any later start would be (a later start rewrites the whole prompt;
  :func:`~agent_memory.presentation.rewrites.offer_from_first_call`): each prompt is then at most the
  tools' tokens above the naive one until citing saves more.
- ``first_call``: cite from the first call (the tools are offered from the first call).

Results of at most ``inline_max_tokens`` tokens always stay in full: their citation would save too
little to pay for the retrieves it forces.

Provider prompt caches reuse only an unchanged prefix, and every swap from full result to citation
changes the prompt from that result on (and the start of citing changes the tools list and the
system prompt: all of the prompt). ``cache_aware`` (default): when the caller knows the price model
its prompts are billed under (``ContextBuilder(prices=...)``; ``MemoryAgent`` looks it up by its
model's name), swaps are batched into rewrites and a rewrite is made only when it pays: its extra cost
now (the rewritten part written to the cache again instead of read), plus what reading back a value
the new showing lacks would cost a model that needs it (one more call: the *read-back*, counted once
per rewrite), against what it saves on the calls expected after it
(:mod:`agent_memory.presentation.rewrites`). Starting to cite is such a rewrite (from the first
token) and must pay too. Without a price model, or with ``cache_aware=False``, tokens alone decide:
every due swap at once. ``expected_calls`` is how many LLM calls a conversation makes in all, when
the caller knows; ``None``: as many again as were made so far
(:func:`~agent_memory.presentation.rewrites.remaining_calls`).

``min_swap_tokens`` (either mode) is a floor: a rewrite must save at least that many tokens (0: no
floor). A result, once swapped, is never shown in full again by the policy.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DEFAULT_FULL_RESULT_MAX_TOKENS",
    "DEFAULT_INLINE_MAX_TOKENS",
    "DEFAULT_KEEP_LAST_K",
    "PresentationPolicy",
]

DEFAULT_FULL_RESULT_MAX_TOKENS = 6_000
"""Cap of a result's first showing, in tokens; beyond it the first showing is the citation (with
the result's key values) plus the head of the content, and the model reads the rest with
``retrieve_memory``. Chosen by cost after the retrieves the cap forces, on the replay's real runs
(``agent-memory replay``; the report's "What the model later used"): a larger result shown whole
once is written to the prompt cache at 1.25x for one call, while a retrieve is one more call over
the whole (cached) prompt plus a page that stays in the history. On the smolagents and TapeAgents
GAIA runs (pages up to 31k tokens) 4,000 cost least but left a fifth of the values the models went
on to use to retrieves (TapeAgents: 30 of 39 kept); 6,000 keeps 43 of 43 and 37 of 39 at
-26% and -39% against naive under Sonnet; 8,000 and 16,000 keep the same and save less."""

DEFAULT_INLINE_MAX_TOKENS = 500
"""Results of at most this many tokens are never cited. Citing one saves at most its size in each
later prompt, read from the cache at a tenth of the input price (Anthropic, OpenAI's GPT-5),
while a value the model then needs costs a retrieve: one more call over the whole prompt. On
tau-bench (results of 200-500 tokens: user records, reservations) citing them made the models'
prompts miss a quarter of the values they went on to use, and cost more than naive once those
retrieves were priced."""

DEFAULT_KEEP_LAST_K = 3
"""Results kept in full by ``keep_last_k``: 3, as Anthropic's context editing keeps 3 tool uses."""


class PresentationPolicy(BaseModel):
    """How results appear in the messages built for each LLM call. Immutable."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["full_once", "keep_last_k", "always_cite"] = "full_once"
    """Which results are shown in full (see the module docstring)."""
    k: int = Field(default=DEFAULT_KEEP_LAST_K, ge=0)
    """``keep_last_k`` only: how many of the newest results stay in full."""
    full_result_max_tokens: int = Field(default=DEFAULT_FULL_RESULT_MAX_TOKENS, ge=100)
    """Cap of a full showing, in tokens."""
    min_swap_tokens: int = Field(default=0, ge=0)
    """A rewrite of swaps must save at least this many tokens per prompt, in either mode: due swaps
    wait until together they reach it (0: no floor)."""
    start: Literal["when_it_pays", "first_call"] = "when_it_pays"
    """When citing (and offering the memory tools) begins; see the module docstring."""
    inline_max_tokens: int = Field(default=DEFAULT_INLINE_MAX_TOKENS, ge=0)
    """Results of at most this many tokens are always shown in full (0: cite any result whose
    citation is shorter)."""
    cache_aware: bool = True
    """Under a price model, swaps (and the start of citing) only when they pay with prompt caching;
    ``False``, or no price model: as soon as due (see the module docstring)."""
    expected_calls: int | None = Field(default=None, ge=1)
    """LLM calls a conversation is expected to make in all, for the cache-aware decision; ``None``:
    as many again as were made so far (the Lindy estimate), at least one."""

    @property
    def label(self) -> str:
        """A short name for reports: ``full_once``, ``keep_last_3``, ``always_cite``, then
        ``+batch<tokens>`` for batching, ``+eager`` for ``start="first_call"``, ``+tokens`` for
        ``cache_aware=False`` and ``+calls<n>`` for ``expected_calls``."""
        name = f"keep_last_{self.k}" if self.kind == "keep_last_k" else self.kind
        if self.min_swap_tokens:
            name += f"+batch{self.min_swap_tokens}"
        if self.start == "first_call":
            name += "+eager"
        if not self.cache_aware:
            name += "+tokens"
        return name + f"+calls{self.expected_calls}" if self.expected_calls is not None else name
