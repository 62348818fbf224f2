"""One lock for the heavy dependencies the library imports on first use.

chromadb, torch, sentence-transformers and numpy (through pgvector) are imported when a memory
first needs its index, so that ``import agent_memory`` stays fast. That first use can come from
several threads at once: a web service whose first two requests open two memories, one on files
(chromadb, numpy) and one on Postgres (pgvector, numpy, torch). Python's per-module import locks
break the deadlock of two threads entering one package's import cycle from different modules by
handing one of them a partially initialised module, which then fails for good in that process
(``cannot import name 'NDArray' from partially initialized module 'numpy._typing'``). So every lazy
import of a heavy dependency in this package runs under :data:`HEAVY_IMPORTS`, one after another.
"""

from __future__ import annotations

import threading

__all__ = ["HEAVY_IMPORTS"]

HEAVY_IMPORTS = threading.RLock()
"""Held while the library imports a heavy dependency lazily (``with HEAVY_IMPORTS: import ...``).
Re-entrant: importing one module may import another under it."""
