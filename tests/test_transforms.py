"""Retrieve transforms: each kind, its errors, the token cap and paging."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_memory import InvalidArgumentError, ItemMetadata, MemoryItem
from agent_memory.errors import TransformError
from agent_memory import transforms
from agent_memory.limits import MAX_AROUND_CHARS, MAX_JSON_PATH_CHARS, MAX_KEYWORDS, MAX_PATTERN_CHARS, REGEX_TIMEOUT_S
from agent_memory.models.items import ExcerptTransform, FilteredTransform, content_to_bytes
from agent_memory.tokens import TiktokenCounter
from agent_memory.transforms import (
    PAGE_NOTICE_TOKENS,
    REGEX_LINE_ALLOWANCE_S,
    apply_transform,
    extractive_summary,
    parse_transform,
)

COUNTER = TiktokenCounter()
LINES = "\n".join(f"line {i}: value {i * i}" for i in range(1, 201))
ROWS = [{"id": i, "city": "Paris" if i % 3 == 0 else "Oslo", "price": i * 10} for i in range(30)]
TABLE = {"columns": ["name", "qty"], "rows": [["bolt", 3], ["nut", 7], ["gear", 3]]}


def make_item(content: Any, **meta: Any) -> MemoryItem:
    _, encoding = content_to_bytes(content)
    return MemoryItem(id="mem_000000000001", content=content, metadata=ItemMetadata(content_encoding=encoding, **meta))


def run(content: Any, transform: Any, *, max_tokens: int = 4_000, page: int = 1, **meta: Any):
    return apply_transform(make_item(content, **meta), transform, counter=COUNTER, max_tokens=max_tokens, page=page)


@dataclass(frozen=True)
class Case:
    name: str
    content: Any
    transform: dict[str, Any]
    expected: str


CASES = [
    Case("full text", "alpha\nbeta", {"type": "full"}, "alpha\nbeta"),
    Case("chars", "0123456789", {"type": "excerpt", "start_char": 2, "end_char": 5}, "234"),
    Case("chars open end", "0123456789", {"type": "excerpt", "start_char": 7}, "789"),
    Case("lines", LINES, {"type": "excerpt", "start_line": 3, "end_line": 4}, "line 3: value 9\nline 4: value 16"),
    Case("first lines", LINES, {"type": "first_n", "n": 2}, "line 1: value 1\nline 2: value 4"),
    Case("last lines", LINES, {"type": "last_n", "n": 1}, "line 200: value 40000"),
    Case("first tokens", "one two three four", {"type": "first_n", "n": 2, "unit": "tokens"}, "one two"),
    Case("last tokens", "one two three four", {"type": "last_n", "n": 2, "unit": "tokens"}, " three four"),
    Case("regex lines", LINES, {"type": "filtered", "pattern": r"value 1[2-6]\d$"}, "L11: line 11: value 121\nL12: line 12: value 144\nL13: line 13: value 169"),
    Case("json path", {"a": {"b": [10, {"c": "x"}]}}, {"type": "filtered", "json_path": "a.b.1.c"}, '"x"'),
    Case("json star", {"results": [{"url": "u1"}, {"url": "u2"}]}, {"type": "filtered", "json_path": "results.*.url"}, '[\n  "u1",\n  "u2"\n]'),
    Case("table rows", TABLE, {"type": "filtered", "column": "qty", "value": 3},
         json.dumps({"columns": ["name", "qty"], "rows": [["bolt", 3], ["gear", 3]]}, indent=2)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_transform_cases(case: Case) -> None:
    result = run(case.content, case.transform)
    assert result.content == case.expected
    assert result.pages == 1 and result.tokens == COUNTER.count(case.expected)


def test_json_content_is_pretty_json_not_python_repr() -> None:
    result = run({"k": [1, None, True]}, "full")
    assert json.loads(result.content) == {"k": [1, None, True]}
    assert "None" not in result.content and "True" not in result.content


def test_keywords_with_context_lines_mark_gaps() -> None:
    result = run(LINES, {"type": "filtered", "keywords": ["line 5:", "LINE 100:"], "context_lines": 1})
    shown = result.content.splitlines()
    assert shown == [
        "L4: line 4: value 16", "L5: line 5: value 25", "L6: line 6: value 36", "…",
        "L99: line 99: value 9801", "L100: line 100: value 10000", "L101: line 101: value 10201",
    ]
    assert any("match" in note for note in result.notes)


def test_rows_as_list_of_objects() -> None:
    result = run(ROWS, {"type": "filtered", "column": "city", "value": "Paris"})
    rows = json.loads(result.content)
    assert [row["id"] for row in rows] == [i for i in range(30) if i % 3 == 0]
    assert "10 of 30 rows" in result.notes[0]


def test_excerpt_around_merges_windows_and_reports_misses() -> None:
    text = "x" * 1000 + "NEEDLE one" + "y" * 30 + "needle two" + "z" * 1000
    result = run(text, {"type": "excerpt", "around": "needle", "context_chars": 20})
    assert result.content.count("[chars") == 1  # overlapping windows merged
    assert "NEEDLE one" in result.content and "needle two" in result.content
    miss = run(text, {"type": "excerpt", "around": "absent"})
    assert miss.content == "" and "no match for 'absent'" in miss.notes


def test_an_excerpt_starts_and_ends_with_whole_words() -> None:
    words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike".split()
    text = " ".join(words * 20) + " TARGET " + " ".join(reversed(words * 20))
    for context in (7, 23, 41, 58):
        body = run(text, {"type": "excerpt", "around": "TARGET", "context_chars": context}).content.split("\n", 1)[1]
        first, last = body.split()[0], body.split()[-1]
        assert first in words and last in words, (context, body)
        assert len(body) <= len("TARGET") + 2 * context + 2 * 10  # widened by at most a word each side


@pytest.mark.parametrize(
    ("content", "transform", "message"),
    [
        ("abc", {"type": "excerpt"}, "exactly one of"),
        ("abc", {"type": "excerpt", "start_char": 1, "start_line": 1}, "exactly one of"),
        ("abc", {"type": "excerpt", "start_char": 10}, "past the end"),
        ("abc", {"type": "excerpt", "start_line": 5}, "past the end"),
        ("abc", {"type": "filtered"}, "at least one of"),
        ("abc", {"type": "filtered", "pattern": "("}, "invalid regular expression"),
        ("plain text", {"type": "filtered", "json_path": "a"}, "need JSON content"),
        ({"a": 1}, {"type": "filtered", "json_path": "b"}, "no key 'b'"),
        ([1, 2], {"type": "filtered", "json_path": "5"}, "list of 2"),
        (TABLE, {"type": "filtered", "column": "colour", "value": "red"}, "no column 'colour'"),
        ("abc", {"type": "nonsense"}, "invalid transform"),
        ("abc", {"type": "first_n", "n": 0}, "invalid transform"),
    ],
)
def test_transform_errors_say_what_is_wrong(content: Any, transform: dict[str, Any], message: str) -> None:
    with pytest.raises(TransformError, match=message):
        run(content, transform)


def test_parse_transform_shorthands() -> None:
    assert parse_transform(None).type == "full"
    assert parse_transform("summary").type == "summary"
    assert parse_transform({"type": "first_n", "n": 3}).n == 3


def _word_lines(n_words: int) -> str:
    words = [f"w{i}" for i in range(n_words)]
    return "\n".join(" ".join(words[i : i + 20]) for i in range(0, len(words), 20))


def test_one_megabyte_never_comes_back_uncapped() -> None:
    text = _word_lines(200_000)
    assert len(text.encode()) > 1_000_000
    for transform in ("full", "summary", {"type": "first_n", "n": 100_000, "unit": "tokens"}):
        result = run(text, transform, max_tokens=4_000)
        assert result.tokens <= 4_000
    first = run(text, "full", max_tokens=4_000)
    assert first.pages > 50 and first.truncated
    assert first.total_tokens == COUNTER.count(text)
    assert first.content.endswith("\n")  # cut at a line break, not mid-word


def test_pages_cover_the_text_exactly_once() -> None:
    text = _word_lines(20_000)
    first = run(text, "full", max_tokens=1_000)
    pieces = [first.content]
    for page in range(2, first.pages + 1):
        result = run(text, "full", max_tokens=1_000, page=page)
        assert result.tokens <= 1_000 - PAGE_NOTICE_TOKENS
        pieces.append(result.content)
    assert first.pages > 5 and "".join(pieces) == text
    assert not result.truncated
    with pytest.raises(TransformError, match="does not exist"):
        run(text, "full", max_tokens=1_000, page=first.pages + 1)


def test_small_answer_has_one_page_and_page_two_is_an_error() -> None:
    assert run("short", "full").pages == 1
    with pytest.raises(TransformError, match="1 page"):
        run("short", "full", page=2)


def test_bytes_utf8_shown_as_text_and_binary_as_base64() -> None:
    assert run("héllo".encode(), "full").content == "héllo"
    binary = run(b"\xff\x00\xfe", "full")
    assert binary.content == "/wD+" and "base64" in binary.notes[0]


def test_summary_is_deterministic_capped_and_keeps_the_lead() -> None:
    text = (
        "Chromadb stores vectors for retrieval. "
        + " ".join(f"Vectors and retrieval matter in sentence {i}." for i in range(60))
        + " Unrelated closing words here."
    )
    first = extractive_summary(text, 60, COUNTER)
    assert first == extractive_summary(text, 60, COUNTER)
    assert first.startswith("Chromadb stores vectors for retrieval.")
    assert COUNTER.count(first) <= 60
    assert "Unrelated closing" not in first


def test_html_page_is_read_as_main_text(data_dir: Path) -> None:
    page_dir = sorted(data_dir.glob("webpages/readability/*/source.html"))[0].parent
    html = (page_dir / "source.html").read_text(encoding="utf-8")
    item = make_item(html, media_type="text/html")
    text = apply_transform(item, "full", counter=COUNTER, max_tokens=16_000).content
    assert "<div" not in text and "<script" not in text
    metadata = json.loads((page_dir / "expected-metadata.json").read_text(encoding="utf-8"))
    assert metadata["title"].split()[0] in text
    raw = apply_transform(item, "full", counter=COUNTER, max_tokens=16_000, raw=True)
    assert raw.content.lstrip().startswith("<") and raw.total_tokens > COUNTER.count(text)


# -- hostile input: refused or answered, the regex stopped by its budget, never RecursionError ------
# (no wall-clock bound here: a loaded machine is not a benchmark; benchmarks/bench_hostile.py times them)

HOSTILE_TEXT = "a" * 40 + "b"


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(a|a)+$", r"(a|aa)+$", r"(x+x+)+y", r"(.*a){30}$", r"(a|a?)+c"])
def test_backtracking_patterns_are_stopped_by_the_budget_or_answered(pattern: str) -> None:
    try:
        result = run(HOSTILE_TEXT, {"type": "filtered", "pattern": pattern})
    except TransformError as exc:
        assert "too slow" in str(exc) and len(str(exc)) < 300
    else:  # none of them can match a line of a's ending in b
        assert result.content == "" and "no line matches" in result.notes


class CountedPattern:
    """A compiled ``regex`` pattern that records the timeout of each search made with it."""

    def __init__(self, compiled: Any) -> None:
        self.compiled, self.pattern, self.timeouts = compiled, compiled.pattern, []

    def search(self, text: str, pos: int, *, timeout: float) -> Any:
        self.timeouts.append(timeout)
        return self.compiled.search(text, pos, timeout=timeout)


def test_the_regex_budget_is_shared_by_all_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[CountedPattern] = []
    real = transforms.compile_pattern
    monkeypatch.setattr(transforms, "compile_pattern",
                        lambda pattern: made.append(CountedPattern(real(pattern))) or made[-1])
    text = "\n".join([HOSTILE_TEXT] * 200)  # 200 lines that each take the whole budget alone
    with pytest.raises(TransformError, match="too slow"):
        run(text, {"type": "filtered", "pattern": r"(a|aa)+$"})
    # at most one search over the joined lines, given what is left of the call's one budget (none
    # when it ran out before), and none after it: not a budget per line
    (pattern,) = made
    budget = REGEX_TIMEOUT_S + REGEX_LINE_ALLOWANCE_S * 200
    assert len(pattern.timeouts) <= 1 and all(0 < timeout <= budget for timeout in pattern.timeouts)


def test_a_harmless_pattern_over_a_long_log_is_not_refused() -> None:
    text = "\n".join(f"{i} GET /item/{i} 200" for i in range(100_000))
    result = run(text, {"type": "filtered", "pattern": r"/item/9999\d "}, max_tokens=16_000)
    assert "10 of 100000 lines match" in result.notes[0]


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("a{99999999999}", "repeats 99,999,999,999 times"),
        ("a{2,1001}", "repeats 1,001 times"),
        ("(a{1000}){1000}", "too large"),
        ("((a{100}){100}){100}", "too large"),
        ("(" * 200 + ")" * 200 + "(", "invalid regular expression"),
        ("[z-a]", "invalid regular expression"),
        ("(?P<n>a)(?P=m)", "invalid regular expression"),
        ("\\", "invalid regular expression"),
    ],
)
def test_patterns_that_would_crash_or_blow_up_are_refused(pattern: str, message: str) -> None:
    with pytest.raises(TransformError, match=re.escape(message)):
        run("aaa", {"type": "filtered", "pattern": pattern})


def test_counted_repeats_within_bounds_still_work() -> None:
    result = run("id: 12345\nid: 12\n", {"type": "filtered", "pattern": r"^id: \d{5}$|x{2,1000}|\p{Lu}{3}"})
    assert result.content == "L1: id: 12345"


def test_error_messages_quote_only_a_short_prefix_of_the_input() -> None:
    long_key = "k" * 10_000
    checks = [
        ({"type": "filtered", "pattern": "(" + "a" * 490}, "abc"),
        ({"type": "filtered", "json_path": long_key[:500]}, {"a": 1}),
        ({"type": "filtered", "column": "c" * 500, "value": 1}, [{"x": 1}]),
        ({"type": "filtered", "json_path": "a"}, {long_key: 1}),
    ]
    for transform, content in checks:
        with pytest.raises(TransformError) as info:
            run(content, transform)
        assert len(str(info.value)) < 400, str(info.value)[:500]
    with pytest.raises(TransformError) as too_long:
        apply_transform(
            make_item("abc"), FilteredTransform.model_construct(pattern="x" * 10_000_000),
            counter=COUNTER, max_tokens=4_000,
        )
    assert len(str(too_long.value)) < 200


def _nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", [101, 5_000, 100_000])
@pytest.mark.parametrize("transform", [{"json_path": "a.a"}, {"column": "a", "value": 1}])
def test_json_filters_over_deeply_nested_text_are_transform_errors(depth: int, transform: dict[str, Any]) -> None:
    with pytest.raises(TransformError, match="levels deep"):
        run(_nested(depth), {"type": "filtered", **transform})
    with pytest.raises(TransformError):
        run("[" * depth, {"type": "filtered", **transform})


def test_json_filters_at_the_depth_limit_still_work() -> None:
    result = run(_nested(100), {"type": "filtered", "json_path": "a.a.a"})
    assert json.loads(result.content)["a"]["a"]


@pytest.mark.parametrize(
    "transform",
    [
        {"type": "filtered", "pattern": "x" * (MAX_PATTERN_CHARS + 1)},
        {"type": "filtered", "keywords": [f"k{i}" for i in range(MAX_KEYWORDS + 1)]},
        {"type": "filtered", "json_path": "a" * (MAX_JSON_PATH_CHARS + 1)},
        {"type": "filtered", "column": "c", "value": "v" * (MAX_PATTERN_CHARS + 1)},
        {"type": "filtered", "pattern": "\ud800"},
        {"type": "excerpt", "around": "x" * (MAX_AROUND_CHARS + 1)},
        {"type": "excerpt", "around": "\udfff"},
    ],
)
def test_transform_arguments_are_bounded(transform: dict[str, Any]) -> None:
    with pytest.raises(TransformError, match="invalid transform"):
        parse_transform(transform)
    kind = {"filtered": FilteredTransform, "excerpt": ExcerptTransform}[transform["type"]]
    with pytest.raises(InvalidArgumentError):
        kind(**{k: v for k, v in transform.items() if k != "type"})


@pytest.mark.parametrize("bad", [123, 4.5, object(), ["full"], b"full"])
def test_a_transform_of_the_wrong_type_is_a_transform_error(bad: Any) -> None:
    with pytest.raises(TransformError, match="invalid transform"):
        run("abc", bad)


# -- fuzz: whatever a model sends, a result within the cap or a TransformError, within 1 s ---------

_PATTERN_ATOMS = st.sampled_from(
    ["a", "b", ".", r"\d", r"\w", r"\s", "[a-z]", "(", ")", "|", "*", "+", "?", "{2}", "{1,3}", "{99999}", "^", "$",
     "(?:", "(?=", "\\", "[", "]", "\ud800", "é", "{", "}", "(a|aa)+", "(a+)+"]
)
_CONTENTS = st.one_of(
    st.text(max_size=300),
    st.just("a" * 40 + "b"),
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                 lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4),
                 max_leaves=30),
    st.integers(min_value=1, max_value=400).map(lambda depth: '{"a": ' * depth + "1" + "}" * depth),
)


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    content=_CONTENTS,
    pattern=st.lists(_PATTERN_ATOMS, min_size=1, max_size=12).map("".join),
    json_path=st.one_of(st.none(), st.lists(st.sampled_from(["a", "*", "0", "-1", "99", "b"]), max_size=6).map(".".join)),
    column=st.one_of(st.none(), st.sampled_from(["a", "b", "id"])),
    max_tokens=st.integers(min_value=120, max_value=600),
)
def test_fuzzed_filtered_transforms_answer_or_refuse(
    content: Any, pattern: str, json_path: str | None, column: str | None, max_tokens: int
) -> None:
    transform: dict[str, Any] = {"type": "filtered", "pattern": pattern}
    if json_path:
        transform["json_path"] = json_path
    if column:
        transform |= {"column": column, "value": 1}
    try:
        result = run(content, transform, max_tokens=max_tokens)
    except TransformError as exc:
        assert len(str(exc)) < 600
    else:
        assert result.tokens <= max_tokens


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(JSON_VALUES)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_indented_json_is_the_standard_librarys_text_whatever_the_data(value: Any) -> None:
    # written by orjson where that gives the same text, by json where it would not (exponents,
    # integers beyond 64 bits, lone surrogates)
    assert transforms.raw_text(value, "json") == json.dumps(value, ensure_ascii=False, indent=2)


def test_indented_json_of_the_real_tables_is_the_standard_librarys_text(data_dir: Path) -> None:
    import sqlite3

    db = sqlite3.connect(f"file:{data_dir / 'sqlite' / 'Chinook_Sqlite.sqlite'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        tables = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            rows = [dict(row) for row in db.execute(f'SELECT * FROM "{table}"')]
            assert transforms.raw_text(rows, "json") == json.dumps(rows, ensure_ascii=False, indent=2), table
    finally:
        db.close()
    assert len(tables) >= 10


def _lines_as_written_before(data: Any) -> list[str]:
    """json_to_lines as it was written before it looked up scalars' writers (the reference)."""
    lines: list[str] = []

    def scalar(value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            if value and all(not isinstance(v, dict | list) for v in value.values()):
                lines.append((f"{path}: " if path else "") + "; ".join(f"{k}: {scalar(v)}" for k, v in value.items()))
                return
            for key, child in value.items():
                walk(child, f"{path}.{key}" if path else str(key))
        elif isinstance(value, list):
            for i, child in enumerate(value):
                walk(child, f"{path}.{i}" if path else str(i))
        else:
            lines.append(f"{path}: {scalar(value)}" if path else scalar(value))

    walk(data, "")
    return lines


@given(st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80) | st.floats() | st.text(max_size=6),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_json_lines_are_written_as_before_whatever_the_data(value: Any) -> None:
    assert transforms.json_to_lines(value) == _lines_as_written_before(value)
