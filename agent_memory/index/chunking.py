"""Cutting long text into overlapping token windows for the vector index.

A 150 KB page is far longer than the embedding model's window (256 word pieces for MiniLM); one
vector for it would describe only its beginning. Chunks of ``chunk_tokens`` tokens that overlap
by ``overlap_tokens`` make every part of the text findable. Chunk boundaries move back to the
nearest whitespace within the last quarter of a window, so words are not cut in half.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_memory.tokens import TokenCounter

__all__ = ["TextChunk", "chunk_text"]


@dataclass(frozen=True, slots=True)
class TextChunk:
    """One window of a text."""

    index: int
    """0-based position among the text's chunks."""
    text: str
    """The window's text: exactly ``source[start_char:end_char]``."""
    start_char: int
    """Offset of the first character in the source text."""
    end_char: int
    """Offset one past the last character."""


def chunk_text(text: str, counter: TokenCounter, *, chunk_tokens: int, overlap_tokens: int) -> list[TextChunk]:
    """Split ``text`` into windows of at most ``chunk_tokens`` tokens, ``overlap_tokens`` shared.

    Returns an empty list for blank text and one chunk for text that fits in one window.

    Raises:
        ValueError: if ``overlap_tokens`` is not below ``chunk_tokens``.
    """
    if overlap_tokens >= chunk_tokens or chunk_tokens < 1:
        raise ValueError("need 0 <= overlap_tokens < chunk_tokens")
    if not text.strip():
        return []
    offsets = counter.token_char_offsets(text)
    n_tokens = len(offsets) - 1
    if n_tokens <= chunk_tokens:
        return [TextChunk(0, text, 0, len(text))]
    chunks: list[TextChunk] = []
    start_tok = 0
    while True:
        end_tok = min(start_tok + chunk_tokens, n_tokens)
        end_tok = _back_to_space(text, offsets, start_tok, end_tok, n_tokens, chunk_tokens)
        start, end = offsets[start_tok], offsets[end_tok]
        if text[start:end].strip():
            chunks.append(TextChunk(len(chunks), text[start:end], start, end))
        if end_tok >= n_tokens:
            return chunks
        start_tok = max(end_tok - overlap_tokens, start_tok + 1)


def _back_to_space(
    text: str, offsets: list[int], start_tok: int, end_tok: int, n_tokens: int, chunk_tokens: int
) -> int:
    """Move a window end back to a token that begins with whitespace, within a quarter window."""
    if end_tok >= n_tokens:
        return end_tok
    floor = end_tok - chunk_tokens // 4
    for tok in range(end_tok, max(floor, start_tok + 1), -1):
        pos = offsets[tok]
        if pos < len(text) and text[pos].isspace():
            return tok
    return end_tok
