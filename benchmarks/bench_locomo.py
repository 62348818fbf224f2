"""LoCoMo through the trace memory kernel: is the conversation still findable after compaction?

Run from the project root::

    .venv/bin/python benchmarks/bench_locomo.py --data ../shared/data --out benchmarks/results/locomo.json

Every file matching ``locomo/*.json`` under ``--data`` is read (LoCoMo conversations: sessions of
dialogue turns ``{speaker, dia_id, text}`` with a ``session_N_date_time``, and QA items
``{question, answer, evidence: [dia_id], category}``).

For each conversation:

1. **compacted**: every dialogue turn is ingested, in order, as one user message
   ``"[<session date>] <speaker>: <text>"`` into a :class:`~agent_memory.kernel.manager.MemoryManager`
   (extractive summarizer) whose model has a small input budget (``--budget``, default 4,000
   tokens): its prompt is built and counted after every turn, and it compacts whenever it reaches
   the hard threshold. Then, for every QA item of categories 1-4, Query Memory with the question,
   restricted to compacted turns (``type="conversation_turn"``): evidence recall@5 and @10 over the
   dia_ids of the turns the hits name, where turns still in the working context (the raw tail,
   which the model sees verbatim) count as found (``search_only_recall@10`` leaves them out); and whether the gold answer string occurs in the
   compaction snapshot (the working context) plus the top 5 hits of an unrestricted query (turns,
   episodes, facts).
2. **raw**: the same turns stored as items of one AgentMemory, no compaction; the same queries
   (recall@5 and @10).

Public baselines (one document per turn, evidence recall@10 of categories 1-4; bm25s,
all-MiniLM-L6-v2 and reciprocal rank fusion (k=60)): BM25 .518, dense .484, hybrid .554 (.592 with
the session date before each turn); target ≥ 0.57 and no lower after compaction than before. The
last line printed is ``recall@10 <value>`` of the compacted run.
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from agent_memory import AgentMemory, MemoryConfig  # noqa: E402
from agent_memory.kernel.budget import ModelLimits  # noqa: E402
from agent_memory.kernel.manager import MemoryManager  # noqa: E402
from agent_memory.observers import Compacted, NoticeRecorder, Truncated  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "locomo.json"
DEFAULT_BUDGET = 4_000
"""Input budget of the compacted run, in tokens (a LoCoMo conversation is ~20k tokens of turns)."""
CATEGORIES = (1, 2, 3, 4)
"""QA categories evaluated (5, adversarial, is usually excluded; the public baselines above left it
out too)."""
QUERY_LIMIT = 10
DIA_ID = re.compile(r"D:?(\d+):(\d+)")
SYSTEM = "You are a companion who remembers the user's conversations."


@dataclass(frozen=True)
class Turn:
    dia_id: str
    text: str


@dataclass(frozen=True)
class QA:
    question: str
    answer: str
    evidence: tuple[str, ...]
    category: int


def normalise(dia_id: str) -> list[str]:
    """LoCoMo evidence ids as ``D<session>:<turn>`` (they come as ``D:11:26``, ``D30:05``, several in
    one string, in LoCoMo's own data)."""
    return [f"D{int(s)}:{int(t)}" for s, t in DIA_ID.findall(dia_id)]


def load(data: Path) -> list[tuple[str, list[Turn], list[QA]]]:
    conversations = []
    for path in sorted((data / "locomo").glob("*.json")):
        for sample in json.loads(path.read_text(encoding="utf-8")):
            conv = sample["conversation"]
            sessions = sorted((int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k)))
            turns = []
            for n in sessions:
                date = conv.get(f"session_{n}_date_time", "")
                for line in conv[f"session_{n}"]:
                    (dia_id,) = normalise(line["dia_id"]) or [line["dia_id"]]
                    turns.append(Turn(dia_id, f"[{date}] {line['speaker']}: {line['text']}"))
            qas = [
                QA(q["question"], str(q["answer"]), tuple(d for e in q.get("evidence", []) for d in normalise(e)), q["category"])
                for q in sample["qa"] if q.get("category") in CATEGORIES and "answer" in q
            ]
            conversations.append((sample.get("sample_id", path.stem), turns, [q for q in qas if q.evidence]))
    return conversations


def recall(found: set[str], evidence: Sequence[str]) -> float:
    return sum(e in found for e in evidence) / len(evidence)


def run_compacted(name: str, turns: list[Turn], qas: list[QA], root: Path, budget: int) -> dict[str, Any]:
    memory = AgentMemory("locomo", root / "compacted" / name, config=MemoryConfig(index_on_store=False))
    recorder = NoticeRecorder()
    manager = MemoryManager(memory, system_prompt=SYSTEM, observers=[recorder],
                            limits=ModelLimits(max_context_tokens=budget + 1_000, max_output_tokens=1_000))
    dia_of: dict[str, str] = {}
    largest = 0
    started = time.perf_counter()
    for turn in turns:
        dia_of[manager.ingest_user_message(turn.text)] = turn.dia_id
        manager.prepare_compaction()
        built = manager.build_prompt()
        tokens = manager.count_tokens(built.messages)
        largest = max(largest, tokens)
        manager.commit(built)
        manager.observe_usage(None, estimate=tokens)
    ingest_s = time.perf_counter() - started
    memory.flush_index()
    snapshot = "\n".join(m.content or "" for m in manager.build_prompt().messages)
    in_context = {dia_of[m.turn_id] for m in manager.get_working_context_messages() if m.turn_id in dia_of}
    rows = []
    for qa in qas:
        hits = memory.query(text=qa.question, type="conversation_turn", limit=QUERY_LIMIT)
        named = [dia_of[t] for hit in hits for t in hit.item.metadata.extra.get("turn_ids", []) if t in dia_of]
        top5 = memory.query(text=qa.question, limit=5)
        context = snapshot + "\n" + "\n".join(memory.get(h.item.id).content for h in top5)
        rows.append({
            "category": qa.category,
            "recall@5": recall(set(named[:5]) | in_context, qa.evidence),
            "recall@10": recall(set(named[:10]) | in_context, qa.evidence),
            "search_recall@10": recall(set(named[:10]), qa.evidence),
            "answer_in_context": qa.answer.lower() in context.lower(),
        })
    return {
        "turns": len(turns), "questions": len(qas), "compactions": len(recorder.of_type(Compacted)),
        "truncations": len(recorder.of_type(Truncated)), "largest_prompt": largest,
        "input_budget": manager.budget.input_budget, "turns_in_context": len(in_context),
        "archived_turns": len(manager.traces.turn_ids()) - len(manager.traces.active_turn_ids()),
        "ingest_s": round(ingest_s, 1), "rows": rows,
    }


def run_raw(name: str, turns: list[Turn], qas: list[QA], root: Path) -> dict[str, Any]:
    memory = AgentMemory("locomo", root / "raw" / name, config=MemoryConfig(index_on_store=False))
    ids = memory.store_many({"content": t.text, "type": "conversation_turn", "source": "conversation",
                             "extra": {"dia_id": t.dia_id}} for t in turns)
    dia_of = {item_id: turn.dia_id for item_id, turn in zip(ids, turns)}
    memory.flush_index()
    rows = []
    for qa in qas:
        named = [dia_of[hit.item.id] for hit in memory.query(text=qa.question, limit=QUERY_LIMIT)]
        rows.append({"category": qa.category, "recall@5": recall(set(named[:5]), qa.evidence),
                     "recall@10": recall(set(named[:10]), qa.evidence)})
    return {"rows": rows}


def mean(rows: list[dict[str, Any]], key: str) -> float:
    return round(sum(float(r[key]) for r in rows) / len(rows), 4) if rows else 0.0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("AGENT_MEMORY_DATA", DEFAULT_DATA)))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="input budget of the compacted run, tokens")
    args = parser.parse_args(argv)
    conversations = load(args.data)
    if not conversations:
        print(f"no locomo/*.json under {args.data}", file=sys.stderr)
        return 1
    started = time.perf_counter()
    compacted_rows: list[dict[str, Any]] = []
    raw_rows: list[dict[str, Any]] = []
    per_conversation = []
    with tempfile.TemporaryDirectory(prefix="bench-locomo-") as tmp:
        for name, turns, qas in conversations:
            compacted = run_compacted(name, turns, qas, Path(tmp), args.budget)
            raw = run_raw(name, turns, qas, Path(tmp))
            compacted_rows += compacted["rows"]
            raw_rows += raw["rows"]
            per_conversation.append({"conversation": name, **{k: v for k, v in compacted.items() if k != "rows"},
                                     "recall@10": mean(compacted["rows"], "recall@10"),
                                     "raw_recall@10": mean(raw["rows"], "recall@10")})
            print(f"{name}: {compacted['turns']} turns, {compacted['questions']} questions, "
                  f"{compacted['compactions']} compactions, recall@10 {per_conversation[-1]['recall@10']:.3f} "
                  f"(raw {per_conversation[-1]['raw_recall@10']:.3f})", flush=True)
    results = {
        "benchmark": "LoCoMo turn recall through the trace memory kernel",
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "budget": args.budget,
        "categories": list(CATEGORIES),
        "questions": len(compacted_rows),
        "compacted": {"recall@5": mean(compacted_rows, "recall@5"), "recall@10": mean(compacted_rows, "recall@10"),
                      "search_only_recall@10": mean(compacted_rows, "search_recall@10"),
                      "answer_in_snapshot_or_top5": mean(compacted_rows, "answer_in_context")},
        "raw": {"recall@5": mean(raw_rows, "recall@5"), "recall@10": mean(raw_rows, "recall@10")},
        "by_category": {
            str(c): {"compacted_recall@10": mean([r for r in compacted_rows if r["category"] == c], "recall@10"),
                     "raw_recall@10": mean([r for r in raw_rows if r["category"] == c], "recall@10")}
            for c in CATEGORIES
        },
        "conversations": per_conversation,
        "baselines": {"bm25": 0.518, "dense": 0.484, "hybrid": 0.554, "hybrid_with_dates": 0.592, "target": 0.57},
        "runtime_s": round(time.perf_counter() - started, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    c, r = results["compacted"], results["raw"]
    print(f"compacted: recall@5 {c['recall@5']:.3f}, recall@10 {c['recall@10']:.3f} (search hits alone "
          f"{c['search_only_recall@10']:.3f}), answer in snapshot+top5 "
          f"{c['answer_in_snapshot_or_top5']:.3f}; raw: recall@5 {r['recall@5']:.3f}, recall@10 {r['recall@10']:.3f}")
    print(f"recall@10 {c['recall@10']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
