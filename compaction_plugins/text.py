"""Text, code and shell output: size, first and last lines, and the lines that report errors.

The fallback plugin (priority 1000): it accepts every item. For output of many lines the key
content keeps, in document order, the first line, the error lines (the final line of a Python
traceback, ``FAILED``, ``error:``, a non-zero exit code...) and the last line, then more of the
head and the tail as the budget allows; prose (a few long lines) gives its lead sentences.
"""

from __future__ import annotations

import re

from agent_memory.models.items import MemoryItem
from agent_memory.tokens import TokenCounter
from compaction_plugins.base import BasePlugin, cap, fit, item_text, short

__all__ = ["ERROR_LINE", "TextPlugin", "error_lines"]

ERROR_LINE = re.compile(
    r"^\s*(?:Traceback \(most recent call last\)|E\s{2,}\S)"
    r"|\b\w*(?:Error|Exception)\b(?::|$)"
    r"|\b(?:FAILED|FAIL:|ERRORS?\b|fatal:|panic:|Segmentation fault|command not found|syntax error|"
    r"No such file or directory|Permission denied|[Ee]xit (?:code|status):? *[1-9]\d*|returned non-zero)"
    r"|(?:^|:\s*|\]\s*)[Ee]rror:",
)
"""A line that reports a failure."""
_FINAL_EXCEPTION = re.compile(r"(?:^|\s)[\w.]*(?:Error|Exception|Exit|Interrupt)\b(?::|$)")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
"""Terminal colour and cursor codes (shell output), removed before reading lines."""
_NUMBERED_CODE = re.compile(r"^\s*\d+:")
"""A line of a numbered file listing (``123:    raise ValueError(...)``): code, not an error."""
LINE_CHARS = 120
"""Lines are cut to this many characters in key content."""
PROSE_LINE_CHARS = 300
"""Text whose lines average more than this is read as prose (sentences, not lines)."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def error_lines(lines: list[str]) -> list[int]:
    """Indices of lines that report errors, most telling first (final exception lines first)."""
    hits = [i for i, line in enumerate(lines) if ERROR_LINE.search(line) and not _NUMBERED_CODE.match(line)]
    final = [i for i in hits if _FINAL_EXCEPTION.search(lines[i].strip())]
    seen: set[str] = set()
    ordered = []
    for i in final[::-1] + [i for i in hits if i not in final]:
        key = lines[i].strip()
        if key not in seen and not key.startswith("Traceback"):
            seen.add(key)
            ordered.append(i)
    return ordered


def _lines(text: str) -> list[str]:
    text = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n").strip("\n")
    return [line.rstrip() for line in text.split("\n")]


def _size(item: MemoryItem) -> int:
    content = item.content
    return len(bytes(content)) if isinstance(content, bytes | bytearray | memoryview) else item.metadata.size_bytes


def _is_prose(lines: list[str]) -> bool:
    nonblank = [line for line in lines if line.strip()]
    return bool(nonblank) and (len(nonblank) <= 3 or sum(map(len, nonblank)) / len(nonblank) > PROSE_LINE_CHARS)


class TextPlugin(BasePlugin):
    """Any item: text by lines (head, errors, tail), prose by lead sentences, binary by size."""

    name = "text"
    priority = 1000

    def matches(self, item: MemoryItem) -> bool:
        return True

    def key_content(self, item: MemoryItem, *, max_tokens: int, counter: TokenCounter) -> str:
        text = item_text(item)
        if text is None:
            return cap(f"binary, {_size(item):,} bytes", max_tokens, counter)
        lines = _lines(text)
        if _is_prose(lines):
            sentences = [s for para in lines for s in _SENTENCE_END.split(" ".join(para.split())) if s]
            return fit(sentences, max_tokens, counter, sep=" ")
        nonblank = [i for i, line in enumerate(lines) if line.strip()]
        if not nonblank:
            return ""
        errors = error_lines(lines)
        order = [*errors[:1], nonblank[0], *errors[1:3], nonblank[-1]]
        head, tail = nonblank[1:6], nonblank[-6:-1][::-1]
        for pair in zip(head, tail, strict=False):
            order.extend(pair)
        order.extend(head[len(tail):] + tail[len(head):])
        order.extend(errors[3:])
        label = f"{len(lines)} lines"
        if errors:
            label += f", {len(errors)} error line{'s' if len(errors) != 1 else ''}"
        chosen: list[int] = []
        widths: dict[int, int] = {}
        out = label
        error_set = set(errors)
        for index in dict.fromkeys(order):
            trial = sorted([*chosen, index])
            # an error line is worth keeping cut short; other lines are kept whole or not at all
            for width in (LINE_CHARS, 80, 50, 30) if index in error_set else (LINE_CHARS,):
                rendered = self._render(lines, trial, label, {**widths, index: width})
                if counter.count(rendered) <= max_tokens:
                    chosen, out, widths[index] = trial, rendered, width
                    break
            else:
                if not chosen:
                    return cap(rendered, max_tokens, counter)
        return out

    @staticmethod
    def _render(lines: list[str], chosen: list[int], label: str, widths: dict[int, int] | None = None,
                width: int = LINE_CHARS) -> str:
        parts = [label + ":"]
        previous = -1
        for index in chosen:
            if index > previous + 1 and previous >= 0:
                parts.append("…")
            parts.append(short(lines[index].strip(), (widths or {}).get(index, width)))
            previous = index
        if chosen and chosen[-1] < len(lines) - 1 and any(line.strip() for line in lines[chosen[-1] + 1:]):
            parts.append("…")
        return "\n".join(parts)

    def summary(self, item: MemoryItem, *, max_tokens: int, counter: TokenCounter) -> str:
        from agent_memory.transforms import extractive_summary

        text = item_text(item)
        if text is None:
            return f"binary, {_size(item):,} bytes"
        lines = _lines(text)
        if _is_prose(lines):
            return extractive_summary(text, max_tokens, counter)
        errors = error_lines(lines)
        keep: set[int] = set(range(min(10, len(lines)))) | set(range(max(0, len(lines) - 10), len(lines)))
        for i in errors[:8]:
            keep.update(range(max(0, i - 2), min(len(lines), i + 3)))
        label = f"{len(lines)} lines" + (f", {len(errors)} error lines" if errors else "")
        rendered = self._render(lines, sorted(keep), label, width=200)
        return cap(rendered, max_tokens, counter)
