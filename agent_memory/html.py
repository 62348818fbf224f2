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
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from agent_memory.lazy_imports import HEAVY_IMPORTS

if TYPE_CHECKING:
    from lxml.etree import _Element

T = TypeVar("T")

__all__ = ["EXTRACTED_PAGES", "ExtractedPage", "PageDetails", "extract_page", "forget_extractions",
           "load_extractor_soon", "looks_like_html", "page_details"]

_HTML_SNIFF = re.compile(r"^\s*(?:<!--.*?-->\s*)*(?:<!doctype\s+html|<html[\s>]|<head[\s>]|<body[\s>])", re.I | re.S)
_TAG = re.compile(r"<(?:p|div|a|span|br|table|ul|li|h[1-6])[\s>/]", re.I)


def looks_like_html(text: str) -> bool:
    """Whether ``text`` is an HTML document (doctype/html/head/body first, or dense tags)."""
    head = text[:4096]
    if _HTML_SNIFF.match(head):
        return True
    return len(_TAG.findall(head)) >= 8


@dataclass(frozen=True, slots=True)
class PageDetails:
    """What a page states about itself beyond its title and URL: its site, date and description
    (read with its main text, from the same parse: a citation shows them) and its byline (read
    when first asked for: only a summary shows it)."""

    site_name: str | None = None
    """Site name, or ``None``."""
    date: str | None = None
    """Publication date (ISO ``YYYY-MM-DD``) when the page states one, or ``None``."""
    author: str | None = None
    """Byline, or ``None``."""
    description: str | None = None
    """Meta description, or ``None``."""


class ExtractedPage:
    """The readable part of an HTML page: its main text, title and URL, and its
    :class:`PageDetails` (the byline read when first asked for).

    Attributes:
        text: main content as plain text, paragraphs separated by blank lines ("" if none).
        title: page title from metadata (``og:title``, JSON-LD, ``<title>``, first ``<h1>``),
            or ``None``.
        site_name, date, author, description: the :class:`PageDetails`.
        url: canonical URL when the page states one, or ``None``.
    """

    __slots__ = ("_details", "_html", "_stated", "text", "title", "url")

    def __init__(self, text: str, title: str | None = None, site_name: str | None = None, date: str | None = None,
                 author: str | None = None, url: str | None = None, description: str | None = None) -> None:
        self.text = text
        self.title = title
        self.url = url
        self._stated = PageDetails(site_name, date, None, description)
        self._details: PageDetails | None = PageDetails(site_name, date, author, description)
        self._html: str | None = None

    @classmethod
    def _author_later(cls, html: str, text: str, stated: _Stated) -> ExtractedPage:
        """A page whose byline :func:`page_details` reads from ``html`` when first asked for."""
        page = cls(text, stated.title, stated.site_name, stated.date, url=stated.url, description=stated.description)
        page._details, page._html = None, html
        return page

    @property
    def details(self) -> PageDetails:
        """The page's :class:`PageDetails`; the byline is read from its HTML on first use
        (:func:`page_details`: a parse of its own and trafilatura's author search, 10-70 ms for a
        1 MB page)."""
        if self._details is None:
            assert self._html is not None
            author = page_details(self._html).author
            self._details, self._html = PageDetails(self._stated.site_name, self._stated.date, author,
                                                    self._stated.description), None
        return self._details

    @property
    def site_name(self) -> str | None:
        """Site name, or ``None``."""
        return self._stated.site_name

    @property
    def date(self) -> str | None:
        """Publication date (ISO ``YYYY-MM-DD``) when the page states one, or ``None``."""
        return self._stated.date

    @property
    def author(self) -> str | None:
        """Byline, or ``None``."""
        return self.details.author

    @property
    def description(self) -> str | None:
        """Meta description, or ``None``."""
        return self._stated.description

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ExtractedPage):
            return NotImplemented
        return (self.text, self.title, self.url, self.details) == (other.text, other.title, other.url, other.details)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ExtractedPage(title={self.title!r}, url={self.url!r}, text={len(self.text):,} chars)"


EXTRACTED_PAGES = 64
"""Pages whose extraction (and whose details) :func:`extract_page` (:func:`page_details`) keeps,
the most recently used."""


class _SingleFlight:
    """The results of one function of a page's text, for the last :data:`EXTRACTED_PAGES` texts,
    each computed once across threads: a thread that asks for a text another thread is working on
    waits for that work instead of doing it again."""

    def __init__(self) -> None:
        self._done: OrderedDict[str, Any] = OrderedDict()
        self._running: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def get(self, html: str, work: Callable[[str], T]) -> T:
        while True:
            with self._lock:
                if html in self._done:
                    self._done.move_to_end(html)
                    return self._done[html]
                running = self._running.get(html)
                if running is None:
                    running = self._running[html] = threading.Event()
                    break
            running.wait()  # then read it from the cache (or do it, had that thread failed)
        try:
            result = work(html)
            with self._lock:
                self._done[html] = result
                while len(self._done) > EXTRACTED_PAGES:
                    self._done.popitem(last=False)
            return result
        finally:
            with self._lock:
                del self._running[html]
            running.set()

    def clear(self) -> None:
        with self._lock:
            self._done.clear()


_extracted = _SingleFlight()
_detailed = _SingleFlight()


def extract_page(html: str) -> ExtractedPage:
    """Extract the main text, title and URL of ``html`` with trafilatura, once per page text: the
    last :data:`EXTRACTED_PAGES` pages are kept, and a thread that asks for a page another thread
    is extracting waits for that extraction instead of doing it again (the agent's first showing
    of a page and the indexing thread's chunks of it read one extraction: tens of ms for a large
    page). The page's site, date and description, which its citation shows, are read from the
    same parse by trafilatura's own steps (:func:`_stated`); its byline, which only a summary
    shows, when first asked for (:func:`page_details`: a parse of its own and trafilatura's
    author search, up to ~70 ms on a large page).

    Falls back to all visible text (scripts, styles and navigation removed) when trafilatura
    finds no main content. Never raises for malformed HTML; returns empty text instead.
    """
    return _extracted.get(html, _extract)


def page_details(html: str) -> PageDetails:
    """The :class:`PageDetails` of ``html``: trafilatura's ``extract_metadata`` (with a shallow
    date search), once per page text across threads as :func:`extract_page`. Never raises: a page
    it cannot read has no details."""
    return _detailed.get(html, _read_details)


_loader: threading.Thread | None = None
_loader_lock = threading.Lock()


def load_extractor_soon() -> None:
    """Start importing trafilatura (and lxml, htmldate, justext under it) in a thread of its own,
    ``agent-memory-load-extractor``, so that the first :func:`extract_page` does not: the import
    is ~0.2 s of Python (modules and regular expressions), which an agent's first step with a page
    paid. Returns at once; does nothing once started or imported; never raises (an import that
    fails is :func:`extract_page`'s to meet, as without this call). ``MemoryAgent`` calls it when
    it starts."""
    global _loader
    with _loader_lock:
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
    """Empty :func:`extract_page`'s and :func:`page_details`' caches (benchmarks that must not
    profit from an earlier phase)."""
    _extracted.clear()
    _detailed.clear()


def _extract(html: str) -> ExtractedPage:
    """:func:`extract_page`'s work (uncached). The page is parsed once for its text, title and
    URL: trafilatura's ``extract`` takes the parsed tree (and works on a copy of it), where given
    the text it parses it again (a 1.6 MB page: ~15-35 ms a parse)."""
    trafilatura = _trafilatura()
    text = ""
    stated = _Stated()
    tree = None
    try:
        tree = trafilatura.load_html(html)
        if tree is not None:
            text = trafilatura.extract(
                tree, output_format="txt", include_comments=False, include_tables=True, favor_recall=True
            ) or ""
            stated = _stated(tree)
    except Exception:  # noqa: BLE001 - lxml raises assorted errors on broken markup
        stated = _Stated()
    if not text.strip():
        text = _visible_text(html, tree)
    return ExtractedPage._author_later(html, text.strip(), stated)


class _Stated(NamedTuple):
    """What a page states about itself, as a first showing and its citation read it."""

    title: str | None = None
    url: str | None = None
    site_name: str | None = None
    date: str | None = None
    description: str | None = None


def _stated(tree: _Element) -> _Stated:
    """The title, URL, site, date and description trafilatura's ``extract_metadata`` finds, by its
    own steps in its own order (meta tags, JSON-LD, ``<title>``/``<h1>``, the canonical link,
    htmldate's shallow date search, the site name and its URL fallback; trafilatura 2.3,
    ``trafilatura/metadata.py``), without its author, category, tag and license searches (up to
    ~70 ms on a large page, which only a summary's byline needs). Equal to ``extract_metadata``'s
    on every HTML page of the project's test data; a trafilatura without these steps is asked
    ``extract_metadata`` itself."""
    from trafilatura import metadata as steps

    try:
        found = steps.examine_meta(tree)
        if found.author and " " not in found.author:
            found.author = None  # as extract_metadata does before reading JSON-LD
        try:
            found = steps.extract_meta_json(tree, found)
        except Exception:  # noqa: BLE001 - extract_metadata tolerates JSON-LD it cannot read
            pass
        found.title = found.title or steps.extract_title(tree)
        found.url = found.url or steps.extract_url(tree, None)
        found.date = steps.find_date(tree, extensive_search=False, url=found.url)
        if not found.sitename:
            found.sitename = steps.extract_sitename(tree)
        if found.sitename:
            found.sitename = found.sitename.lstrip("@")  # a Twitter handle
            if found.sitename and "." not in found.sitename and not found.sitename[0].isupper():
                found.sitename = found.sitename.title()
        elif found.url:
            matched = steps.META_URL.match(found.url)
            if matched:
                found.sitename = matched[1]
        found.clean_and_trim()
    except AttributeError:  # a trafilatura whose steps have other names
        found = _metadata(tree)
    return _Stated(found.title, found.url, found.sitename, found.date, found.description)


def _metadata(tree: _Element) -> Any:
    """trafilatura's ``extract_metadata`` of a parsed page, with htmldate's shallow date search:
    the extensive one (dateparser over the whole page) costs seconds on some pages; meta tags and
    URL patterns find the date on most news pages."""
    return _trafilatura().extract_metadata(tree, extensive=False, date_config={"extensive_search": False})


def _read_details(html: str) -> PageDetails:
    """:func:`page_details`' work (uncached): the page parsed again (its tree from
    :func:`extract_page` is not kept: tens of MB for a 1 MB page)."""
    try:
        tree = _trafilatura().load_html(html)
        meta = _metadata(tree) if tree is not None else None
    except Exception:  # noqa: BLE001 - lxml raises assorted errors on broken markup
        meta = None
    if meta is None:
        return PageDetails()
    return PageDetails(site_name=meta.sitename, date=meta.date, author=meta.author, description=meta.description)


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
