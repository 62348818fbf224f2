"""Citation: the compact stand-in for a result after its first showing (after MemberJunction's
compacted action results, github.com/MemberJunction/MJ).

A citation names the memory id, the type, the source (title / URL / tool), the size in tokens, the
key content a compaction plugin extracted, the result's key values (ids, dates, amounts: what models go
on to use, :mod:`~agent_memory.presentation.key_values`), and the exact memory-tool call that
brings more back.
Its size follows the result's: on public agent runs (tau-bench, SWE-agent trajectories, ReAct on
HotpotQA; o200k_base tokens) a 200-character citation (56-80 tokens) is longer than 21-47% of the
results it replaces, and a citation longer than ~10% of the result it replaces saves less than
simply dropping old results, so the key content gets ``key_share`` of the result's tokens, never
more than the hard cap ``max_tokens`` for the whole citation. Small results get a header-only
citation.
"""

from __future__ import annotations

import json
import logging
import re

from pydantic import BaseModel, ConfigDict

from agent_memory.index.chunking import indexable_text
from agent_memory.limits import shorten
from agent_memory.models.items import MemoryItem
from agent_memory.plugins import PluginRegistry
from agent_memory.records.prepare import readable_tokens
from agent_memory.presentation.key_values import values_in
from agent_memory.tokens import TokenCounter

__all__ = ["DEFAULT_CITATION_MAX_TOKENS", "DEFAULT_KEY_SHARE", "Citation", "CitationBuilder"]

DEFAULT_CITATION_MAX_TOKENS = 100
"""Hard cap of one rendered citation, in tokens (issue #3: "most under 100 tokens")."""

DEFAULT_KEY_SHARE = 0.08
"""Share of the result's tokens the key content may use (on the tau-bench, SWE-agent and
ReAct-HotpotQA runs, o200k_base: to stay within 10% of the 10-token citation's saving, a citation
must be about a tenth of the result it replaces)."""

LABEL_MAX_CHARS = 60
"""Title and source are cut to this many characters in a citation (the tool call with its full
arguments stands right before the result in the conversation)."""

logger = logging.getLogger(__name__)

MIN_KEY_TOKENS = 24
"""Below this budget the key content is left out (a header-only citation): with the default
share, results under 300 tokens are cited by their header alone."""


class Citation(BaseModel):
    """What the model sees of a stored result after its first showing."""

    model_config = ConfigDict(frozen=True)

    item_id: str
    """The memory id."""
    type: str
    """The item's type."""
    source: str
    """Where the result came from (tool name, URL)."""
    title: str | None = None
    """Title when known."""
    tokens: int
    """Size of the full result as the model would read it, in tokens."""
    tokens_estimated: bool = False
    """``tokens`` is an estimate (:func:`~agent_memory.tokens.estimate_tokens`: a large result
    not counted yet), shown as ``~N tokens`` with two significant digits."""
    key_content: str = ""
    """What the plugin (or LLM citation writer) found most useful; "" for a header-only citation."""
    plugin: str | None = None
    """Name of the plugin (or ``"llm"``) that made ``key_content``; ``None`` for header-only."""
    retrieve_call: str = "retrieve_memory"
    """Name of the tool call that brings the result back (``memory`` in the one-tool form)."""

    def render(self) -> str:
        """The citation as the model reads it: one bracketed line that names the source, the
        size and the exact call that brings the result back (the id appears once, inside the
        call), then the key content if any. A header-only citation costs ~20 tokens."""
        if self.title and self.source not in ("agent", "user", "") and self.source not in self.title:
            label = f"{self.title} ({self.source})"
        else:
            label = self.title or self.source or self.type
        size = f"~{float(f'{self.tokens:.2g}'):,.0f}" if self.tokens_estimated else f"{self.tokens:,}"
        head = f'[{label} · {size} tokens · {self.retrieve_call}(id="{self.item_id}")]'
        return f"{head}\n{self.key_content}" if self.key_content else head


VALUES_LABEL = "values: "
"""Starts the line of a citation that carries the result's key values."""

VALUE_CHARS_PER_TOKEN = 16
"""Characters of a line of key values that one token holds at most, for reading only as many
values of a large result as its line can show (o200k: 3-6 characters a token on ids and dates)."""

VALUES_SHARE = 0.5
"""Share of the key-content budget the key values may take when the result has some (the plugin's
key content gets the rest): what a model goes on to use from a cited result is mostly its ids,
dates and amounts (:mod:`~agent_memory.presentation.key_values`)."""


def _first_values(item: MemoryItem, enough: int, json_text: str | None = None) -> list[str]:
    """The key values of the text ``item`` is indexed as (compact JSON for JSON content), in order,
    until they fill ``enough`` characters. ``json_text``: JSON content already written as text by
    the caller (compact or indented: whitespace separates no value, so both hold the same values
    in the same order), read as far as the values reach; ``None``: the JSON is written lazily,
    chunk by chunk, only as far as those values reach (a 2 MB query result's first values are in
    its first kilobytes)."""
    if item.metadata.content_encoding != "json":
        return values_in(indexable_text(item, item.content, json_format="compact"), max_chars=enough)
    if json_text is not None:
        return values_in(json_text, max_chars=enough)
    parts: list[str] = []
    length, look_at = 0, enough * FIRST_VALUES_READ_AHEAD
    for chunk in _CHUNKED_JSON.iterencode(item.content):
        parts.append(chunk)
        length += len(chunk)
        if length >= look_at:
            text = "".join(parts)
            whole = _LAST_TOKEN.search(text)  # a token the head may cut is left out
            found = values_in(text[: whole.start() if whole else len(text)], max_chars=enough)
            if len(" ".join(found)) >= enough:
                return found
            look_at *= 2  # sparser values: read as far again
    return values_in("".join(parts), max_chars=enough)


_LAST_TOKEN = re.compile(r"[A-Za-z0-9_.\-]+\Z")
FIRST_VALUES_READ_AHEAD = 4
"""Characters of JSON read per character of values wanted, before looking for them (and again
each time as many more are read)."""

_CHUNKED_JSON = json.JSONEncoder(ensure_ascii=False)
"""``json.dumps``' compact text (default separators), written piece by piece by ``iterencode``."""


class CitationBuilder:
    """Makes citations with the plugins of a registry.

    Args:
        registry: compaction plugins; the first that matches an item makes its key content.
        counter: counts tokens.
        max_tokens: hard cap of a rendered citation, in tokens.
        key_share: share of the item's tokens the key content may use.
        retrieve_call: the tool name citations tell the model to call (``retrieve_memory``, or
            ``memory`` for the one-tool form).
    """

    def __init__(
        self,
        registry: PluginRegistry,
        counter: TokenCounter,
        *,
        max_tokens: int = DEFAULT_CITATION_MAX_TOKENS,
        key_share: float = DEFAULT_KEY_SHARE,
        retrieve_call: str = "retrieve_memory",
    ) -> None:
        self.registry = registry
        self.counter = counter
        self.max_tokens = max_tokens
        self.key_share = key_share
        self.retrieve_call = retrieve_call

    def header(self, item: MemoryItem, *, tokens: tuple[int, bool] | None = None) -> Citation:
        """The header-only citation of ``item``; ``tokens``: its readable tokens and whether they
        are estimated, when the caller knows them (``None``: :func:`readable_tokens`)."""
        meta = item.metadata
        source = shorten(meta.source, LABEL_MAX_CHARS)
        title = shorten(meta.title, LABEL_MAX_CHARS) if meta.title else meta.title
        size, estimated = tokens if tokens is not None else readable_tokens(item, self.counter)
        return Citation(item_id=item.id, type=item.type, source=source, title=title, tokens=size,
                        tokens_estimated=estimated, retrieve_call=self.retrieve_call)

    def _with_values(self, item: MemoryItem, key_content: str, budget: int, json_text: str | None = None) -> str:
        """``key_content`` within ``budget`` tokens, followed by a line of the result's key values
        it does not already show (as many as fit in :data:`VALUES_SHARE` of the budget, in order
        of appearance). The values are read from the text the item is indexed as
        (:func:`~agent_memory.index.chunking.indexable_text`): an HTML page's main text, not its
        markup (a stylesheet's or a script's name is no value a model goes on to use); JSON as
        compact JSON (keys, not the paths of lines), or ``json_text`` when given (see
        :func:`_first_values`); nothing from binary content."""
        shown = set(values_in(key_content))
        room = int(budget * VALUES_SHARE) if key_content else budget
        # enough values to fill the room: a token holds at most a few characters of them
        enough = (room + len(shown)) * VALUE_CHARS_PER_TOKEN + len(" ".join(shown))
        values = [value for value in _first_values(item, enough, json_text) if value not in shown]
        if not values:
            return shorten(key_content, budget, counter=self.counter)
        line = VALUES_LABEL + " ".join(values)
        if self.counter.count(line) > room:
            line = shorten(line, room, counter=self.counter)
        head = shorten(key_content, budget - self.counter.count(line) - 1, counter=self.counter) if key_content else ""
        return f"{head}\n{line}" if head else line

    def cite(self, item: MemoryItem, *, key_content: str | None = None, plugin: str | None = None,
             tokens: tuple[int, bool] | None = None, json_text: str | None = None) -> Citation:
        """A citation of ``item``, within ``max_tokens``.

        Args:
            item: the stored result.
            key_content: key content made elsewhere (the LLM citation writer); ``None``: the plugin's.
            plugin: name to record with ``key_content``.
            tokens: see :meth:`header`.
            json_text: JSON content as text when the caller has written it already (compact or
                indented, ``json``'s text): its key values are read from it; ``None``: written
                here as far as they reach. Ignored for other content.
        """
        base = self.header(item, tokens=tokens)
        room = self.max_tokens - self.counter.count(base.render())
        budget = min(room, int(base.tokens * self.key_share))
        if budget < MIN_KEY_TOKENS:
            return base
        if key_content is None:
            chosen = self.registry.for_item(item)
            if chosen is None:
                key_content, plugin = self._with_values(item, "", budget, json_text), None
                return base.model_copy(update={"key_content": key_content}) if key_content else base
            try:
                key_content, plugin = chosen.key_content(item, max_tokens=budget, counter=self.counter), chosen.name
            except Exception as exc:  # noqa: BLE001 - a faulty plugin must not break the agent
                logger.warning("compaction plugin %s failed on %s, citing by header: %r", chosen.name, item.id, exc)
                return base
            if not isinstance(key_content, str):
                logger.warning("compaction plugin %s gave %s for %s, citing by header", chosen.name,
                               type(key_content).__name__, item.id)
                return base
        key_content = self._with_values(item, key_content.strip(), budget, json_text)
        while key_content:  # the layout's separators and the "…" can add a token or two: shrink
            cited = base.model_copy(update={"key_content": key_content, "plugin": plugin})
            over = self.counter.count(cited.render()) - self.max_tokens
            if over <= 0:
                return cited
            budget -= over
            key_content = shorten(key_content, budget, counter=self.counter) if budget >= MIN_KEY_TOKENS else ""
        return base

