"""The embedding model as an ONNX graph run by onnxruntime: the same model, 2-5x less CPU per text.

A sentence-transformers model directory (a ``Transformer`` module, mean or CLS ``Pooling``, and
optionally ``Normalize``, with a ``tokenizer.json``: all-MiniLM-L6-v2 is one) is exported once,
from its local weights, into an ONNX graph that takes the token ids and attention mask and gives
the unit-length sentence vector (pooling and normalisation inside the graph). With
``precision="int8"`` the graph's weight matrices are then quantized to 8-bit integers, per output
channel, with activations quantized per tensor on the fly (onnxruntime's dynamic quantization,
``quantize_dynamic(..., per_channel=True)``: int8 dot products use the CPU's VNNI instructions).

Nothing is downloaded: the export reads the model directory and writes the graph to a cache
directory (:func:`cache_dir`: ``$AGENT_MEMORY_CACHE``, else ``$XDG_CACHE_HOME/agent-memory``, else
``~/.cache/agent-memory``), under a name made from the model files' sizes and times and the
export's settings, so a changed model is exported again. Processes exporting at once take a file
lock; the graph appears by an atomic rename. Exporting needs torch, transformers and the ``onnx``
package (a core dependency) and takes a few seconds once per machine and model; running needs only
onnxruntime (chromadb's dependency) and tokenizers, not torch. Before a new graph is kept, its
vectors of :data:`PROBE_TEXTS` are compared with sentence-transformers' own (:data:`MIN_PROBE_COSINE`).

Each text runs alone (a batch of one): no padding, and, since dynamic quantization scales the
activations of the whole batch, a text gets the same vector whatever it is embedded with (the
determinism that ``rebuild_index`` promises, :data:`~agent_memory.index.fusion.SCORE_TOLERANCE`).
Texts run on ``workers`` threads, each one onnxruntime thread: on 2 cores, a batch of one on one
thread gave the most chunks per CPU second (benchmarks/bench_embedding.py).

Measured on real chunks (benchmarks/results/embedding.json): float32 vectors equal
sentence-transformers' to float rounding (cosine 1.0000); int8 vectors have cosine 0.993 on
average (0.98 at least) with them, and the retrieval benchmark's figures stay within 0.01.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import warnings
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agent_memory.errors import ConfigurationError, EmbeddingError
from agent_memory.lazy_imports import HEAVY_IMPORTS

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "EXPORT_FORMAT", "MIN_PROBE_COSINE", "PROBE_TEXTS", "OnnxPrecision", "OnnxSentenceModel", "cache_dir",
    "export_onnx", "onnx_model_file",
]

OnnxPrecision = Literal["float32", "int8"]
"""The numbers of the exported graph's weights: ``float32`` (the model's own) or ``int8``."""

EXPORT_FORMAT = 1
"""Version of what :func:`export_onnx` writes (part of the cache name: a change re-exports)."""

OPSET = 17
"""ONNX operator set of the export (onnxruntime has run it since 1.15)."""

MIN_PROBE_COSINE: dict[OnnxPrecision, float] = {"float32": 0.9999, "int8": 0.95}
"""Least cosine between an exported graph's vector and sentence-transformers' vector of each of
:data:`PROBE_TEXTS` for the graph to be kept. float32 agrees to float rounding; int8 measured
0.98-1.0 on real chunks. A broken export (padding taken for text, a wrong pooling) falls far below:
0.49 was seen for a graph fed padded ids."""

PROBE_TEXTS = (
    "The heron nests in tall reeds beside the river.",
    "Invoice 4471 was settled by bank wire on March third; the remaining balance is 0.00 EUR.",
    "GET /healthz 200 OK 0.4ms",
    "a",
    " ".join(["The Danube flows through ten countries, more than any other river in the world."] * 40),
)
"""Texts an exported graph is checked on: short, numeric, a log line, one letter, and one longer
than the model's window (truncated)."""

_MODEL_FILES = ("config.json", "modules.json", "tokenizer.json", "model.safetensors", "pytorch_model.bin",
                "1_Pooling/config.json", "sentence_bert_config.json")


def cache_dir() -> Path:
    """Where exported graphs are kept: ``$AGENT_MEMORY_CACHE``, else ``$XDG_CACHE_HOME/agent-memory``,
    else ``~/.cache/agent-memory`` (created on first export)."""
    if explicit := os.environ.get("AGENT_MEMORY_CACHE"):
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agent-memory"


class _Layout:
    """What the export needs to know of a sentence-transformers directory.

    Raises:
        ConfigurationError: if the directory is not a Transformer + mean/CLS Pooling (+ Normalize)
            model with a ``tokenizer.json`` (another shape of model runs with torch).
    """

    def __init__(self, model_path: Path) -> None:
        self.path = model_path
        try:
            modules = json.loads((model_path / "modules.json").read_text(encoding="utf-8"))
            kinds = [str(module["type"]).rpartition(".")[2] for module in modules]
            pooling_dir = next(module["path"] for module in modules if str(module["type"]).endswith("Pooling"))
            pooling = json.loads((model_path / pooling_dir / "config.json").read_text(encoding="utf-8"))
            settings_file = model_path / "sentence_bert_config.json"
            settings = json.loads(settings_file.read_text(encoding="utf-8")) if settings_file.exists() else {}
        except (OSError, ValueError, KeyError, StopIteration) as exc:
            raise ConfigurationError(f"{model_path} is not a sentence-transformers model the ONNX export knows: "
                                     f"{exc}") from exc
        if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            raise ConfigurationError(f"{model_path}: modules {kinds}; the ONNX export knows Transformer, Pooling "
                                     "(and Normalize)")
        modes = [mode for mode in ("mean_tokens", "cls_token", "max_tokens", "mean_sqrt_len_tokens")
                 if pooling.get(f"pooling_mode_{mode}")]
        if modes not in (["mean_tokens"], ["cls_token"]):
            raise ConfigurationError(f"{model_path}: pooling {modes}; the ONNX export knows mean or CLS pooling")
        if not (model_path / "tokenizer.json").exists():
            raise ConfigurationError(f"{model_path} has no tokenizer.json (the ONNX runtime tokenizes with it)")
        self.pooling: str = modes[0]
        self.max_tokens = int(settings.get("max_seq_length") or 512)
        self.lower_case = bool(settings.get("do_lower_case", False))

    def fingerprint(self) -> str:
        """A name for the exports of this model: changes when a model file or the export changes."""
        seen: dict[str, Any] = {"format": EXPORT_FORMAT, "opset": OPSET,
                                "path": str(self.path.resolve())}
        for name in _MODEL_FILES:
            file = self.path / name
            if file.exists():
                stat = file.stat()
                seen[name] = (stat.st_size, stat.st_mtime_ns)
        return hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()[:20]


def onnx_model_file(model_path: Path, precision: OnnxPrecision, *, cache: Path | None = None) -> Path:
    """The exported graph of the model at ``model_path`` at ``precision``, exported into ``cache``
    (``None``: :func:`cache_dir`) first when it is not there yet.

    Raises:
        ConfigurationError: if the model is of a shape the export does not know, the export needs
            a package that is missing (torch, transformers, onnx), the cache cannot be written, or
            the exported graph disagrees with sentence-transformers on :data:`PROBE_TEXTS`.
    """
    layout = _Layout(model_path)
    folder = (cache or cache_dir()) / f"{model_path.resolve().parent.name}-{model_path.name}-{layout.fingerprint()}"
    target = folder / f"model-{precision}.onnx"
    if target.exists():
        return target
    from filelock import FileLock

    try:
        folder.mkdir(parents=True, exist_ok=True)
        with FileLock(str(folder / "export.lock"), timeout=600):
            if not target.exists():
                export_onnx(model_path, target, precision=precision)
    except OSError as exc:
        raise ConfigurationError(f"cannot write the ONNX export to {folder}: {exc} (set AGENT_MEMORY_CACHE to a "
                                 "writable directory)") from exc
    return target


def export_onnx(model_path: Path, target: Path, *, precision: OnnxPrecision) -> None:
    """Export the sentence-transformers model at ``model_path`` to the ONNX graph ``target`` (token
    ids and attention mask in, unit vectors out), quantized to int8 with ``precision="int8"``, and
    check it on :data:`PROBE_TEXTS` before it appears (atomically) at ``target``.

    Raises:
        ConfigurationError: as :func:`onnx_model_file`.
    """
    layout = _Layout(model_path)
    try:
        with HEAVY_IMPORTS:
            import onnx  # noqa: F401 - torch's exporter writes the graph with it
            import torch
            from transformers import AutoModel
    except ModuleNotFoundError as exc:
        raise ConfigurationError(f"the ONNX export needs {exc.name} (pip install onnx torch transformers)") from exc
    partial = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.partial")
    exported = partial.with_suffix(".float32")
    try:
        with _quiet():
            model = AutoModel.from_pretrained(str(model_path), local_files_only=True).eval()
            graph = _SentenceGraph(model, layout.pooling)
            ids = torch.ones((2, 8), dtype=torch.long)
            mask = torch.ones_like(ids)
            mask[1, 5:] = 0  # a padded row: the traced graph must keep the mask's logic
            axes = {"input_ids": {0: "batch", 1: "tokens"}, "attention_mask": {0: "batch", 1: "tokens"},
                    "sentence_embedding": {0: "batch"}}
            with torch.no_grad():
                torch.onnx.export(graph, (ids, mask), str(exported), dynamo=False, opset_version=OPSET,
                                  input_names=["input_ids", "attention_mask"], output_names=["sentence_embedding"],
                                  dynamic_axes=axes)
            if precision == "int8":
                with HEAVY_IMPORTS:
                    from onnxruntime.quantization import QuantType, quantize_dynamic

                quantize_dynamic(str(exported), str(partial), weight_type=QuantType.QInt8, per_channel=True,
                                 extra_options={"MatMulConstBOnly": True})
            else:
                exported.replace(partial)
            _check(partial, layout, precision)
            partial.replace(target)
    except ConfigurationError:
        raise
    except Exception as exc:  # noqa: BLE001 - torch's exporter and onnxruntime raise many types
        raise ConfigurationError(f"the ONNX export of {model_path} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        for leftover in (exported, partial):
            leftover.unlink(missing_ok=True)


@contextmanager
def _quiet() -> Iterator[None]:
    """Keep the export's chatter off the caller's stderr: torch's tracer warnings, transformers'
    progress bars, and onnxruntime's quantizer, which logs through the root logger (and, as
    ``logging.warning`` does, would give a process without logging configured a stderr handler)."""
    with HEAVY_IMPORTS:
        from transformers.utils import logging as transformers_logging

    root = logging.getLogger()
    silent = logging.NullHandler()
    added = not root.handlers
    if added:
        root.addHandler(silent)

    def drop_onnxruntime(record: logging.LogRecord) -> bool:
        return "onnxruntime" not in record.pathname

    root.addFilter(drop_onnxruntime)
    shown = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        if shown:
            transformers_logging.enable_progress_bar()
        root.removeFilter(drop_onnxruntime)
        if added:
            root.removeHandler(silent)


def _check(graph_file: Path, layout: _Layout, precision: OnnxPrecision) -> None:
    """Raise :class:`ConfigurationError` unless the graph's vectors of :data:`PROBE_TEXTS` agree
    with sentence-transformers' (:data:`MIN_PROBE_COSINE`)."""
    with HEAVY_IMPORTS:
        import numpy as np
        from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(layout.path), device="cpu", local_files_only=True).encode(
        list(PROBE_TEXTS), normalize_embeddings=True, show_progress_bar=False, convert_to_numpy=True)
    runner = OnnxSentenceModel(layout.path, graph_file, workers=1)
    found = runner.encode(list(PROBE_TEXTS))
    cosines = np.sum(found * reference, axis=1)
    if float(cosines.min()) < MIN_PROBE_COSINE[precision]:
        raise ConfigurationError(f"the {precision} ONNX export of {layout.path} disagrees with the model (cosine "
                                 f"{float(cosines.min()):.4f} < {MIN_PROBE_COSINE[precision]} on a probe text)")


class _SentenceGraph:
    """What is exported: the transformer, then the model's pooling over the attention mask, then
    L2 normalisation (built lazily: torch is imported only by an export)."""

    def __new__(cls, model: Any, pooling: str) -> Any:
        with HEAVY_IMPORTS:
            import torch

        class SentenceGraph(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, input_ids: Any, attention_mask: Any) -> Any:
                tokens = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                    token_type_ids=torch.zeros_like(input_ids)).last_hidden_state
                if pooling == "cls_token":
                    pooled = tokens[:, 0]
                else:
                    mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
                    pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

        return SentenceGraph()


class OnnxSentenceModel:
    """An exported graph with its tokenizer: texts in, unit vectors out, each text alone.

    Args:
        model_path: the sentence-transformers directory (its ``tokenizer.json`` and settings).
        graph_file: the exported graph (:func:`onnx_model_file`).
        workers: threads that run texts at once (each with one onnxruntime thread).

    Raises:
        ConfigurationError: if onnxruntime or tokenizers is missing, or the graph cannot load.
    """

    def __init__(self, model_path: Path, graph_file: Path, *, workers: int) -> None:
        layout = _Layout(model_path)
        try:
            with HEAVY_IMPORTS:
                import onnxruntime
                from tokenizers import Tokenizer
        except ModuleNotFoundError as exc:
            raise ConfigurationError(f"the ONNX runtime needs {exc.name} (pip install onnxruntime tokenizers)") from exc
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # errors only: a warning on stderr is not for a library's caller
        try:
            self.session = onnxruntime.InferenceSession(str(graph_file), options, providers=["CPUExecutionProvider"])
            self.tokenizer = Tokenizer.from_file(str(model_path / "tokenizer.json"))
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types
            raise ConfigurationError(f"cannot load the ONNX graph {graph_file}: {exc}") from exc
        self.tokenizer.no_padding()  # tokenizer.json may pad to a fixed length: a batch of one needs none
        self.tokenizer.enable_truncation(layout.max_tokens)
        self.lower_case = layout.lower_case
        self.workers = max(1, workers)
        self._pool: tuple[int, ThreadPoolExecutor] | None = None
        """The worker threads and the process that started them (a forked child has none of them)."""
        self._pool_lock = threading.Lock()

    def _run(self, ids: Sequence[int]) -> npt.NDArray[np.float32]:
        with HEAVY_IMPORTS:
            import numpy as np

        tokens = np.asarray([ids], dtype=np.int64)
        vector: npt.NDArray[np.float32] = self.session.run(
            None, {"input_ids": tokens, "attention_mask": np.ones_like(tokens)})[0][0]
        return vector

    def encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Unit vectors of ``texts``: a float32 array of shape ``(len(texts), dimensions)``.

        Raises:
            EmbeddingError: if onnxruntime fails on a text.
        """
        with HEAVY_IMPORTS:
            import numpy as np

        if self.lower_case:
            texts = [text.lower() for text in texts]
        try:
            encoded = [encoding.ids for encoding in self.tokenizer.encode_batch(texts)]
            if self.workers == 1 or len(encoded) == 1:
                vectors = [self._run(ids) for ids in encoded]
            else:
                vectors = list(self._executor().map(self._run, encoded))
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types
            raise EmbeddingError(f"embedding failed: {exc}") from exc
        if not vectors:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack(vectors).astype(np.float32, copy=False)

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None or self._pool[0] != os.getpid():
                pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="agent-memory-embed")
                self._pool = (os.getpid(), pool)
            return self._pool[1]
