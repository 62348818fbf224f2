"""Main-content extraction from HTML pages, with trafilatura.

Raw HTML is a poor thing to embed or to show a model: a 110 KB page is ~30k tokens of markup for
~1k tokens of text. :func:`extract_page` keeps the main text and the page's metadata; the index
embeds that text, and the web-page compaction plugin cites it.
"""

from __future__ import annotations

import re
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_memory.lazy_imports import HEAVY_IMPORTS

if TYPE_CHECKING:
    from lxml.etree import _Element

__all__ = ["EXTRACTED_PAGES", "ExtractedPage", "extract_page", "forget_extractions", "load_extractor_soon",
           "looks_like_html"]

_HTML_SNIFF = re.compile(r"^\s*(?:<!--.*?-->\s*)*(?:<!doctype\s+html|<html[\s>]|<head[\s>]|<body[\s>])", re.I | re.S)
_TAG = re.compile(r"<(?:p|div|a|span|br|table|ul|li|h[1-6])[\s>/]", re.I)


def looks_like_html(text: str) -> bool:
    """Whether ``text`` is an HTML document (doctype/html/head/body first, or dense tags)."""
    head = text[:4096]
    if _HTML_SNIFF.match(head):
        return True
    return len(_TAG.findall(head)) >= 8


@dataclass(frozen=True, slots=True)
class ExtractedPage:
    """The readable part of an HTML page."""

    text: str
    """Main content as plain text, paragraphs separated by blank lines ("" if none was found)."""
    title: str | None
    """Page title from metadata (``og:title``, ``<title>``, first ``<h1>``), or ``None``."""
    site_name: str | None
    """Site name, or ``None``."""
    date: str | None
    """Publication date (ISO ``YYYY-MM-DD``) when the page states one, or ``None``."""
    author: str | None
    """Byline, or ``None``."""
    url: str | None
    """Canonical URL when the page states one, or ``None``."""
    description: str | None
    """Meta description, or ``None``."""


EXTRACTED_PAGES = 64
"""Pages whose extraction :func:`extract_page` keeps (the most recently used)."""

_extracted: OrderedDict[str, ExtractedPage] = OrderedDict()
_extracting: dict[str, threading.Event] = {}
_extract_lock = threading.Lock()


def extract_page(html: str) -> ExtractedPage:
    """Extract main text and metadata from ``html`` with trafilatura, once per page text: the
    last :data:`EXTRACTED_PAGES` pages are kept, and a thread that asks for a page another thread
    is extracting waits for that extraction instead of doing it again (the agent's first showing
    of a page and the indexing thread's chunks of it read one extraction: tens to hundreds of ms
    for a large page).

    Falls back to all visible text (scripts, styles and navigation removed) when trafilatura
    finds no main content. Never raises for malformed HTML; returns empty text instead.
    """
    while True:
        with _extract_lock:
            page = _extracted.get(html)
            if page is not None:
                _extracted.move_to_end(html)
                return page
            running = _extracting.get(html)
            if running is None:
                running = _extracting[html] = threading.Event()
                break
        running.wait()  # then read it from the cache (or extract it, had that thread failed)
    try:
        page = _extract(html)
        with _extract_lock:
            _extracted[html] = page
            while len(_extracted) > EXTRACTED_PAGES:
                _extracted.popitem(last=False)
        return page
    finally:
        with _extract_lock:
            del _extracting[html]
        running.set()


_loader: threading.Thread | None = None


def load_extractor_soon() -> None:
    """Start importing trafilatura (and lxml, htmldate, justext under it) in a thread of its own,
    ``agent-memory-load-extractor``, so that the first :func:`extract_page` does not: the import
    is ~0.2 s of Python (modules and regular expressions), which an agent's first step with a page
    paid. Returns at once; does nothing once started or imported; never raises (an import that
    fails is :func:`extract_page`'s to meet, as without this call). ``MemoryAgent`` calls it when
    it starts."""
    global _loader
    with _extract_lock:
        if _loader is not None or "trafilatura" in sys.modules:
            return
        _loader = threading.Thread(target=_load_extractor, name="agent-memory-load-extractor", daemon=True)
        _loader.start()


def _load_extractor() -> None:
    try:
        _trafilatura()
    except ImportError:
        return


def _trafilatura() -> Any:
    """The trafilatura module, imported under :data:`~agent_memory.lazy_imports.HEAVY_IMPORTS` the
    first time (a thread opening the vector index may be importing chromadb meanwhile)."""
    loaded = sys.modules.get("trafilatura")
    if loaded is not None and (_loader is None or not _loader.is_alive()):
        return loaded  # imported, not by a loader still at it
    with HEAVY_IMPORTS:
        import trafilatura

        return trafilatura


def forget_extractions() -> None:
    """Empty :func:`extract_page`'s cache (benchmarks that must not profit from an earlier phase)."""
    with _extract_lock:
        _extracted.clear()


def _extract(html: str) -> ExtractedPage:
    """:func:`extract_page`'s work (uncached). The page is parsed once: trafilatura's
    ``extract`` and ``extract_metadata`` both take the parsed tree (``extract`` works on a copy of
    it), where given the text each parsed it again (a 1.6 MB page: two parses of ~15-35 ms each,
    with trafilatura's repair pass over the text before each)."""
    trafilatura = _trafilatura()
    text = ""
    title = site = date = author = url = description = None
    tree = None
    try:
        tree = trafilatura.load_html(html)
        if tree is not None:
            text = trafilatura.extract(
                tree, output_format="txt", include_comments=False, include_tables=True, favor_recall=True
            ) or ""
            # Shallow date search: htmldate's extensive search (dateparser over the whole page)
            # costs seconds on some pages; meta tags and URL patterns find the date on most news
            # pages.
            meta = trafilatura.extract_metadata(tree, extensive=False, date_config={"extensive_search": False})
        else:
            meta = None
    except Exception:  # noqa: BLE001 - lxml raises assorted errors on broken markup
        meta = None
    if meta is not None:
        title, site, date, author = meta.title, meta.sitename, meta.date, meta.author
        url, description = meta.url, meta.description
    if not text.strip():
        text = _visible_text(html, tree)
    return ExtractedPage(text=text.strip(), title=title, site_name=site, date=date, author=author, url=url,
                         description=description)


def _visible_text(html: str, parsed: _Element | None = None) -> str:
    """All visible text of ``html``: of ``parsed`` (trafilatura's tree of it, which this
    changes) when given, else of lxml's parse of ``html``."""
    import lxml.html

    try:
        tree = lxml.html.fromstring(html) if parsed is None else parsed
    except Exception:  # noqa: BLE001
        return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()
    # lxml.html gives HtmlElement nodes (HtmlMixin); lxml-stubs types them as plain _Element
    assert isinstance(tree, lxml.html.HtmlMixin)
    found = tree.xpath("//script|//style|//noscript|//nav|//footer|//header")
    for bad in found if isinstance(found, list) else ():
        if isinstance(bad, lxml.html.HtmlMixin):
            bad.drop_tree()
    lines = (line.strip() for line in tree.text_content().splitlines())
    return "\n".join(line for line in lines if line)
