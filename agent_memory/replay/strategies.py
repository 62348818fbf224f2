"""Replay strategies: how an agent presents tool results, and which tools it sends with each call.

``naive`` (every result in full) and ``masking_keep_3`` (the 3 newest results in full, older ones
replaced by a placeholder, as Anthropic's context editing does) are the baselines; every other
strategy is agent-memory under a :class:`~agent_memory.presentation.policy.PresentationPolicy`,
with the memory tools offered by a :class:`~agent_memory.presentation.offer.ToolOffer` in a tool
form (``separate`` tools or one ``memory`` tool). Labels read as the policy's label, then
``+all_tools`` when every memory tool is sent with every call, ``+single`` for the one-tool form.
Other libraries' tool-result clearing, replayed from their own packages, is in
:mod:`~agent_memory.replay.peers`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_memory.presentation.offer import ToolOffer
from agent_memory.presentation.policy import PresentationPolicy

__all__ = [
    "DEFAULT_STRATEGIES",
    "MASKING",
    "MASKING_KEEP",
    "MASKING_RERUN",
    "MASK_PLACEHOLDER",
    "NAIVE",
    "RERUN_SUFFIX",
    "ReplayStrategy",
    "as_strategy",
    "parse_policy",
    "parse_strategy",
]

MASKING_KEEP = 3
"""Results observation masking keeps in full (Anthropic's context editing keeps 3 tool uses)."""

MASK_PLACEHOLDER = "[result cleared]"
"""What observation masking puts in place of an older result."""

NAIVE = "naive"
MASKING = f"masking_keep_{MASKING_KEEP}"

RERUN_SUFFIX = "+rerun"
"""Label suffix of a clearing strategy priced as if the model ran the original tool call again
whenever its prompt misses a value it went on to use (:mod:`~agent_memory.replay.engine`)."""

MASKING_RERUN = f"{MASKING}{RERUN_SUFFIX}"
"""Observation masking, priced with a re-run of the tool call for each value it lost."""


@dataclass(frozen=True)
class ReplayStrategy:
    """One agent-memory configuration to replay."""

    policy: PresentationPolicy = field(default_factory=PresentationPolicy)
    """When results are shown in full, cited, and when citing starts."""
    offer: ToolOffer = field(default_factory=ToolOffer)
    """When each memory tool is sent."""
    form: Literal["separate", "single"] = "separate"
    """Separate memory tools or one ``memory`` tool."""

    @property
    def label(self) -> str:
        """The strategy's name in reports (see the module docstring)."""
        label = self.policy.label
        if self.offer.mode == "all":
            label += "+all_tools"
        return label + "+single" if self.form == "single" else label


DEFAULT_STRATEGIES: tuple[ReplayStrategy, ...] = (
    ReplayStrategy(),
    ReplayStrategy(PresentationPolicy(cache_aware=False)),
    ReplayStrategy(PresentationPolicy(start="first_call"), ToolOffer(mode="all")),
    ReplayStrategy(PresentationPolicy(kind="keep_last_k", k=3)),
)
"""Replayed when none are given: the defaults (``full_once``: cite once it pays, tools as needed,
swaps when they pay under the price model the run is billed under); the same deciding by tokens
alone (``full_once+tokens``: every due swap at once, the default before prompt caching was
priced); the default policy citing from the first call with all three tools on every call
(``full_once+eager+all_tools``, what offering memory naively costs); and keeping the 3 newest
results in full (``keep_last_3``)."""


def as_strategy(value: ReplayStrategy | PresentationPolicy) -> ReplayStrategy:
    """A strategy from a strategy or a bare policy (default tool offer and form)."""
    return value if isinstance(value, ReplayStrategy) else ReplayStrategy(policy=value)


_LABEL = re.compile(r"^(full_once|always_cite|keep_last_(\d+))((?:\+(?:batch\d+|eager|tokens|calls\d+|all_tools|single))*)$")


def parse_strategy(name: str) -> ReplayStrategy:
    """A strategy from its report label: ``full_once``, ``keep_last_<k>`` or ``always_cite``,
    then any of ``+batch<tokens>`` (``min_swap_tokens``), ``+eager`` (cite from the first call),
    ``+tokens`` (``cache_aware=False``: swaps decided by tokens alone), ``+calls<n>``
    (``expected_calls``),
    ``+all_tools`` (every memory tool on every call), ``+single`` (one ``memory`` tool).

    Raises:
        ValueError: if ``name`` is not such a label.
    """
    found = _LABEL.match(name.strip())
    if not found:
        raise ValueError(
            f"unknown policy {name!r}; use full_once, keep_last_<k> or always_cite, "
            "optionally +batch<tokens>, +eager, +tokens, +calls<n>, +all_tools, +single"
        )
    kind, k, modifiers = found.groups()
    args: dict[str, Any] = {"kind": kind if k is None else "keep_last_k"}
    if k is not None:
        args["k"] = int(k)
    parts = [part for part in modifiers.split("+") if part]
    for part in parts:
        if part.startswith("batch"):
            args["min_swap_tokens"] = int(part[5:])
        elif part == "eager":
            args["start"] = "first_call"
        elif part == "tokens":
            args["cache_aware"] = False
        elif part.startswith("calls"):
            args["expected_calls"] = int(part[5:])
    offer = ToolOffer(mode="all") if "all_tools" in parts else ToolOffer()
    return ReplayStrategy(PresentationPolicy(**args), offer, "single" if "single" in parts else "separate")


def parse_policy(name: str) -> PresentationPolicy:
    """The presentation policy of :func:`parse_strategy` (for callers that need only the policy)."""
    return parse_strategy(name).policy
