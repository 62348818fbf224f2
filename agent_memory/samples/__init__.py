"""Sample content shipped with the package, so that the quickstart and the documentation run from any
directory, offline: a small web page written for them (``fetch-api.html``, MIT like the package)."""

from __future__ import annotations

from importlib import resources

__all__ = ["SAMPLE_PAGES", "sample_page"]

SAMPLE_PAGES = ("fetch-api",)
"""The names :func:`sample_page` knows."""


def sample_page(name: str = "fetch-api") -> str:
    """The HTML text of the sample page ``name`` (``fetch-api``: ~4 KB, a guide to the Fetch API and
    XMLHttpRequest, with a title, a site name, a date and a description).

    Raises:
        ValueError: if ``name`` is not one of :data:`SAMPLE_PAGES`.
    """
    if name not in SAMPLE_PAGES:
        raise ValueError(f"no sample page {name!r}; the samples are {', '.join(SAMPLE_PAGES)}")
    return resources.files(__name__).joinpath(f"{name}.html").read_text(encoding="utf-8")
