"""CompactionPlugin: deterministic, per-type turning of a memory item into its key content.

A plugin reads one item (a web page, search results, a database result, a JSON document, text or
shell output) and gives back the few facts a model needs to decide whether to retrieve more: the
body of a :class:`~agent_memory.presentation.citations.Citation`, and the text of the
``summary`` retrieve transform. Plugins are small classes implementing :class:`CompactionPlugin`;
a :class:`PluginRegistry` orders them and picks the first whose :meth:`~CompactionPlugin.matches`
accepts an item. The built-in plugins live in the top-level package ``compaction_plugins`` and,
like third-party ones, are found through the entry-point group ``agent_memory.compaction_plugins``
(each entry point names a plugin class or a zero-argument factory).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from importlib.metadata import entry_points
from typing import Protocol, runtime_checkable

from agent_memory.errors import ConfigurationError
from agent_memory.models.items import MemoryItem
from agent_memory.tokens import TokenCounter

__all__ = ["ENTRY_POINT_GROUP", "CompactionPlugin", "PluginRegistry"]

ENTRY_POINT_GROUP = "agent_memory.compaction_plugins"
"""Entry-point group through which plugins (built-in and third-party) are found."""

logger = logging.getLogger(__name__)


@runtime_checkable
class CompactionPlugin(Protocol):
    """Turns one kind of memory item into short, deterministic text.

    Attributes:
        name: a stable identifier (``"web_page"``), shown in citations and reports.
        priority: lower runs first when several plugins match; built-ins use 10-100, the
            plain-text fallback 1000. Third parties pick a value below a built-in to override it.
    """

    name: str
    priority: int

    def matches(self, item: MemoryItem) -> bool:
        """Whether this plugin understands ``item`` (by its type, media type, or by sniffing)."""
        ...

    def key_content(self, item: MemoryItem, *, max_tokens: int, counter: TokenCounter) -> str:
        """The most useful facts of ``item`` in at most ``max_tokens`` tokens (for a citation).

        Must be deterministic and must not contain raw markup (HTML) or the whole content.
        """
        ...

    def summary(self, item: MemoryItem, *, max_tokens: int, counter: TokenCounter) -> str:
        """A readable summary of ``item`` in at most ``max_tokens`` tokens (the ``summary``
        retrieve transform)."""
        ...


class PluginRegistry:
    """An ordered set of compaction plugins.

    Args:
        plugins: initial plugins; ``None``: none (use :meth:`from_entry_points` for the installed
            ones, built-ins included).

    Plugins are kept sorted by ``priority`` then registration order.
    """

    def __init__(self, plugins: Iterable[CompactionPlugin] | None = None) -> None:
        self._plugins: list[CompactionPlugin] = []
        for plugin in plugins or ():
            self.register(plugin)

    @classmethod
    def from_entry_points(cls, group: str = ENTRY_POINT_GROUP) -> PluginRegistry:
        """A registry of every plugin installed under the entry-point group ``group``.

        A plugin that fails to load is logged and skipped (a broken third-party package must
        not stop an agent); an entry point that loads but is not a plugin raises.

        Raises:
            ConfigurationError: if an entry point does not produce a CompactionPlugin.
        """
        registry = cls()
        for point in sorted(entry_points(group=group), key=lambda ep: ep.name):
            try:
                factory = point.load()
                plugin = factory()
            except Exception as exc:  # noqa: BLE001 - a third party's import error
                logger.warning("compaction plugin %s failed to load: %s", point.name, exc)
                continue
            registry.register(plugin)
        return registry

    def register(self, plugin: CompactionPlugin) -> None:
        """Add a plugin (replacing one of the same name).

        Raises:
            ConfigurationError: if ``plugin`` does not implement :class:`CompactionPlugin`.
        """
        if not isinstance(plugin, CompactionPlugin):
            raise ConfigurationError(f"{plugin!r} does not implement CompactionPlugin")
        self._plugins = [p for p in self._plugins if p.name != plugin.name] + [plugin]
        self._plugins.sort(key=lambda p: p.priority)  # stable: equal priorities keep their order

    @property
    def plugins(self) -> list[CompactionPlugin]:
        """The plugins, in the order they are tried."""
        return list(self._plugins)

    def for_item(self, item: MemoryItem) -> CompactionPlugin | None:
        """The first plugin that matches ``item``, or ``None``."""
        for plugin in self._plugins:
            try:
                if plugin.matches(item):
                    return plugin
            except Exception as exc:  # noqa: BLE001 - a faulty plugin must not break the agent
                logger.warning("compaction plugin %s failed on %s: %s", plugin.name, item.id, exc)
        return None
