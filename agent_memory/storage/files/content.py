"""Content-addressed blobs: ``content/<sha256>``, each written once, atomically.

Identical content is stored once however many items point to it. A blob is never modified after
it is written; writing an existing blob is a no-op. The file name is the hex sha256 of the bytes,
checked with a strict pattern before it becomes a path.
"""

from __future__ import annotations

import re
from pathlib import Path

from agent_memory.errors import StoreError
from agent_memory.fileio import atomic_write_bytes
from agent_memory.storage.contracts import sha256_hex

__all__ = ["ContentStore", "sha256_hex"]

_SHA256 = re.compile(r"[0-9a-f]{64}")


class ContentStore:
    """Blobs under one directory, named by their sha256.

    Args:
        root: the ``content/`` directory; created on first write.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, digest: str) -> Path:
        if not _SHA256.fullmatch(digest):
            raise StoreError(f"not a sha256 hex digest: {digest!r}")
        return self.root / digest

    def put(self, data: bytes) -> str:
        """Store ``data`` unless a blob with its hash exists; return its hex sha256.

        Raises:
            StoreError: if the write fails (no partial blob is left under the final name).
        """
        digest = sha256_hex(data)
        path = self._path(digest)
        if path.exists() and path.stat().st_size == len(data):
            return digest
        self.root.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data)
        return digest

    def get(self, digest: str) -> bytes:
        """The bytes of blob ``digest``, checked against the hash.

        Raises:
            StoreError: if the blob is missing or its bytes do not hash to ``digest``.
        """
        path = self._path(digest)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise StoreError(f"content blob {digest} is missing: {exc}") from exc
        if sha256_hex(data) != digest:
            raise StoreError(f"content blob {digest} is damaged (hash mismatch)")
        return data

    def exists(self, digest: str) -> bool:
        """Whether blob ``digest`` is present."""
        return self._path(digest).exists()

    def remove(self, digest: str) -> bool:
        """Delete blob ``digest``; ``False`` if it was not there."""
        path = self._path(digest)
        existed = path.exists()
        path.unlink(missing_ok=True)
        return existed

    def remove_unreferenced(self, keep: set[str]) -> int:
        """Delete blobs whose hash is not in ``keep``; return how many were deleted."""
        removed = 0
        if not self.root.exists():
            return 0
        for path in self.root.iterdir():
            if _SHA256.fullmatch(path.name) and path.name not in keep:
                path.unlink(missing_ok=True)
                removed += 1
        return removed
