"""The trace memory kernel (after AutoByteus' trace memory, github.com/AutoByteus/autobyteus,
autobyteus/memory/): turns, ingest, token budget, compaction, snapshots.

Records and their store live in :mod:`agent_memory.models.traces` and
:mod:`agent_memory.storage.traces`; this package holds the logic built on them.
"""

from agent_memory.kernel.turns import TurnTracker

__all__ = ["TurnTracker"]
