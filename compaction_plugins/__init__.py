"""The built-in compaction plugins of agent-memory.

Registered through the entry-point group ``agent_memory.compaction_plugins`` (see
``pyproject.toml``), so ``PluginRegistry.from_entry_points()`` finds them with any third-party
ones; importing this package registers nothing. In the order they are tried:

| plugin | priority | items |
| --- | ---: | --- |
| :class:`WebPagePlugin` | 10 | ``web_content``, ``text/html``, sniffed HTML |
| :class:`SearchResultsPlugin` | 20 | ranked ``{title, url, snippet}`` lists |
| :class:`DatabaseResultPlugin` | 30 | rows, ``{columns, rows}``, text tables of ``database_result`` |
| :class:`JsonDocumentPlugin` | 40 | any other JSON |
| :class:`TextPlugin` | 1000 | everything else: text, code, shell output, binary |
"""

from compaction_plugins.base import BasePlugin
from compaction_plugins.database_result import DatabaseResultPlugin
from compaction_plugins.json_document import JsonDocumentPlugin
from compaction_plugins.search_results import SearchResultsPlugin
from compaction_plugins.text import TextPlugin
from compaction_plugins.web_page import WebPagePlugin

__all__ = [
    "BasePlugin",
    "DatabaseResultPlugin",
    "JsonDocumentPlugin",
    "SearchResultsPlugin",
    "TextPlugin",
    "WebPagePlugin",
]
