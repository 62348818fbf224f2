"""Database results: columns, row count, first rows, and the range of each numeric column.

Recognised: type ``database_result``, or JSON rows found by sniffing: a list of flat objects
(values scalars, or objects of scalars, flattened as ``prices.economy``), a
``{"columns": [...], "rows": [[...]]}`` table, or either under a single key (``{"rows": [...]}``).
Text tables (CSV, TSV, ``|``-separated) are read when the type is ``database_result`` or the media
type is ``text/csv`` / ``text/tab-separated-values``.
"""

from __future__ import annotations

import csv
import io
import re
from collections import OrderedDict
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import Any

from agent_memory.models.items import MemoryItem
from agent_memory.tokens import TokenCounter
from compaction_plugins.base import NOT_JSON, BasePlugin, cap, fit, item_json, item_text, short

__all__ = ["DatabaseResultPlugin", "Table", "parse_table"]

KEY_ROWS = 2
"""Rows shown in key content at most."""
SUMMARY_ROWS = 5
"""First rows shown in a summary (the last row is added when there are more)."""
KEPT_TABLES = 4
"""Items whose table :class:`DatabaseResultPlugin` keeps once read."""
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True, slots=True)
class Table:
    """Rows as a table: column names, then one tuple of values per row (``None`` when absent)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def column_range(self, index: int) -> tuple[Any, Any] | None:
        """``(min, max)`` of a numeric (or ISO-date) column; ``None`` for other columns."""
        values = list(map(itemgetter(index), self.rows))
        if None in values:
            values = [value for value in values if value is not None]
        if not values:
            return None
        kinds = set(map(type, values))
        if kinds <= _NUMBER_TYPES or all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            return min(values), max(values)
        if (all(map(_DATE.match, values)) if kinds <= _STR_TYPE
                else all(isinstance(v, str) and _DATE.match(v) for v in values)):
            lo, hi = min(values), max(values)
            midnight = all(v[10:].strip(" T") in ("", "00:00:00", "00:00") for v in (lo, hi))
            return (lo[:10], hi[:10]) if midnight else (lo, hi)
        return None

    def distinct(self, index: int) -> list[tuple[str, int]]:
        """Distinct values of a column with their counts, most frequent first."""
        counts: dict[str, int] = {}
        for row in self.rows:
            key = short(row[index], 40)
            counts[key] = counts.get(key, 0) + 1
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})
_STR_TYPE = frozenset({str})
_NUMBER_TYPES = frozenset({int, float})


def _flat(row: dict[str, Any]) -> dict[str, Any] | None:
    if _SCALAR_TYPES.issuperset(map(type, row.values())) and _STR_TYPE.issuperset(map(type, row)):
        return row  # flat already (the common case: one type check per value, at C speed)
    out: dict[str, Any] = {}
    for key, value in row.items():
        if _is_scalar(value):
            out[str(key)] = value
        elif isinstance(value, dict) and all(_is_scalar(v) for v in value.values()):
            out.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            return None
    return out


def parse_table(data: Any) -> Table | None:
    """The table in JSON ``data`` (see the module docstring), or ``None``."""
    if isinstance(data, dict):
        if isinstance(data.get("columns"), list) and isinstance(data.get("rows"), list):
            columns = tuple(str(c) for c in data["columns"])
            rows = data["rows"]
            if all(isinstance(r, list) and len(r) == len(columns) and all(map(_is_scalar, r)) for r in rows):
                return Table(columns, tuple(tuple(r) for r in rows))
            return None
        if len(data) == 1:
            return parse_table(next(iter(data.values())))
        return None
    if not isinstance(data, list) or not data:
        return None
    if set(map(type, data)) == {dict}:
        keys = set(map(tuple, data))
        if len(keys) == 1 and (names := next(iter(keys))) and _STR_TYPE.issuperset(map(type, names)) \
                and _SCALAR_TYPES.issuperset(map(type, chain.from_iterable(map(dict.values, data)))):
            return Table(names, tuple(map(tuple, map(dict.values, data))))  # flat rows of one shape, at C speed
    if not all(isinstance(r, dict) and r for r in data):
        return None
    flat: list[dict[str, Any]] = []
    for r in data:
        row = _flat(r)
        if row is None:
            return None
        flat.append(row)
    seen: dict[str, None] = {}  # the keys of every row, in first-seen order
    for row in flat:
        seen.update(dict.fromkeys(row))
    names = tuple(seen)
    return Table(names, tuple(tuple(map(r.get, names)) for r in flat))


def _number(cell: str) -> Any:
    try:
        return int(cell)
    except ValueError:
        pass
    try:
        return float(cell)
    except ValueError:
        return cell


def _text_table(text: str) -> Table | None:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if len(lines) < 2:
        return None
    if all("|" in line for line in lines[:3]):
        cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in lines]
        cells = [row for row in cells if not all(re.fullmatch(r":?-{2,}:?|\+?[-+]+", c or "-") for c in row)]
    else:
        try:
            dialect = csv.Sniffer().sniff(lines[0] + "\n" + lines[1], delimiters=",\t;")
        except csv.Error:
            return None
        cells = list(csv.reader(io.StringIO("\n".join(lines)), dialect))
    if len(cells) < 2 or len(cells[0]) < 2:
        return None
    width = len(cells[0])
    body = [row for row in cells[1:] if len(row) == width]
    if len(body) < 0.8 * (len(cells) - 1):
        return None
    return Table(tuple(cells[0]), tuple(tuple(_number(c) for c in row) for row in body))


class DatabaseResultPlugin(BasePlugin):
    """Tabular results: ``N rows × M cols: col a–b, col, … · 1: v | v | v; 2: …``."""

    name = "database_result"
    priority = 30

    def __init__(self) -> None:
        super().__init__()
        self._tables: OrderedDict[tuple[str, str, str, str], Table | None] = OrderedDict()

    def _table(self, item: MemoryItem) -> Table | None:
        """The item's table, read once per stored content (``matches``, then ``key_content`` or
        ``summary``: 8,715 rows take ~0.1-0.2 s to read) for the last :data:`KEPT_TABLES` items."""
        meta = item.metadata
        if not meta.content_sha256:  # a hand-built item: no hash to know its content by
            return self._read_table(item)
        key = (item.id, meta.content_sha256, item.type, meta.media_type or "")  # what _read_table reads
        if key in self._tables:
            self._tables.move_to_end(key)
            return self._tables[key]
        table = self._tables[key] = self._read_table(item)
        while len(self._tables) > KEPT_TABLES:
            self._tables.popitem(last=False)
        return table

    def _read_table(self, item: MemoryItem) -> Table | None:
        data = item_json(item)
        if data is not NOT_JSON:
            return parse_table(data)
        media = item.metadata.media_type or ""
        if item.type == "database_result" or media in ("text/csv", "text/tab-separated-values"):
            text = item_text(item)
            return _text_table(text) if text else None
        return None

    def matches(self, item: MemoryItem) -> bool:
        return self._table(item) is not None

    @staticmethod
    def _column(table: Table, index: int) -> str:
        span = table.column_range(index)
        name = table.columns[index]
        if span is None or span[0] == span[1]:
            return name
        return f"{name} {short(span[0], 20)}–{short(span[1], 20)}"

    @staticmethod
    def _row(row: tuple[Any, ...], max_chars: int = 30) -> str:
        return " | ".join(short(v, max_chars) for v in row)

    def key_content(self, item: MemoryItem, *, max_tokens: int, counter: TokenCounter) -> str:
        table = self._table(item)
        if table is None:
            return ""
        n = len(table.rows)
        head = f"{n} row{'s' if n != 1 else ''} × {len(table.columns)} cols:"
        room = max_tokens - counter.count(head + " ")
        if not table.rows:
            return fit([head + " " + ", ".join(table.columns)], max_tokens, counter)
        col_room = room if n == 0 else max(4, int(room * 0.6))
        cols = fit([self._column(table, i) for i in range(len(table.columns))], col_room, counter, sep=", ")
        text = f"{head} {cols}" if cols else head
        row_room = max_tokens - counter.count(text + " · ")
        rows = fit([self._row(r) for r in table.rows[:KEY_ROWS]], row_room, counter, sep="; ", min_cut_tokens=5)
        return f"{text} · {rows}" if rows else text

    def summary(self, item: MemoryItem, *, max_tokens: int, counter: TokenCounter) -> str:
        table = self._table(item)
        if table is None:
            return ""
        lines = [f"{len(table.rows)} rows × {len(table.columns)} columns"]
        for i, name in enumerate(table.columns):
            span = table.column_range(i)
            if span is not None:
                lines.append(f"- {name}: {short(span[0], 30)} – {short(span[1], 30)}")
                continue
            distinct = table.distinct(i)
            if len(distinct) <= 5 and len(table.rows) > len(distinct):
                lines.append(f"- {name}: " + ", ".join(f"{v} ({c})" for v, c in distinct))
            else:
                lines.append(f"- {name}: {len(distinct)} distinct, e.g. {distinct[0][0] if distinct else ''}")
        shown = list(table.rows[:SUMMARY_ROWS])
        lines.append("First rows:" if len(table.rows) > len(shown) else "Rows:")
        lines.append(" | ".join(table.columns))
        lines.extend(self._row(r, 60) for r in shown)
        if len(table.rows) > len(shown):
            lines.append(f"… last row ({len(table.rows)}): {self._row(table.rows[-1], 60)}")
        return cap(fit(lines, max_tokens, counter, sep="\n", cut_last=False), max_tokens, counter)
