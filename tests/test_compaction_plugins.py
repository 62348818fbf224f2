"""The built-in compaction plugins on real pages and tool outputs, and the plugin registry."""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_memory import ItemMetadata, MemoryItem
from agent_memory.errors import ConfigurationError
from agent_memory.models.items import content_to_bytes
from agent_memory.plugins import PluginRegistry
from agent_memory.tokens import TiktokenCounter
from agent_memory.transforms import raw_text
from compaction_plugins import (
    DatabaseResultPlugin,
    JsonDocumentPlugin,
    SearchResultsPlugin,
    TextPlugin,
    WebPagePlugin,
)

COUNTER = TiktokenCounter()
BUDGETS = (12, 24, 60)
"""Key-content budgets in tokens: what 120-, 240- and 600-token results get under the 10% share."""
BUILTINS = ["web_page", "search_results", "database_result", "json_document", "text"]


def make_item(content: Any, type: str = "action_result", **meta: Any) -> MemoryItem:  # noqa: A002
    _, encoding = content_to_bytes(content)
    tokens = COUNTER.count(raw_text(content, encoding))
    return MemoryItem(id="mem_0000000000a1", type=type, content=content,
                      metadata=ItemMetadata(content_encoding=encoding, tokens=tokens, **meta))


def norm(text: str | None) -> str:
    return re.sub(r"\W+", " ", (text or "").lower()).strip()


@pytest.fixture(scope="module")
def registry() -> PluginRegistry:
    return PluginRegistry.from_entry_points()


def check_budgets(plugin: Any, item: MemoryItem) -> list[str]:
    """Key content at each budget: within it, non-empty, and never growing less informative."""
    outs = []
    for budget in BUDGETS:
        text = plugin.key_content(item, max_tokens=budget, counter=COUNTER)
        assert text.strip(), (plugin.name, budget)
        assert COUNTER.count(text) <= budget, (plugin.name, budget, text)
        outs.append(text)
    summary = plugin.summary(item, max_tokens=300, counter=COUNTER)
    assert summary.strip() and COUNTER.count(summary) <= 300
    return outs


# -- web pages -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def readability_pages(data_dir: Path) -> list[Path]:
    pages = sorted(p for p in (data_dir / "webpages" / "readability").glob("*/") if (p / "source.html").is_file())
    assert len(pages) >= 20
    return pages[::4]  # every fourth page: ~24 real pages keep the test fast


def test_web_page_title_and_no_markup(readability_pages: list[Path], registry: PluginRegistry) -> None:
    plugin = WebPagePlugin()
    matched = 0
    for page in readability_pages:
        html = (page / "source.html").read_text(encoding="utf-8")
        expected = json.loads((page / "expected-metadata.json").read_text(encoding="utf-8"))
        item = make_item(html, type="web_content", media_type="text/html", source=f"https://example.org/{page.name}")
        assert registry.for_item(item).name == "web_page"
        for text in check_budgets(plugin, item):
            assert not re.search(r"<[a-zA-Z/!][^>]*>", text), (page.name, text)
        key = plugin.key_content(item, max_tokens=60, counter=COUNTER)
        matched += norm(expected.get("title")) != "" and norm(expected["title"]) in norm(key)
    assert matched >= 0.6 * len(readability_pages), f"title found in {matched}/{len(readability_pages)} citations"


def test_web_page_title_equals_expected_for_most_pages(readability_pages: list[Path]) -> None:
    from agent_memory.html import extract_page
    from compaction_plugins.web_page import page_title

    same = 0
    for page in readability_pages:
        html = (page / "source.html").read_text(encoding="utf-8")
        expected = json.loads((page / "expected-metadata.json").read_text(encoding="utf-8"))["title"]
        same += norm(page_title(html, extract_page(html))) == norm(expected)
    assert same >= 0.6 * len(readability_pages), f"{same}/{len(readability_pages)}"


def test_web_page_sniffed_without_type_and_title_not_repeated(readability_pages: list[Path]) -> None:
    html = (readability_pages[0] / "source.html").read_text(encoding="utf-8")
    plugin = WebPagePlugin()
    item = make_item(html)  # action_result, no media type: sniffed
    assert plugin.matches(item)
    key = plugin.key_content(item, max_tokens=40, counter=COUNTER)
    titled = make_item(html, title=key.split(" · ")[0].split(": ")[0])
    assert not plugin.key_content(titled, max_tokens=40, counter=COUNTER).startswith(titled.metadata.title)
    summary = plugin.summary(item, max_tokens=200, counter=COUNTER)
    assert summary.startswith("Title: ") and "<" not in summary


def test_web_content_that_is_plain_text() -> None:
    item = make_item("Paris is the capital of France. It has 2.1 million inhabitants.", type="web_content")
    text = WebPagePlugin().key_content(item, max_tokens=12, counter=COUNTER)
    assert text.startswith("Paris is the capital") and COUNTER.count(text) <= 12


# -- database results ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def chinook(data_dir: Path) -> sqlite3.Connection:
    path = next((data_dir / "sqlite").glob("*.sqlite"))
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    return db


def test_database_result_on_chinook_rows(chinook: sqlite3.Connection, registry: PluginRegistry) -> None:
    rows = [dict(r) for r in chinook.execute("SELECT * FROM Track WHERE AlbumId <= 20 ORDER BY TrackId")]
    item = make_item(rows, type="database_result", source="sql")
    assert registry.for_item(item).name == "database_result"
    plugin = DatabaseResultPlugin()
    small, _, large = check_budgets(plugin, item)
    assert small.startswith(f"{len(rows)} rows × 9 cols")
    assert "TrackId 1–" in large and "For Those About To Rock" in large
    summary = plugin.summary(item, max_tokens=400, counter=COUNTER)
    lo = min(r["Milliseconds"] for r in rows)
    hi = max(r["Milliseconds"] for r in rows)
    assert f"Milliseconds: {lo} – {hi}" in summary
    assert "UnitPrice: 0.99 – 1.99" in summary or "UnitPrice" in summary


def test_database_result_columns_rows_and_text_table(chinook: sqlite3.Connection) -> None:
    cursor = chinook.execute("SELECT g.Name, COUNT(*) AS Tracks FROM Track t JOIN Genre g USING (GenreId) "
                             "GROUP BY g.Name ORDER BY Tracks DESC")
    columns = [d[0] for d in cursor.description]
    rows = [list(r) for r in cursor]
    plugin = DatabaseResultPlugin()
    table = make_item({"columns": columns, "rows": rows})  # sniffed: not typed database_result
    assert plugin.matches(table)
    key = plugin.key_content(table, max_tokens=60, counter=COUNTER)
    assert key.startswith(f"{len(rows)} rows × 2 cols: Name, Tracks {rows[-1][1]}–{rows[0][1]}") and "Rock" in key
    csv_text = "\n".join([",".join(columns)] + [f"{name},{n}" for name, n in rows])
    assert not plugin.matches(make_item(csv_text))  # text tables only when declared
    typed = make_item(csv_text, type="database_result")
    assert plugin.matches(typed)
    assert plugin.key_content(typed, max_tokens=60, counter=COUNTER).startswith(f"{len(rows)} rows × 2 cols")


def tau_tool_results(data_dir: Path) -> list[dict[str, Any]]:
    results = []
    for path in sorted((data_dir / "traces" / "tau_bench").glob("*.json")):
        for run in json.loads(path.read_text(encoding="utf-8")):
            results.extend(m for m in run.get("traj", []) if m.get("role") == "tool")
    return results


def test_tau_bench_tool_results(data_dir: Path, registry: PluginRegistry) -> None:
    results = tau_tool_results(data_dir)
    assert len(results) > 500
    chosen: dict[str, str] = {}
    for message in results[:400]:
        item = make_item(message["content"], source=message["name"])  # JSON as text, as tools return it
        plugin = registry.for_item(item)
        chosen.setdefault(message["name"], plugin.name)
        if item.metadata.tokens >= 120:
            for budget in BUDGETS:
                text = plugin.key_content(item, max_tokens=budget, counter=COUNTER)
                assert text and COUNTER.count(text) <= budget
    assert chosen["search_direct_flight"] == "database_result"
    assert chosen["get_reservation_details"] == "json_document"
    assert chosen["get_user_details"] == "json_document"
    flights = next(m for m in results if m["name"] == "search_direct_flight" and m["content"].startswith("[{"))
    key = DatabaseResultPlugin().key_content(make_item(flights["content"]), max_tokens=60, counter=COUNTER)
    assert "flight_number" in key and json.loads(flights["content"])[0]["flight_number"] in key
    reservation = next(m for m in results if m["name"] == "get_reservation_details" and m["content"].startswith("{"))
    key = JsonDocumentPlugin().key_content(make_item(reservation["content"]), max_tokens=24, counter=COUNTER)
    assert f"reservation_id: {json.loads(reservation['content'])['reservation_id']}" in key


# -- JSON documents ------------------------------------------------------------------------------
def test_json_document_shape_and_samples(data_dir: Path) -> None:
    user = next(m for m in tau_tool_results(data_dir) if m["name"] == "get_user_details" and m["content"][0] == "{")
    data = json.loads(user["content"])
    plugin = JsonDocumentPlugin()
    for item in (make_item(data), make_item(user["content"], media_type="application/json")):
        assert plugin.matches(item)
        _, mid, large = check_budgets(plugin, item)
        assert f"email: {data['email']}" in mid
        assert "name: {first_name: " in large
        assert "reservations: [" in plugin.key_content(item, max_tokens=200, counter=COUNTER)
    summary = plugin.summary(make_item(data), max_tokens=300, counter=COUNTER)
    assert summary.startswith(f"object, {len(data)} keys") and data["email"] in summary
    assert not plugin.matches(make_item("Error: payment amount does not add up"))
    assert not plugin.matches(make_item("255.0"))


def test_json_list_of_lists_shows_first_object(data_dir: Path) -> None:
    onestop = next(m for m in tau_tool_results(data_dir) if m["name"] == "search_onestop_flight"
                   and m["content"].startswith("[["))
    key = JsonDocumentPlugin().key_content(make_item(onestop["content"]), max_tokens=60, counter=COUNTER)
    assert key.startswith(f"[{len(json.loads(onestop['content']))} × [") and "flight_number: HAT" in key


# -- search results ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def search_hits(data_dir: Path) -> list[dict[str, str]]:
    """A real search-result page: the 10 paragraphs of a HotpotQA question as ranked hits."""
    question = json.loads(next((data_dir / "hotpotqa").glob("*.json")).read_text(encoding="utf-8"))[0]
    return [{"title": title, "url": "https://en.wikipedia.org/wiki/" + title.replace(" ", "_"),
             "snippet": " ".join(sentences)} for title, sentences in question["context"]]


def test_search_results(search_hits: list[dict[str, str]], registry: PluginRegistry) -> None:
    plugin = SearchResultsPlugin()
    for content in (search_hits, {"results": search_hits}, json.dumps({"organic_results": search_hits})):
        item = make_item(content)  # sniffed, whatever the type
        assert registry.for_item(item).name == "search_results"
        small, _, large = check_budgets(plugin, item)
        assert small.startswith(f"{len(search_hits)} results: 1. ")
        assert f"1. {search_hits[0]['title']} (en.wikipedia.org/wiki/" in large
        assert large.index(search_hits[0]["title"]) < large.index(search_hits[1]["title"])
    summary = plugin.summary(make_item(search_hits), max_tokens=400, counter=COUNTER)
    assert search_hits[0]["url"] in summary and search_hits[0]["snippet"][:40] in summary
    text = "\n".join(f"{i}. {h['title']}\n{h['url']}\n{h['snippet']}" for i, h in enumerate(search_hits, 1))
    assert plugin.matches(make_item(text, type="search_results"))
    assert not plugin.matches(make_item(text))  # plain text is not sniffed as results
    assert not plugin.matches(make_item(search_hits[0]["snippet"], type="search_results"))


# -- text, code and shell output -----------------------------------------------------------------
def swe_observations(data_dir: Path) -> list[tuple[str, str]]:
    out = []
    for path in sorted((data_dir / "traces" / "swe_agent").glob("*.traj")):
        trajectory = json.loads(path.read_text(encoding="utf-8")).get("trajectory", [])
        out.extend((step["action"], step["observation"]) for step in trajectory if step.get("observation"))
    return out


def test_text_on_swe_agent_observations(data_dir: Path, registry: PluginRegistry) -> None:
    observations = swe_observations(data_dir)
    assert len(observations) > 50
    plugin = TextPlugin()
    checked = 0
    for action, observation in observations:
        item = make_item(observation, source=action.strip()[:60])
        if item.metadata.tokens < 120 or registry.for_item(item).name != "text":
            continue
        checked += 1
        outs = check_budgets(plugin, item)
        lines = observation.replace("\r\n", "\n").strip("\n").split("\n")
        nonblank = [line for line in lines if line.strip()]
        if len(nonblank) > 3 and sum(map(len, nonblank)) / len(nonblank) < 300:
            assert outs[-1].startswith(f"{len(lines)} lines"), outs[-1]
    assert checked > 20


def test_text_keeps_error_lines(data_dir: Path) -> None:
    with_traceback = [obs for _, obs in swe_observations(data_dir) if "Traceback (most recent call last)" in obs]
    assert with_traceback, "the SWE-agent traces hold Python tracebacks"
    plugin = TextPlugin()
    for observation in with_traceback:
        lines = [line.strip() for line in observation.replace("\r\n", "\n").split("\n")]
        final = [line for line in lines if re.match(r"^[\w.]*(Error|Exception)\b:?", line)]
        if not final:
            continue
        key = plugin.key_content(make_item(observation), max_tokens=60, counter=COUNTER)
        assert "error line" in key and final[-1][:40] in key, key
        summary = plugin.summary(make_item(observation), max_tokens=400, counter=COUNTER)
        assert final[-1][:40] in summary


def test_text_synthetic_shell_output() -> None:
    out = "\n".join([f"collecting test_{i}.py" for i in range(80)]
                    + ["FAILED tests/test_x.py::test_y - AssertionError: 1 != 2", "== 1 failed, 79 passed in 2.1s =="])
    key = TextPlugin().key_content(make_item(out), max_tokens=60, counter=COUNTER)
    assert key.startswith("82 lines, 1 error line:") and "FAILED tests/test_x.py::test_y" in key
    assert key.rstrip().endswith("2.1s ==") and COUNTER.count(key) <= 60
    tight = TextPlugin().key_content(make_item(out), max_tokens=24, counter=COUNTER)
    assert "FAILED" in tight and COUNTER.count(tight) <= 24


def test_text_binary_and_prose() -> None:
    blob = make_item(bytes(range(256)) * 4, type="file")
    assert TextPlugin().key_content(blob, max_tokens=12, counter=COUNTER) == "binary, 1,024 bytes"
    prose = make_item("Arthur's Magazine was an American literary periodical. It was published in Philadelphia.")
    assert TextPlugin().key_content(prose, max_tokens=14, counter=COUNTER) == "Arthur's Magazine was an American literary periodical."


# -- the registry --------------------------------------------------------------------------------
def test_entry_points_load_all_builtins_in_priority_order(registry: PluginRegistry) -> None:
    assert [p.name for p in registry.plugins] == BUILTINS
    assert [p.priority for p in registry.plugins] == sorted(p.priority for p in registry.plugins)
    assert registry.plugins[-1].priority == 1000


@dataclass(frozen=True)
class SniffCase:
    name: str
    content: Any
    type: str
    expected: str
    media_type: str | None = None


SNIFF_CASES = [
    SniffCase("html by sniffing", "<!DOCTYPE html><html><head><title>T</title></head><body><p>x</p></body></html>",
              "action_result", "web_page"),
    SniffCase("html by media type", "<p>hello</p>", "custom", "web_page", "text/html"),
    SniffCase("hits in JSON text", '[{"title": "A", "url": "https://a.org"}, {"title": "B", "link": "https://b.org"}]',
              "custom", "search_results"),
    SniffCase("rows", [{"id": 1, "name": "x"}, {"id": 2, "name": "y"}], "custom", "database_result"),
    SniffCase("columns and rows", {"columns": ["a"], "rows": [[1], [2]]}, "action_result", "database_result"),
    SniffCase("nested JSON", {"a": {"b": [1, 2]}}, "database_result", "json_document"),
    SniffCase("JSON scalar", 3.5, "custom", "json_document"),
    SniffCase("shell output", "$ ls\nREADME.md\nsetup.py", "database_result", "text"),
    SniffCase("text that only starts like JSON", "{not json", "custom", "text"),
]


@pytest.mark.parametrize("case", SNIFF_CASES, ids=lambda c: c.name)
def test_registry_picks_by_type_and_sniffing(case: SniffCase, registry: PluginRegistry) -> None:
    item = make_item(case.content, type=case.type, media_type=case.media_type)
    assert registry.for_item(item).name == case.expected


class ShoutingPages:
    """A third-party plugin that overrides the built-in web-page plugin by a lower priority."""

    name = "shouting_pages"
    priority = 5

    def matches(self, item: MemoryItem) -> bool:
        return item.type == "web_content"

    def key_content(self, item: MemoryItem, *, max_tokens: int, counter: Any) -> str:
        return "PAGE"

    def summary(self, item: MemoryItem, *, max_tokens: int, counter: Any) -> str:
        return "A PAGE"


def test_third_party_plugin_with_lower_priority_overrides(registry: PluginRegistry) -> None:
    custom = PluginRegistry(registry.plugins)
    custom.register(ShoutingPages())
    assert [p.name for p in custom.plugins][:2] == ["shouting_pages", "web_page"]
    page = make_item("<html><body><p>hi</p></body></html>", type="web_content")
    assert custom.for_item(page).name == "shouting_pages"
    assert custom.for_item(make_item("<html><body><p>hi</p></body></html>")).name == "web_page"
    with pytest.raises(ConfigurationError):
        custom.register(object())  # type: ignore[arg-type]


def test_agent_memory_does_not_import_compaction_plugins() -> None:
    root = Path(__file__).resolve().parent.parent / "agent_memory"
    offenders = [p.name for p in root.rglob("*.py") if re.search(r"^\s*(from|import) compaction_plugins",
                                                                  p.read_text(encoding="utf-8"), re.M)]
    assert offenders == []


def test_retrieve_summary_uses_the_matching_plugin(tmp_path: Path, chinook: sqlite3.Connection) -> None:
    from agent_memory import AgentMemory, MemoryConfig

    rows = [dict(r) for r in chinook.execute("SELECT * FROM Track LIMIT 40")]
    memory = AgentMemory("plugins", tmp_path, config=MemoryConfig(index_on_store=False))
    item_id = memory.store(rows, type="database_result", source="sql")
    result = memory.retrieve(item_id, "summary", max_tokens=400)
    assert result.content.startswith("40 rows × 9 columns")
    # an injected registry is used as given; none matching falls back to the extractive summary
    bare = AgentMemory("plugins", tmp_path, config=MemoryConfig(index_on_store=False), plugins=PluginRegistry())
    fallback = bare.retrieve(item_id, "summary", max_tokens=400)
    assert not fallback.content.startswith("40 rows") and fallback.content


def test_text_ignores_code_listings_and_terminal_codes() -> None:
    listing = "\n".join(["[File: /repo/fields.py (1997 lines total)]"]
                        + [f"{i}:        except (TypeError, ValueError) as error:" for i in range(1470, 1500)])
    assert TextPlugin().key_content(make_item(listing), max_tokens=40, counter=COUNTER).startswith("31 lines:\n")
    coloured = "\x1b[33;21mwarning: private key not set\x1b[0m\n" + "\n".join(f"step {i}" for i in range(40))
    key = TextPlugin().key_content(make_item(coloured), max_tokens=30, counter=COUNTER)
    assert "\x1b" not in key and "warning: private key not set" in key


def test_float_cells_are_rounded_for_display() -> None:
    rows = [{"Country": "USA", "Revenue": 523.0600000000003}, {"Country": "Canada", "Revenue": 303.96}]
    key = DatabaseResultPlugin().key_content(make_item(rows), max_tokens=40, counter=COUNTER)
    assert "Revenue 303.96–523.06" in key
