"""CitationBuilder with the installed plugins, on real tool results and pages."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agent_memory import ItemMetadata, MemoryItem
from agent_memory.models.items import content_to_bytes
from agent_memory.plugins import PluginRegistry
from agent_memory.presentation.citations import MIN_KEY_TOKENS, VALUES_LABEL, Citation, CitationBuilder
from agent_memory.tokens import TiktokenCounter
from agent_memory.transforms import raw_text, readable_text

COUNTER = TiktokenCounter()


def make_item(content: Any, n: int = 1, type: str = "action_result", **meta: Any) -> MemoryItem:  # noqa: A002
    _, encoding = content_to_bytes(content)
    tokens = COUNTER.count(raw_text(content, encoding))
    item = MemoryItem(id=f"mem_{n:012x}", type=type, content=content,
                      metadata=ItemMetadata(content_encoding=encoding, tokens=tokens, **meta))
    readable, _ = readable_text(item)
    if readable != raw_text(content, encoding):  # as AgentMemory.store records an HTML page
        item = item.model_copy(update={"metadata": item.metadata.model_copy(
            update={"text_tokens": COUNTER.count(readable)})})
    return item


@pytest.fixture(scope="module")
def builder() -> CitationBuilder:
    return CitationBuilder(PluginRegistry.from_entry_points(), COUNTER)


@pytest.fixture(scope="module")
def real_items(data_dir: Path) -> list[MemoryItem]:
    """Real results of every kind: tau-bench tool results, SWE-agent observations, Chinook rows,
    readability pages."""
    items: list[MemoryItem] = []
    for path in sorted((data_dir / "traces" / "tau_bench").glob("*.json")):
        for run in json.loads(path.read_text(encoding="utf-8"))[:20]:
            items.extend(make_item(m["content"], len(items), source=m["name"])
                         for m in run["traj"] if m.get("role") == "tool")
    for path in sorted((data_dir / "traces" / "swe_agent").glob("*.traj"))[:6]:
        for step in json.loads(path.read_text(encoding="utf-8")).get("trajectory", []):
            items.append(make_item(step["observation"], len(items), source=step["action"].strip()[:80]))
    db = sqlite3.connect(f"file:{next((data_dir / 'sqlite').glob('*.sqlite'))}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    for sql in ("SELECT * FROM Track LIMIT 200", "SELECT * FROM Customer", "SELECT * FROM Genre"):
        items.append(make_item([dict(r) for r in db.execute(sql)], len(items), type="database_result", source=sql))
    for page in sorted((data_dir / "webpages" / "readability").glob("*/source.html"))[::8]:
        html = page.read_text(encoding="utf-8")
        items.append(make_item(html, len(items), type="web_content", media_type="text/html",
                               source=f"https://example.org/{page.parent.name}/" + "very-long-path/" * 8))
    return items


def test_small_items_get_header_only(builder: CitationBuilder) -> None:
    item = make_item('{"status": "ok"}', source="cancel_reservation")
    citation = builder.cite(item)
    assert citation.key_content == "" and citation.plugin is None
    rendered = citation.render()
    assert rendered == f'[cancel_reservation · {item.metadata.tokens:,} tokens · retrieve_memory(id="{item.id}")]'
    assert COUNTER.count(rendered) <= 25


def test_cap_never_exceeded_and_citation_names_the_way_back(builder: CitationBuilder,
                                                             real_items: list[MemoryItem]) -> None:
    with_key = 0
    for item in real_items:
        citation = builder.cite(item)
        rendered = citation.render()
        assert COUNTER.count(rendered) <= builder.max_tokens, rendered
        assert item.id in rendered and f'retrieve_memory(id="{item.id}")' in rendered
        assert "<p" not in rendered and "<div" not in rendered
        size = item.metadata.text_tokens if item.metadata.text_tokens is not None else item.metadata.tokens
        if size * builder.key_share < MIN_KEY_TOKENS:
            assert citation.key_content == ""
        else:
            with_key += bool(citation.key_content)
            # the key content follows the item's size: about a tenth of it, never more
            assert COUNTER.count(citation.key_content) <= max(MIN_KEY_TOKENS, int(size * builder.key_share))
    assert with_key > 50


@pytest.mark.parametrize("cap", [40, 60, 100])
def test_smaller_caps_hold(real_items: list[MemoryItem], cap: int) -> None:
    builder = CitationBuilder(PluginRegistry.from_entry_points(), COUNTER, max_tokens=cap, key_share=0.5)
    for item in real_items[::3]:
        assert COUNTER.count(builder.cite(item).render()) <= max(cap, COUNTER.count(builder.header(item).render()))


def test_key_content_given_by_an_llm_is_capped(builder: CitationBuilder) -> None:
    item = make_item("word " * 2_000, source="llm_test")
    citation = builder.cite(item, key_content="summary " * 500, plugin="llm")
    assert citation.plugin == "llm" and citation.key_content.endswith("…")
    assert COUNTER.count(citation.render()) <= builder.max_tokens


def test_citation_of_a_web_page_shows_title_and_lead(builder: CitationBuilder, data_dir: Path) -> None:
    page = next(iter(sorted((data_dir / "webpages" / "readability").glob("*/source.html"))))
    item = make_item(page.read_text(encoding="utf-8"), type="web_content", media_type="text/html",
                     source="https://hacks.mozilla.org/2015/03/this-api-is-so-fetching/")
    citation = builder.cite(item)
    assert citation.plugin == "web_page"
    expected = json.loads((page.parent / "expected-metadata.json").read_text(encoding="utf-8"))
    assert citation.key_content.startswith(expected["title"])


def test_a_web_pages_key_values_come_from_its_text_not_its_markup(builder: CitationBuilder, data_dir: Path) -> None:
    html = (data_dir / "webpages" / "readability" / "002" / "source.html").read_text(encoding="utf-8")
    item = make_item(html, type="web_content", media_type="text/html", source="https://example.org/fetch-api")
    values = next(line for line in builder.cite(item).key_content.splitlines() if line.startswith(VALUES_LABEL))
    text = readable_text(item)[0]
    for markup in ("OpenGraph", "MSSmartTagsPreventParsing", "html5shiv.googlecode.com", "ie7.css"):
        assert markup in html and markup not in text and markup not in values
    assert "reqHeaders" in values  # the article's own code


def test_citation_is_a_frozen_model() -> None:
    citation = Citation(item_id="mem_000000000001", type="custom", source="agent", tokens=5)
    with pytest.raises(ValueError):
        citation.tokens = 6  # type: ignore[misc]
    assert citation.render() == '[agent · 5 tokens · retrieve_memory(id="mem_000000000001")]'


@pytest.mark.parametrize("enough", [1, 40, 700, 5_000, 10**9])
def test_a_json_results_first_values_are_read_from_as_much_of_it_as_they_need(enough: int) -> None:
    # written lazily, the compact JSON's values are those of the whole text, in order, cut alike
    from agent_memory.presentation import citations as citations_module
    from agent_memory.presentation.key_values import values_in

    rows = [{"order_id": f"ORD{n:06d}", "note": "plain words " * (n % 7), "sku": f"sku_{n}x",
             "amount": n * 1.25, "when": f"2024-05-{n % 28 + 1:02d}"} for n in range(3_000)]
    item = MemoryItem(id="mem_0000000000b2", type="database_result", content=rows,
                      metadata=ItemMetadata(content_encoding="json"))
    whole = json.dumps(rows, ensure_ascii=False)
    assert citations_module._first_values(item, enough) == values_in(whole, max_chars=enough)
    # the text a caller already wrote, indented as a first showing has it, holds the same values
    indented = json.dumps(rows, ensure_ascii=False, indent=2)
    assert citations_module._first_values(item, enough, indented) == values_in(whole, max_chars=enough)
