"""One conformance suite for AgentMemory, run against every index backend.

Every test takes the ``memory`` fixture, which is parametrized over the embedded Chroma index and
a real ``chroma run`` server on loopback (tests/conftest.py), with the real embedding model. A
backend conforms when every test passes on it. Cases are tables of frozen dataclasses.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from memory_helpers import TOPICS, blob_bytes, blob_files, day

from agent_memory.index.embedding import index_embedder
from agent_memory import AgentMemory, ItemNotFoundError, MemoryCriteria
from agent_memory.errors import InvalidIdError
from agent_memory.limits import MAX_QUERY_CHARS
from agent_memory.models.items import MemoryType

# -- round trips ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoundTrip:
    name: str
    content: Any
    encoding: str

    @property
    def blob(self) -> bytes:
        return blob_bytes(self.content)


ROUND_TRIPS = [
    RoundTrip("ascii-text", "The quick brown fox jumps over the lazy dog.", "text"),
    RoundTrip("unicode-text", "naïve café – Zürich 東京 שלום 🚀\nsecond line\r\nthird\ttabbed", "text"),
    RoundTrip("padded-text", "  \n padded, whitespace kept \t\n\n", "text"),  # blank content is refused (issue 20)
    RoundTrip("utf8-bytes", "héllo wörld".encode(), "bytes"),
    RoundTrip("non-utf8-bytes", bytes(range(256)) + b"\xff\xfe\x00\xc3\x28", "bytes"),
    RoundTrip("png-header-bytes", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64), "bytes"),
    RoundTrip("json-dict", {"b": 1, "a": [1, 2.5, None, True, False], "c": "x"}, "json"),
    RoundTrip("json-list", [1, "two", {"three": 3}, [], {}], "json"),
    RoundTrip("json-nested", {"l1": {"l2": {"l3": [{"x": [1, [2, [3, {"deep": "yes"}]]]}]}}}, "json"),
    RoundTrip("json-unicode", {"名前": "東京", "emoji": "🚀", "rtl": "שלום", "esc": 'quote" back\\slash'}, "json"),
    RoundTrip("json-number", 42, "json"),
    RoundTrip("json-rows", [{"id": i, "name": f"row {i}", "score": i / 3} for i in range(50)], "json"),
]


@pytest.mark.parametrize("case", ROUND_TRIPS, ids=lambda c: c.name)
def test_round_trip(memory: AgentMemory, case: RoundTrip) -> None:
    item_id = memory.store(case.content, source="unit-test")

    for reader in (memory, AgentMemory(memory.agent_id, memory.memory_dir, config=memory.config)):
        item = reader.get(item_id)
        assert item.content == case.content
        assert type(item.content) is type(case.content)  # JSON is given back as data, not str()-ed
        assert item.metadata.content_encoding == case.encoding
    blob = memory.path / "content" / hashlib.sha256(case.blob).hexdigest()
    assert blob.read_bytes() == case.blob


def test_non_utf8_bytes_are_retrieved_as_base64(memory: AgentMemory) -> None:
    import base64

    data = bytes(range(256))
    item_id = memory.store(data, type="file", source="upload.bin")

    result = memory.retrieve(item_id)

    assert base64.b64decode("".join(result.content.split())) == data
    assert result.notes  # says that binary content is shown as base64


def test_json_is_retrieved_as_readable_text(memory: AgentMemory) -> None:
    item_id = memory.store({"city": "Paris", "population": 2_102_650}, type="database_result")

    text = memory.retrieve(item_id).content

    assert json.loads(text) == {"city": "Paris", "population": 2_102_650}


@pytest.mark.parametrize(
    "bad",
    [object(), {"x": float("nan")}, {1j: 2}, {"s": {1, 2}}],
    ids=["object", "nan", "complex-key", "set-value"],
)
def test_content_that_is_not_json_able_is_refused(memory: AgentMemory, bad: Any) -> None:
    with pytest.raises(TypeError):
        memory.store(bad)
    assert len(memory) == 0
    assert blob_files(memory) == []


# -- metadata ------------------------------------------------------------------------------------


def test_metadata_is_computed_and_normalised(memory: AgentMemory) -> None:
    parent = memory.store("parent item")
    item_id = memory.store(
        "hello world",
        type="action_result",
        source="unit-tool",
        tags=["Web", " web ", "Research", "", "  "],
        related_to=[f"  {parent} "],
        title="A title",
        media_type="text/plain",
        extra={"args": {"q": "x"}, "status": 200},
        timestamp=day(3),
    )

    meta = memory.get(item_id).metadata
    assert meta.size_bytes == 11
    assert meta.tokens == 2  # o200k_base: "hello", " world"
    assert meta.content_sha256 == hashlib.sha256(b"hello world").hexdigest()
    assert meta.tags == ("research", "web")
    assert meta.related_to == (parent,)
    assert (meta.source, meta.title, meta.media_type) == ("unit-tool", "A title", "text/plain")
    assert meta.extra == {"args": {"q": "x"}, "status": 200}
    assert meta.timestamp == day(3)
    assert memory.get(item_id).type == "action_result"


def test_size_and_tokens_of_json_and_bytes(memory: AgentMemory) -> None:
    data = {"b": 1, "a": "é"}
    json_id = memory.store(data)
    bytes_id = memory.store(b"\x00\x01\x02")

    assert memory.get(json_id).metadata.size_bytes == len('{"a":"é","b":1}'.encode())
    assert memory.get(json_id).metadata.tokens > 0
    assert memory.get(bytes_id).metadata.size_bytes == 3


def test_default_timestamps_increase_and_are_utc(memory: AgentMemory) -> None:
    before = datetime.now(UTC)
    first = memory.store("one")
    second = memory.store("two")
    after = datetime.now(UTC)

    t1, t2 = (memory.get(i).metadata.timestamp for i in (first, second))
    assert before <= t1 <= t2 <= after
    assert t1.utcoffset() == timedelta(0)


def test_related_to_must_exist(memory: AgentMemory) -> None:
    real = memory.store("exists")

    with pytest.raises(ItemNotFoundError):
        memory.store("dangling", related_to=[real, "mem_000000000000"])
    with pytest.raises(InvalidIdError):
        memory.store("malformed", related_to=["not-an-id"])

    assert [r.id for r in memory.records()] == [real]
    assert [h.item.id for h in memory.query()] == [real]


# -- dedupe --------------------------------------------------------------------------------------


def test_identical_content_is_stored_once(memory: AgentMemory) -> None:
    text = "The same search result, fetched twice by the agent."
    first = memory.store(text, source="search")
    second = memory.store(text, source="search-again", tags=["retry"])
    json_a = memory.store({"k": 1, "j": 2})
    json_b = memory.store({"k": 1, "j": 2})  # the same data in the same order: one blob
    json_c = memory.store({"j": 2, "k": 1})  # key order is kept (issue 20), so another blob

    assert first != second and json_a != json_b
    assert len(memory) == 5
    assert [p.name for p in blob_files(memory)] == sorted(
        {hashlib.sha256(text.encode()).hexdigest(), hashlib.sha256(b'{"k":1,"j":2}').hexdigest(),
         hashlib.sha256(b'{"j":2,"k":1}').hexdigest()}
    )
    assert memory.get(first).content == memory.get(second).content == text
    assert memory.get(second).metadata.source == "search-again"
    assert list(memory.get(json_b).content) == ["k", "j"] and list(memory.get(json_c).content) == ["j", "k"]


# -- query by text -------------------------------------------------------------------------------



@dataclass(frozen=True)
class QueryCase:
    question: str
    expected: str


QUERY_CASES = [
    QueryCase("how do plants make sugar from light", "photosynthesis"),
    QueryCase("which financial collapse led to the Great Depression", "crash"),
    QueryCase("ancient city destroyed by a volcanic eruption", "vesuvius"),
    QueryCase("who designed the iron tower in Paris", "eiffel"),
    QueryCase("programming language created by Guido", "python"),
]


@pytest.fixture
def topics(memory: AgentMemory) -> dict[str, str]:
    """The TOPICS stored in ``memory``: key -> memory id."""
    return {
        key: memory.store(text, type="web_content", source=f"https://example.org/{key}") for key, text in TOPICS.items()
    }


def test_query_by_text_finds_the_right_item_and_names_its_chunk(
    memory: AgentMemory, topics: dict[str, str]
) -> None:
    for case in QUERY_CASES:
        hits = memory.query(text=case.question, limit=3)

        assert hits[0].item.id == topics[case.expected], case.question
        best = hits[0]
        assert best.chunk is not None and TOPICS[case.expected] in best.chunk  # the header is stripped
        assert (best.chunk_index, best.chunk_start_char) == (0, 0)
        assert best.similarity is not None and -1.0 <= best.similarity <= 1.0
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        assert len({h.item.id for h in hits}) == len(hits) == 3


def test_query_accepts_a_criteria_object_and_keyword_overrides(
    memory: AgentMemory, topics: dict[str, str]
) -> None:
    criteria = MemoryCriteria(text="volcano buried Roman towns", limit=5)

    assert memory.query(criteria)[0].item.id == topics["vesuvius"]
    assert len(memory.query(criteria, limit=2)) == 2


def _hotpot_paragraphs(data_dir: Path) -> list[tuple[str, list[str]]]:
    questions = json.loads((data_dir / "hotpotqa" / "hotpot_dev_distractor_60.json").read_text(encoding="utf-8"))
    seen: set[str] = set()
    paragraphs = []
    for question in questions:
        for title, sentences in question["context"]:
            if title not in seen:
                seen.add(title)
                paragraphs.append((title, [s.strip() for s in sentences if s.strip()]))
    return paragraphs


@pytest.mark.data
def test_passage_deep_inside_a_150_kb_text_is_found(memory: AgentMemory, data_dir: Path) -> None:
    paragraphs = _hotpot_paragraphs(data_dir)
    parts: list[str] = []
    size = 0
    for title, sentences in paragraphs:
        if size >= 150_000:
            break
        block = f"{title}\n{' '.join(sentences)}\n\n"
        parts.append(block)
        size += len(block.encode("utf-8"))
    text = "".join(parts)
    assert 150_000 <= len(text.encode("utf-8")) < 160_000

    # A distinctive sentence (12-30 tokens, found once, most capitalised words) from the first
    # paragraph past the middle of the text that has one.
    def candidates(sentences: list[str]) -> list[str]:
        ok = [s for s in sentences if 12 <= memory.tokens.count(s) <= 30 and text.count(s) == 1]
        return sorted(ok, key=lambda s: -sum(w[:1].isupper() for w in s.split()[1:]))

    offset, middle = 0, None
    for (_, sentences), block in zip(paragraphs, parts, strict=False):
        if offset >= len(text) // 2 and candidates(sentences):
            middle = candidates(sentences)[0]
            break
        offset += len(block)
    assert middle is not None
    start = text.index(middle)
    assert 0.45 < start / len(text) < 0.6

    memory.store(TOPICS["python"], source="notes")
    big = memory.store(text, type="web_content", source="https://example.org/wiki-dump", title="Wiki dump")
    memory.store(TOPICS["eiffel"], source="notes")

    hits = memory.query(text=middle, limit=3)

    best = hits[0]
    assert best.item.id == big
    assert best.chunk is not None and middle in best.chunk
    assert best.chunk_index is not None and best.chunk_index > 10
    assert best.chunk_start_char is not None
    assert text[best.chunk_start_char : best.chunk_start_char + len(best.chunk)] == best.chunk
    excerpt = memory.retrieve(big, {"type": "excerpt", "around": middle, "context_chars": 50})
    assert middle in excerpt.content


# -- filters -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stored:
    key: str
    text: str
    type: MemoryType
    source: str
    tags: tuple[str, ...]
    when: datetime


FILTER_ITEMS = [
    Stored(
        "a", "Paris travel guide: the Louvre and the Eiffel Tower.", "web_content", "https://ex.org/a",
        ("news", "Paris"), day(1),
    ),
    Stored("b", "Search results for Paris hotels and restaurants.", "search_results", "web_search", ("news",), day(2)),
    Stored(
        "c", "SELECT name FROM city WHERE country = 'France' -> Paris, Lyon.", "database_result", "sql",
        ("db",), day(3),
    ),
    Stored("d", "History of Paris in the middle ages.", "web_content", "https://ex.org/d", ("paris",), day(4)),
]


@dataclass(frozen=True)
class FilterCase:
    name: str
    criteria: dict[str, Any]
    expected: frozenset[str] = field(default_factory=frozenset)


FILTER_CASES = [
    FilterCase("none", {}, frozenset("abcd")),
    FilterCase("type", {"type": "web_content"}, frozenset("ad")),
    FilterCase("type-absent", {"type": "file"}, frozenset()),
    FilterCase("source", {"source": "sql"}, frozenset("c")),
    FilterCase("source-exact", {"source": "https://ex.org"}, frozenset()),
    FilterCase("tag-case-insensitive", {"tags": ["PARIS"]}, frozenset("ad")),
    FilterCase("tags-all-must-hold", {"tags": ["news", "paris"]}, frozenset("a")),
    FilterCase("since-inclusive", {"since": day(2)}, frozenset("bcd")),
    FilterCase("until-inclusive", {"until": day(2)}, frozenset("ab")),
    FilterCase("range", {"since": day(2), "until": day(3)}, frozenset("bc")),
    FilterCase("naive-datetime-is-utc", {"since": day(3).replace(tzinfo=None)}, frozenset("cd")),
    FilterCase("type-and-time", {"type": "web_content", "since": day(2)}, frozenset("d")),
    FilterCase("empty-range", {"since": day(5)}, frozenset()),
]


@pytest.fixture
def filter_items(memory: AgentMemory) -> dict[str, str]:
    return {
        s.key: memory.store(s.text, type=s.type, source=s.source, tags=s.tags, timestamp=s.when)
        for s in FILTER_ITEMS
    }


@pytest.mark.parametrize("case", FILTER_CASES, ids=lambda c: c.name)
def test_filters(memory: AgentMemory, filter_items: dict[str, str], case: FilterCase) -> None:
    by_id = {item_id: key for key, item_id in filter_items.items()}

    listed = memory.query(limit=10, **case.criteria)
    searched = memory.query(text="Paris", limit=10, **case.criteria)

    assert {by_id[h.item.id] for h in listed} == case.expected
    assert {by_id[h.item.id] for h in searched} == case.expected
    times = [h.item.metadata.timestamp for h in listed]
    assert times == sorted(times, reverse=True)


def test_filters_run_inside_the_index_not_after_ranking(memory: AgentMemory) -> None:
    # Twelve items match the text better than the one of the wanted type; a filter applied to
    # the top few chunks afterwards would find nothing.
    for n in range(12):
        memory.store(f"Chocolate cake recipe {n}: flour, cocoa, sugar, eggs and butter.", type="search_results")
    target = memory.store("A spreadsheet of quarterly sales figures.", type="file", tags=["finance"])

    assert [h.item.id for h in memory.query(text="chocolate cake recipe", type="file", limit=1)] == [target]
    assert [h.item.id for h in memory.query(text="chocolate cake recipe", tags=["finance"], limit=1)] == [target]


# -- limit and listing ---------------------------------------------------------------------------


def test_limit(memory: AgentMemory) -> None:
    ids = [memory.store(f"Note {n} about gardening: tomatoes need sun and water.") for n in range(7)]

    assert [h.item.id for h in memory.query(limit=3)] == ids[::-1][:3]
    searched = memory.query(text="growing tomatoes", limit=3)
    assert len(searched) == 3 and len({h.item.id for h in searched}) == 3
    assert {h.item.id for h in memory.query(text="growing tomatoes", limit=100)} == set(ids)
    assert len(memory.query(limit=100)) == 7


def test_query_without_text_lists_newest_first(memory: AgentMemory) -> None:
    offsets = [3, 1, 4, 0, 2]
    ids = {off: memory.store(f"entry stored for day {off}", timestamp=day(off)) for off in offsets}
    later = [memory.store(f"untimed entry {n}") for n in range(2)]  # stored now: newer than 2024

    hits = memory.query(limit=10)

    assert [h.item.id for h in hits] == [later[1], later[0]] + [ids[off] for off in (4, 3, 2, 1, 0)]
    assert all(h.score is None and h.chunk is None for h in hits)


# -- clear ---------------------------------------------------------------------------------------


def test_clear(memory: AgentMemory, topics: dict[str, str]) -> None:
    memory.clear()

    assert len(memory) == 0
    assert memory.query() == []
    assert memory.query(text="Eiffel Tower") == []
    assert blob_files(memory) == []
    with pytest.raises(ItemNotFoundError):
        memory.get(topics["eiffel"])
    assert len(AgentMemory(memory.agent_id, memory.memory_dir, config=memory.config)) == 0

    new = memory.store("After the clear: a note about bicycles.")
    assert [h.item.id for h in memory.query(text="Eiffel Tower")] == [new]
    assert [h.item.id for h in memory.query()] == [new]


def test_a_second_instance_on_the_same_directory_sees_every_item(
    memory: AgentMemory, topics: dict[str, str]
) -> None:
    other = AgentMemory(memory.agent_id, memory.memory_dir, config=memory.config)

    assert {r.id for r in other.records()} == set(topics.values())
    assert other.query(text="how do plants make sugar from light", limit=1)[0].item.id == topics["photosynthesis"]
    assert other.flush_index() == 0


# -- query cost --------------------------------------------------------------------------------------


def test_the_query_text_is_embedded_once_however_far_the_search_widens(
    memory: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    long_page = " ".join(f"Paragraph {n} of the harbour report: ships, cranes and containers." for n in range(400))
    memory.store(long_page, title="Harbour report")  # dozens of chunks that all match
    others = [memory.store(TOPICS[key]) for key in ("eiffel", "python")]
    memory.flush_index()  # the stored items' own embeddings are done: only the query's are counted
    index_embedder(memory.config).clear()  # query vectors are cached process-wide: start from none
    embedder = index_embedder(memory.config).embedder
    embedded: list[list[str]] = []
    searches: list[int] = []
    real_embed, real_search = embedder.embed, memory.index.search

    def spy_embed(texts: list[str]) -> list[list[float]]:
        embedded.append(texts)
        return real_embed(texts)

    def spy_search(vector, criteria, *, n_chunks, **options):  # noqa: ANN001, ANN003, ANN202
        searches.append(n_chunks)
        return real_search(vector, criteria, n_chunks=n_chunks, **options)

    monkeypatch.setattr(embedder, "embed", spy_embed)
    monkeypatch.setattr(memory.index, "search", spy_search)
    question = "ships and cranes in the harbour " + "x" * 40

    hits = memory.query(text=question, limit=3)

    assert len(searches) >= 2  # the search widened
    # ...and embedded the question once, and the multi-hop follow-up (question + best chunk) once
    assert len(embedded) == 2 and embedded[0] == [question] and embedded[1][0].startswith(question + " ")
    assert set(others) <= {h.item.id for h in hits}


def test_a_query_of_the_longest_text_allowed_is_answered(memory: AgentMemory) -> None:
    # answered, and right; not timed: a loaded machine is not a benchmark
    ids = {key: memory.store(text) for key, text in TOPICS.items()}
    question = ("Which engineer's company built the wrought-iron lattice tower in Paris? " * 60)[:MAX_QUERY_CHARS]
    hits = memory.query(text=question, limit=5)
    assert len(question) == MAX_QUERY_CHARS
    assert hits[0].item.id == ids["eiffel"]
