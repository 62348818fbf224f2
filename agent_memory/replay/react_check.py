"""The ReAct retrievability check: Query Memory with each run's question finds the observation
that holds its final answer (``agent-memory replay`` on ReAct HotpotQA runs)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from agent_memory.config import MAX_QUERY_LIMIT, MemoryConfig
from agent_memory.memory import AgentMemory
from agent_memory.replay.loaders import ReplayRun
from agent_memory.tokens import TokenCounter

__all__ = ["QUERY_TOP_K", "AnsweredRun", "ReactCheck", "react_query_check"]

QUERY_TOP_K = 5
"""ReAct check: the answer-bearing observation must be among this many query hits."""


class AnsweredRun(Protocol):
    """What the check reads of a replayed run (a :class:`~agent_memory.replay.engine.RunResult`):
    the observations that hold the run's final answer."""

    @property
    def answer_observations(self) -> list[str]: ...


@dataclass
class ReactCheck:
    """Query Memory with a ReAct run's question: is an answer-bearing observation in the top 5?"""

    runs_checked: int = 0
    """Runs whose final answer occurs in one of their observations."""
    hits_in_run: int = 0
    """Checked runs where one is in the top 5 of the ranking restricted to the run's own observations."""
    hits_pooled: int = 0
    """Checked runs where a query over the pooled observations of every run found one in its top 5."""
    pooled_items: int = 0
    """Distinct observations in the pooled memory."""
    misses: list[str] = field(default_factory=list)
    """Run ids missed by the pooled query."""


def react_query_check(
    results: Sequence[AnsweredRun],
    runs: Sequence[ReplayRun],
    *,
    workdir: str | Path,
    counter: TokenCounter | None = None,
    top_k: int = QUERY_TOP_K,
) -> ReactCheck:
    """Store every distinct observation of the runs that have a question in one memory (tagged with
    the runs that saw it), index once, and query with each checkable run's question (once per
    distinct question, ``MAX_QUERY_LIMIT`` hits). Pooled: the top ``top_k`` over every run's
    observations (other runs' pages compete). In run: the same ranking restricted to the run's own
    observations (nearly always a hit: a run has a handful of observations)."""
    check = ReactCheck()
    wanted = [(run, result) for run, result in zip(runs, results) if run.question and result.answer_observations]
    if not wanted:
        return check
    tags_of: dict[str, set[str]] = {}
    for run in runs:
        if not run.question:
            continue
        for message in run.messages:
            if message.role == "tool" and message.name != "Finish" and message.content:
                tags_of.setdefault(message.content, set()).add(run.run_id)
    memory = AgentMemory("react-check", Path(workdir) / "react-memory",
                         config=MemoryConfig(index_on_store=False), token_counter=counter)
    contents = list(tags_of)
    ids = memory.store_many(
        {"content": text, "type": "web_content", "media_type": "text/plain", "source": "wikipedia",
         "tags": sorted(tags_of[text])}
        for text in contents
    )
    content_of = dict(zip(ids, contents))
    memory.flush_index()
    check.pooled_items = len(ids)
    ranked: dict[str, list[str]] = {}
    for run, result in wanted:
        question = run.question
        assert question is not None  # wanted holds only runs with a question
        if question not in ranked:  # the same question recurs across trials: encode it once
            hits = memory.query(text=question, limit=MAX_QUERY_LIMIT)
            ranked[question] = [hit.item.id for hit in hits]
        order = ranked[question]
        answers = set(result.answer_observations)
        check.runs_checked += 1
        own = [item_id for item_id in order if run.run_id in tags_of[content_of[item_id]]]
        if any(content_of[item_id] in answers for item_id in own[:top_k]):
            check.hits_in_run += 1
        if any(content_of[item_id] in answers for item_id in order[:top_k]):
            check.hits_pooled += 1
        else:
            check.misses.append(run.run_id)
    return check


