"""retrieve_memory as a tool: its parts map onto transforms, HTML pages come back as their text,
and a 1 MB text is paged within max_tokens, every page's "next page" call working when dispatched.
Real memories on real files (these never touch the index)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from typing import Any

from actions import MemoryToolkit, ToolCallError, format_call, parse_line_slice
from agent_memory import AgentMemory, MemoryConfig
from memory_helpers import unindexed_memory

NEXT_LINE = re.compile(r"^Next page: (\w+)\((.*)\)$")
ARGUMENT_KEY = re.compile(r"\s*(\w+)=")


def parse_call(line: str) -> tuple[str, dict[str, Any]]:
    """Read a ``Next page: name(key=<json>, ...)`` line back into a name and JSON arguments,
    the way a model copies it."""
    match = NEXT_LINE.match(line)
    assert match, f"not a next-page line: {line!r}"
    name, rest = match.group(1), match.group(2)
    decoder = json.JSONDecoder()
    arguments: dict[str, Any] = {}
    pos = 0
    while pos < len(rest):
        key_match = ARGUMENT_KEY.match(rest, pos)
        assert key_match, f"cannot parse arguments at {rest[pos:]!r}"
        value, pos = decoder.raw_decode(rest, key_match.end())
        arguments[key_match.group(1)] = value
        pos = rest.find(",", pos) + 1 if "," in rest[pos:] else len(rest)
    return name, arguments


# -- retrieve: parts, HTML, paging -----------------------------------------------------------------

def test_retrieve_parts_map_onto_transforms(tmp_path: Path) -> None:
    memory = unindexed_memory(tmp_path)
    toolkit = MemoryToolkit(memory)
    text = "\n".join(f"row {i}: {'alpha' if i % 10 == 0 else 'beta'}" for i in range(1, 101))
    item_id = memory.store(text)

    def read(**arguments: Any) -> tuple[str, str]:
        result = toolkit.dispatch("retrieve_memory", {"id": item_id, **arguments})
        assert result.ok, result.content
        header, body = result.content.split("\n", 1)
        return header, body

    assert read(lines=":2") == (read(lines=":2")[0], "row 1: beta\nrow 2: beta")
    assert "first 2 lines" in read(lines=":2")[0]
    assert read(lines="-1:")[1] == "row 100: alpha" and "last 1 lines" in read(lines="-1:")[0]
    assert read(lines="4:6")[1] == "row 5: beta\nrow 6: beta"  # Python slice: the 5th and 6th lines
    assert 'lines="4:6": lines 5-6 counted from 1' in read(lines="4:6")[0]  # the slice as sent, then 1-based
    assert 'lines="98:": lines 99-end counted from 1' in read(lines="98:")[0]
    assert read(lines="98:")[1] == "row 99: beta\nrow 100: alpha"
    assert read(lines=":")[1] == text
    header, body = read(pattern="ALPHA")
    assert "matching lines" in header
    assert body.splitlines()[0] == "Note: 10 of 100 lines match (shown as L<line number>)."
    assert body.splitlines()[1:3] == ["L10: row 10: alpha", "…"]
    assert "row 10: alpha" in read(around="row 10:")[1]
    summary = toolkit.dispatch("retrieve_memory", {"id": item_id, "summary": True})
    assert summary.ok and summary.data["transform"]["type"] == "summary"
    # null for an unused argument is "not given" (some models send every key).
    assert toolkit.dispatch("retrieve_memory", {"id": item_id, "pattern": None, "lines": None, "summary": False}).ok


def test_parse_line_slice_is_pythons() -> None:
    lines = [f"l{i}" for i in range(1, 21)]
    for text in (":5", "-3:", "2:7", "15:", ":", "0:20", "19:"):
        start, _, stop = text.partition(":")
        want = lines[int(start) if start else None : int(stop) if stop else None]
        spec = parse_line_slice(text)
        if spec.type == "first_n":
            got = lines[: spec.n]
        elif spec.type == "last_n":
            got = lines[-spec.n :]
        elif spec.type == "full":
            got = lines
        else:
            got = lines[spec.start_line - 1 : spec.end_line]
        assert got == want, text
    for bad in ("-5:-2", "3:3", "5:2", "a:b", "1-5", ""):
        with pytest.raises(ToolCallError):
            parse_line_slice(bad)


@pytest.mark.data
def test_retrieve_web_page_as_text(tmp_path: Path, data_dir: Path) -> None:
    memory = unindexed_memory(tmp_path)
    html = (data_dir / "webpages/readability/lwn-1/source.html").read_text(encoding="utf-8")
    item_id = memory.store(html, type="web_content", source="lwn-1", media_type="text/html")
    toolkit = MemoryToolkit(memory)
    text = toolkit.dispatch("retrieve_memory", {"id": item_id, "around": "trademark"})
    assert text.ok and "Arduino" in text.content and "<div" not in text.content
    assert "raw" not in text.content  # the tool has no raw view; the library API does (memory.retrieve(raw=True))
    assert "<!DOCTYPE html" in memory.retrieve(item_id, raw=True, max_tokens=500).content


def _big_text() -> str:
    rnd = random.Random(2025)
    words = ("memory agent context token page retrieve query store index chunk vector embedding Paris "
             "Berlin river mountain the of and to a in is ünïcödé 東京 🙂").split()
    lines, size = [], 0
    while size < 1_000_000:
        line = f"Line {len(lines):06d}: " + " ".join(rnd.choice(words) for _ in range(rnd.randint(3, 30)))
        lines.append(line)
        size += len(line.encode()) + 1
    return "\n".join(lines)


@pytest.fixture(scope="module")
def big_text() -> str:
    return _big_text()


def big_memory(path: Path, text: str, cap: int | None = None) -> tuple[AgentMemory, str]:
    """A 1 MB text in a memory that never touches the index, answers capped at ``cap`` tokens."""
    config = MemoryConfig(index_on_store=False) if cap is None else MemoryConfig(index_on_store=False,
                                                                                 retrieve_max_tokens=cap)
    memory = AgentMemory("big", path, config=config)
    return memory, memory.store(text, source="crawler", title="A very long log " * 12)


@pytest.mark.parametrize("cap", [300, 1_000, None, 16_000])
def test_paging_a_1mb_text_stays_within_the_cap(tmp_path: Path, big_text: str, cap: int | None) -> None:
    memory, item_id = big_memory(tmp_path, big_text, cap)
    assert len(big_text.encode()) >= 1_000_000
    toolkit = MemoryToolkit(memory)
    cap = cap or 4_000
    first = toolkit.dispatch("retrieve_memory", json.dumps({"id": item_id}))
    assert first.ok and first.data["max_tokens"] == cap
    assert memory.tokens.count(first.content) <= cap
    assert memory.tokens.count(first.content) > cap * 0.4  # and not wastefully small
    pages = first.data["pages"]
    assert pages > 1 and f"page 1 of {pages}" in first.content.splitlines()[0]
    assert big_text.startswith(first.data["content"])
    name, next_arguments = parse_call(first.content.splitlines()[-1])
    assert (name, next_arguments) == ("retrieve_memory", {"id": item_id, "page": 2})
    assert first.data["next_call"] == {"name": name, "arguments": next_arguments}
    for page in (2, pages // 2, pages):
        result = toolkit.dispatch("retrieve_memory", {"id": item_id, "page": page})
        assert result.ok and memory.tokens.count(result.content) <= cap, page


def test_next_page_line_works_when_dispatched(tmp_path: Path, big_text: str) -> None:
    memory, item_id = big_memory(tmp_path, big_text, 2_000)
    toolkit = MemoryToolkit(memory)
    first = toolkit.dispatch("retrieve_memory", f'{{"id": "{item_id}"}}')
    name, arguments = parse_call(first.content.splitlines()[-1])
    second = toolkit.dispatch(name, json.dumps(arguments))  # exactly as the model would copy it
    assert second.ok and second.data["page"] == 2
    assert big_text.startswith(first.data["content"] + second.data["content"])  # contiguous, no gap, no overlap
    assert f"page 2 of {first.data['pages']}" in second.content.splitlines()[0]
    assert second.content.splitlines()[-1].endswith("page=3)")

    last_page = first.data["pages"]
    last = toolkit.dispatch("retrieve_memory", {"id": item_id, "page": last_page})
    assert last.ok and last.data["next_call"] is None
    assert "Next page" not in last.content
    assert big_text.endswith(last.data["content"])
    assert memory.tokens.count(last.content) <= 2000
    beyond = toolkit.dispatch("retrieve_memory", {"id": item_id, "page": last_page + 1})
    assert beyond.error == "transform_error" and f"the answer has {last_page} pages" in beyond.content


def test_next_page_keeps_the_part_arguments(tmp_path: Path, big_text: str) -> None:
    memory, item_id = big_memory(tmp_path, big_text, 1_500)
    toolkit = MemoryToolkit(memory)
    arguments = {"id": item_id, "pattern": "Berlin river"}
    first = toolkit.dispatch("retrieve_memory", json.dumps(arguments))
    assert first.ok and first.data["pages"] > 1
    assert memory.tokens.count(first.content) <= 1500
    assert first.content.splitlines()[1].startswith("Note: ") and "lines match" in first.content.splitlines()[1]
    name, next_arguments = parse_call(first.content.splitlines()[-1])
    assert next_arguments == {**arguments, "page": 2}
    second = toolkit.dispatch(name, next_arguments)
    assert second.ok and second.data["page"] == 2 and second.data["transform"] == first.data["transform"]
    lines = [line for line in second.data["content"].splitlines() if line]
    assert lines and all(re.match(r"L\d+: Line \d{6}: ", line) or line == "…" for line in lines)
    assert all("berlin river" in line.lower() for line in lines if line != "…")
    assert second.data["content"] != first.data["content"]


@pytest.mark.parametrize("pattern", [
    "|".join(f"Line 00{i:04d}" for i in range(16))[:200],  # long in characters
    "Line 000(1|2|3)|" + "🙂" * 180,  # long in tokens (the longest arguments a model can send)
    "Line 000(1|2|3)",  # short
])
def test_longest_arguments_still_fit_the_smallest_cap(tmp_path: Path, big_text: str, pattern: str) -> None:
    memory, item_id = big_memory(tmp_path, big_text, 300)
    toolkit = MemoryToolkit(memory)
    arguments = {"id": item_id, "pattern": pattern}
    result = toolkit.dispatch("retrieve_memory", arguments)
    assert result.ok and result.data["pages"] > 1, result.content
    assert memory.tokens.count(result.content) <= 300
    footer = result.content.splitlines()[-1]
    if footer == "Next page: the same call with page=2":  # the call itself would not fit the page
        assert memory.tokens.count(format_call("retrieve_memory", {**arguments, "page": 2})) > 60
    else:
        assert parse_call(footer)[1] == {**arguments, "page": 2}
    second = toolkit.dispatch("retrieve_memory", {**arguments, "page": 2})
    assert second.ok and second.data["page"] == 2 and memory.tokens.count(second.content) <= 300
