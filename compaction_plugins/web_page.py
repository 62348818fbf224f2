"""Web pages: title, site, date and the lead of the main content (never markup).

The main text and metadata come from :func:`agent_memory.html.extract_page` (trafilatura). The
title is the page's ``<title>`` with a trailing site name removed ("Post title | Site" gives
"Post title"), else trafilatura's (``og:title``, first ``<h1>``): the ``<title>`` is what a
browser tab and a search result show.
"""

from __future__ import annotations

import html as html_lib
import re
from functools import lru_cache

from agent_memory.html import ExtractedPage, extract_page, looks_like_html
from agent_memory.models.items import MemoryItem
from agent_memory.tokens import TokenCounter
from compaction_plugins.base import BasePlugin, cap, fit, item_text

__all__ = ["WebPagePlugin", "page_title"]

_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.I | re.S)
_TAGS = re.compile(r"<[^>]+>")
_SEPARATOR = re.compile(r"\s+(?:[|\-–—_/:»·•✩★~]|::)\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+(?=[\"'“(\[A-Z0-9À-Ý])")
MIN_TITLE_WORDS = 3
"""A ``<title>`` cut at a site-name separator must keep at least this many words."""


def page_title(raw_html: str, page: ExtractedPage | None = None) -> str | None:
    """The page's title: ``<title>`` without a trailing (or leading) site name, else the
    extracted title; ``None`` when the page has neither."""
    match = _TITLE.search(raw_html[:200_000])
    title = " ".join(html_lib.unescape(_TAGS.sub("", match.group(1))).split()) if match else ""
    if title:
        parts = _SEPARATOR.split(title)
        if len(parts) > 1:
            head = title[: title.rfind(parts[-1])].rstrip(" |-–—_/:»·•✩★~")
            if len(head.split()) >= MIN_TITLE_WORDS:
                title = head
            elif len(parts[0].split()) < MIN_TITLE_WORDS and len(parts[-1].split()) >= MIN_TITLE_WORDS:
                title = title[len(parts[0]):].lstrip(" |-–—_/:»·•✩★~")
        return title
    return page.title if page is not None and page.title else None


@lru_cache(maxsize=64)
def _read(text: str, is_html: bool) -> tuple[ExtractedPage, str | None]:
    if not is_html:
        page = ExtractedPage(text=text.strip(), title=None, site_name=None, date=None, author=None, url=None,
                             description=None)
        return page, None
    page = extract_page(text)
    return page, page_title(text, page)


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    for para in text.split("\n"):
        para = " ".join(para.split())
        if para:
            out.extend(s for s in _SENTENCE_END.split(para) if s)
    return out


def _same(a: str | None, b: str | None) -> bool:
    norm = lambda s: re.sub(r"\W+", " ", (s or "").lower()).strip()  # noqa: E731
    return bool(a) and bool(b) and norm(a) == norm(b)


class WebPagePlugin(BasePlugin):
    """Web pages (type ``web_content``, media type ``text/html``, or HTML by sniffing).

    Key content: ``title · site · date: lead sentences…`` (the title is left out when the
    citation header already shows it). Summary: title, site, byline, date, URL, then the
    lead and the main text's most representative sentences.
    """

    name = "web_page"
    priority = 10

    def matches(self, item: MemoryItem) -> bool:
        if item.type == "web_content" or (item.metadata.media_type or "").startswith("text/html"):
            return item_text(item) is not None and item.metadata.content_encoding != "json"
        if item.metadata.content_encoding == "json":
            return False
        text = item_text(item)
        return text is not None and looks_like_html(text)

    def _page(self, item: MemoryItem) -> tuple[ExtractedPage, str | None]:
        text = item_text(item) or ""
        return _read(text, (item.metadata.media_type or "").startswith("text/html") or looks_like_html(text))

    def key_content(self, item: MemoryItem, *, max_tokens: int, counter: TokenCounter) -> str:
        page, title = self._page(item)
        facts = []
        if title and not _same(title, item.metadata.title):
            facts.append(title)
        site = page.site_name
        if site and not any(site.lower() in (s or "").lower() for s in (title, item.metadata.title,
                                                                           item.metadata.source)):
            facts.append(site)
        if page.date:
            facts.append(page.date)
        head = fit(facts, max_tokens, counter)
        lead = [s for s in _sentences(page.text) if not _same(s, title)]
        if not lead and page.description:
            lead = [page.description]
        if not head:
            return fit(lead, max_tokens, counter, sep=" ")
        room = max_tokens - counter.count(head + ": ")
        body = fit(lead, room, counter, sep=" ") if room >= 4 else ""
        return f"{head}: {body}" if body else head

    def summary(self, item: MemoryItem, *, max_tokens: int, counter: TokenCounter) -> str:
        from agent_memory.transforms import extractive_summary

        page, title = self._page(item)
        lines = [f"Title: {title}"] if title else []
        for label, value in (("Site", page.site_name), ("By", page.author), ("Date", page.date),
                             ("URL", page.url)):
            if value:
                lines.append(f"{label}: {value}")
        head = "\n".join(lines)
        room = max_tokens - counter.count(head + "\n\n")
        body = extractive_summary(page.text or page.description or "", room, counter) if room > 8 else ""
        body = cap(body, max(room, 0), counter)
        return cap(f"{head}\n\n{body}".strip(), max_tokens, counter)
