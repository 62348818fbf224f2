"""The trace store: one conformance suite over every backend, then what only files do (layout,
crash order, other processes, damage), and a real ``kill -9`` in the middle of archiving.

A crash between the two steps of ``archive_turns`` is simulated deterministically (the active
file's rewrite fails, or is never reached) and also produced for real: a child process archives
in a loop and is killed with SIGKILL at random moments, many times.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kills import kill_after

from agent_memory import InvalidArgumentError, ItemNotFoundError, StoreError
from agent_memory.errors import InvalidIdError
from agent_memory.kernel.turns import TurnTracker
from agent_memory.models.traces import RAW_TRACE_ADAPTER, EpisodicItem, RawTraceItem, SemanticItem
from agent_memory.storage.files import jsonl as jsonl_module
from agent_memory.storage import common, open_backend
from agent_memory.storage.traces import TraceStore
from memory_helpers import file_traces, trace_file
from agent_memory.storage import FileBackend

EVENTS = {"user": "LLMUserMessageReadyEvent", "assistant": "LLMCompleteResponseReceivedEvent"}


def trace(turn: str, seq: int, kind: str = "user", text: str = "", **kw: object) -> RawTraceItem:
    if kind in ("tool_call", "tool_result"):
        kw.setdefault("tool_call_id", f"call_{turn}_{seq}")
        kw.setdefault("tool_name", "search")
    event = EVENTS.get(kind, "PendingToolInvocationEvent" if kind == "tool_call" else "ToolResultEvent")
    kw.setdefault("ts", 1_738_100_000.0 + int(turn[5:]) * 10 + seq)  # deterministic: equal when rebuilt
    content = text or f"{kind} {turn}.{seq}"
    return RawTraceItem(turn_id=turn, seq=seq, trace_type=kind, content=content, source_event=event, **kw)


def turn(n: int) -> list[RawTraceItem]:
    """A whole turn: user, tool call, tool result, answer."""
    tid = f"turn_{n:04d}"
    return [
        trace(tid, 1),
        trace(tid, 2, "tool_call"),
        trace(tid, 3, "tool_result", tool_result="ok"),
        trace(tid, 4, "assistant"),
    ]


def keys(items: list[RawTraceItem]) -> list[tuple[str, int]]:
    return [(item.turn_id, item.seq) for item in items]


@pytest.fixture(params=["file", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> TraceStore:
    if request.param == "file":
        return file_traces(tmp_path / "memory" / "agents" / "a1")
    return common.traces(open_backend(f"memory://traces-{request.node.name}"), "a1")  # on memory:// logs


# -- conformance: every backend ---------------------------------------------------------------


def test_raw_traces_list_in_turn_then_seq_order_with_late_results_in_their_turn(store: TraceStore) -> None:
    store.add_raw(turn(1)[:2])
    store.add_raw([trace("turn_0002", 1)])
    store.add_raw([trace("turn_0001", 3, "tool_result", tool_call_id="call_turn_0001_2")])  # arrives late
    assert keys(store.list_raw()) == [("turn_0001", 1), ("turn_0001", 2), ("turn_0001", 3), ("turn_0002", 1)]
    assert keys(store.list_raw(["turn_0002"])) == [("turn_0002", 1)]
    assert store.list_raw([]) == []
    assert store.active_turn_ids() == ["turn_0001", "turn_0002"]


def test_adding_a_trace_again_is_a_no_op_and_a_clashing_id_is_refused(store: TraceStore) -> None:
    first = turn(1)
    assert store.add_raw(first) == first
    assert store.add_raw(first) == []  # a retried ingest
    clash = trace("turn_0001", 2, text="something else")
    with pytest.raises(InvalidArgumentError, match="already stored"):
        store.add_raw([trace("turn_0002", 1), clash])
    assert keys(store.list_raw()) == keys(first)  # the batch was refused whole
    store.archive_turns(["turn_0001"])
    with pytest.raises(InvalidArgumentError, match="already stored"):
        store.add_raw([clash])  # ids of archived traces are taken too


def test_archiving_moves_whole_turns_and_keeps_them_findable(store: TraceStore) -> None:
    for n in range(1, 6):
        store.add_raw(turn(n))
    assert store.archive_turns(["turn_0001", "turn_0002"]) == 8
    assert store.active_turn_ids() == ["turn_0003", "turn_0004", "turn_0005"]
    assert keys(store.read_archive()) == keys(turn(1) + turn(2))
    assert store.turn_ids() == [f"turn_{n:04d}" for n in range(1, 6)]
    assert store.find_turn("turn_0002") == turn(2)  # verbatim, from the archive
    assert store.find_turn("turn_0004") == turn(4)  # from the active file
    assert store.find_turn("turn_0099") == []
    assert store.archive_turns(["turn_0001", "turn_0099"]) == 0  # nothing left to move
    assert keys(store.read_archive(["turn_0002"])) == keys(turn(2))


def test_a_late_result_of_an_archived_turn_is_found_with_its_turn(store: TraceStore) -> None:
    store.add_raw(turn(1)[:2])
    store.archive_turns(["turn_0001"])
    late = trace("turn_0001", 3, "tool_result", tool_call_id="call_turn_0001_2", tool_result="late")
    store.add_raw([late])
    assert store.find_turn("turn_0001") == [*turn(1)[:2], late]
    assert store.turn_ids() == ["turn_0001"]
    assert store.archive_turns(["turn_0001"]) == 1
    assert store.list_raw() == [] and store.read_archive() == store.find_turn("turn_0001")


def test_an_episode_is_stored_once_per_window(store: TraceStore) -> None:
    first = EpisodicItem(turn_ids=("turn_0001", "turn_0002"), summary="first try", summarizer="extractive")
    retry = EpisodicItem(turn_ids=("turn_0002", "turn_0001"), summary="second try", summarizer="llm")
    assert store.add_episodic(first) == first
    assert store.add_episodic(retry) == first  # the retried compaction gets the stored one back
    later = EpisodicItem(turn_ids=("turn_0003",), summary="later")
    store.add_episodic(later)
    assert store.list_episodic() == [first, later]
    assert store.list_episodic(1) == [later] and store.list_episodic(0) == []
    clash = EpisodicItem(id=first.id, turn_ids=("turn_0009",), summary="x")
    with pytest.raises(InvalidArgumentError, match="already stored"):
        store.add_episodic(clash)


def test_identical_facts_are_stored_once_and_pinning_sticks(store: TraceStore) -> None:
    a = SemanticItem(fact="The user prefers pnpm.", confidence=0.8)
    b = SemanticItem(fact="Tests run with vitest.")
    assert store.add_semantic([a, b, SemanticItem(fact="the user  PREFERS pnpm.")]) == [a, b, a]
    assert store.list_semantic() == [a, b]
    pinned = store.add_semantic([SemanticItem(fact="The user prefers pnpm.", pinned=True)])[0]
    assert pinned.pinned and pinned.id == a.id and pinned.confidence == 0.8
    assert store.list_semantic(pinned=True) == [pinned]
    assert store.list_semantic(pinned=False) == [b]
    assert store.list_semantic(1) == [b]
    assert store.set_pinned(b.id).pinned
    assert store.set_pinned(a.id, False).pinned is False
    assert [f.pinned for f in store.list_semantic()] == [False, True]
    with pytest.raises(ItemNotFoundError):
        store.set_pinned("sem_nothere")


def test_the_highest_turn_number_counts_every_kind(store: TraceStore) -> None:
    assert store.highest_turn_number() == 0
    store.add_raw(turn(3))
    store.add_raw([trace("turn_10000", 1)])
    store.archive_turns(["turn_10000"])
    assert store.highest_turn_number() == 10000
    store.add_episodic(EpisodicItem(turn_ids=("turn_10001",), summary="s"))
    assert store.highest_turn_number() == 10001
    store.add_semantic([SemanticItem(fact="f", source_turn_ids=("turn_10002",))])
    assert store.highest_turn_number() == 10002
    assert store.turn_ids() == ["turn_0003", "turn_10000"]  # by number, not as text


def test_clear_empties_every_kind(store: TraceStore) -> None:
    store.add_raw(turn(1) + turn(2))
    store.archive_turns(["turn_0001"])
    store.add_episodic(EpisodicItem(turn_ids=("turn_0001",), summary="s"))
    store.add_semantic([SemanticItem(fact="f")])
    store.clear()
    assert (store.list_raw(), store.read_archive(), store.list_episodic(), store.list_semantic()) == ([], [], [], [])
    assert store.highest_turn_number() == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.list_raw("turn_0001"),
        lambda s: s.list_raw(["turn_1"]),
        lambda s: s.archive_turns(["../x"]),
        lambda s: s.find_turn("turn_00001"),
        lambda s: s.add_raw([{"turn_id": "turn_0001"}]),
        lambda s: s.add_episodic(SemanticItem(fact="f")),
        lambda s: s.add_semantic(["a fact"]),
        lambda s: s.list_episodic(-1),
        lambda s: s.list_semantic(True),
    ],
)
def test_bad_arguments_raise_invalid_argument(store: TraceStore, call: Callable[[TraceStore], object]) -> None:
    with pytest.raises(InvalidArgumentError):
        call(store)


INGEST_GUARD_TURNS = 100_000
"""Turns after which the ingesting thread gives up waiting for the archiving one (which then never
moved lines five times: the test fails); never reached while archiving works, whatever the load."""


def test_ingest_and_archive_in_two_threads_lose_and_double_nothing(store: TraceStore) -> None:
    import threading

    tracker = TurnTracker(store)
    stop = threading.Event()
    moved: list[int] = []
    errors: list[BaseException] = []
    started: list[str] = []

    def ingest() -> None:  # until the other thread has moved lines several times, however long that takes
        try:
            while sum(1 for n in moved if n) < 5 and len(started) < INGEST_GUARD_TURNS:
                tid = tracker.start_turn()
                started.append(tid)
                store.add_raw([trace(tid, tracker.next_seq(tid)), trace(tid, tracker.next_seq(tid), "assistant")])
                time.sleep(0.002)  # a real agent waits for its model between turns
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            stop.set()

    def compact() -> None:
        try:
            while not stop.is_set():
                moved.append(store.archive_turns(store.active_turn_ids()[:-2]))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=ingest), threading.Thread(target=compact)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    every = keys(store.list_raw()) + keys(store.read_archive())
    assert sorted(every, key=lambda k: (int(k[0][5:]), k[1])) == [(t, s) for t in started for s in (1, 2)]
    assert sum(1 for n in moved if n) >= 5, "the two threads never overlapped"


def test_turn_tracker_numbers_turns_and_seqs(store: TraceStore) -> None:
    tracker = TurnTracker(store)
    assert tracker.current_turn_id is None
    t1 = tracker.start_turn()
    assert t1 == "turn_0001" and tracker.current_turn_id == t1
    assert [tracker.next_seq(t1) for _ in range(2)] == [1, 2]
    t2 = tracker.start_turn()
    assert tracker.next_seq(t2) == 1
    assert tracker.next_seq(t1) == 3  # a late tool result keeps its call's turn
    assert TurnTracker(last_turn_number=9999).start_turn() == "turn_10000"


def test_turn_tracker_continues_after_a_restart_from_every_kind(store: TraceStore) -> None:
    tracker = TurnTracker(store)
    for _ in range(3):
        tid = tracker.start_turn()
        store.add_raw([trace(tid, tracker.next_seq(tid)), trace(tid, tracker.next_seq(tid), "assistant")])
    store.add_episodic(EpisodicItem(turn_ids=("turn_0001", "turn_0002"), summary="s"))
    store.archive_turns(["turn_0001", "turn_0002"])
    restarted = TurnTracker(store)
    assert restarted.current_turn_id == "turn_0003"
    assert restarted.next_seq("turn_0001") == 3  # continues after the archived turn's last seq
    assert restarted.start_turn() == "turn_0004"
    store.archive_turns(["turn_0003"])
    store.clear()
    store.add_episodic(EpisodicItem(turn_ids=("turn_0041",), summary="only the summary is left"))
    assert TurnTracker(store).start_turn() == "turn_0042"


def test_turn_tracker_is_thread_safe() -> None:
    import threading

    tracker = TurnTracker()
    seen: list[str] = []
    seqs: list[int] = []
    t0 = tracker.start_turn()

    def work() -> None:
        for _ in range(200):
            seen.append(tracker.start_turn())
            seqs.append(tracker.next_seq(t0))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(seen)) == 800 and len(set(seqs)) == 800 and max(seqs) == 800


# -- files ------------------------------------------------------------------------------------


def strict_lines(path: Path) -> list[dict]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


def test_files_sit_beside_the_agent_memory_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DIR", str(tmp_path / "mem"))
    store = common.traces(FileBackend(), "agent-7")
    store.add_raw(turn(1) + turn(2))
    store.archive_turns(["turn_0001"])
    store.add_episodic(EpisodicItem(turn_ids=("turn_0001",), summary="s"))
    store.add_semantic([SemanticItem(fact="f")])
    agent_dir = tmp_path / "mem" / "agents" / "agent-7"
    files = {p.name for p in agent_dir.iterdir() if p.suffix == ".jsonl"}
    assert files == {"raw_traces.jsonl", "raw_traces_archive.jsonl", "episodic.jsonl", "semantic.jsonl"}
    assert [line["id"] for line in strict_lines(agent_dir / "raw_traces.jsonl")] == [t.id for t in turn(2)]
    assert [line["id"] for line in strict_lines(agent_dir / "raw_traces_archive.jsonl")] == [t.id for t in turn(1)]
    with pytest.raises(InvalidIdError):
        common.traces(FileBackend(tmp_path), "../escape")


def test_a_crash_between_archive_and_rewrite_leaves_no_turn_lost_or_doubled(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agents" / "a"
    store = file_traces(agent_dir)
    for n in range(1, 5):
        store.add_raw(turn(n))
    # The crash: the archive got turn 1 and 2, the active file was never rewritten.
    store._append("archive", turn(1) + turn(2))
    fresh = file_traces(agent_dir)  # as a restarted process
    assert len(strict_lines(trace_file(agent_dir, "raw"))) == 16
    assert len(strict_lines(trace_file(agent_dir, "archive"))) == 8
    assert fresh.turn_ids() == ["turn_0001", "turn_0002", "turn_0003", "turn_0004"]
    assert fresh.find_turn("turn_0001") == turn(1)
    assert keys(fresh.read_archive()) == keys(turn(1) + turn(2))
    assert keys(fresh.list_raw()) == keys(turn(1) + turn(2) + turn(3) + turn(4))  # still active: not yet compacted
    # The next archive (of other turns) finishes the interrupted move without doubling a line.
    assert fresh.archive_turns(["turn_0003"]) == 12
    assert keys(fresh.list_raw()) == keys(turn(4))
    archived = [(line["turn_id"], line["seq"]) for line in strict_lines(trace_file(agent_dir, "archive"))]
    assert archived == keys(turn(1) + turn(2) + turn(3))


def test_a_failed_rewrite_keeps_every_line_and_the_next_archive_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_dir = tmp_path / "agents" / "a"
    store = file_traces(agent_dir)
    store.add_raw(turn(1) + turn(2))

    def broken_replace(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(jsonl_module.os, "replace", broken_replace)
    with pytest.raises(StoreError, match="No space left"):
        store.archive_turns(["turn_0001"])
    monkeypatch.undo()
    assert keys(store.list_raw()) == keys(turn(1) + turn(2))  # active intact
    assert keys(store.read_archive()) == keys(turn(1))  # archive already holds the copy
    assert store.turn_ids() == ["turn_0001", "turn_0002"]
    assert store.archive_turns(["turn_0001"]) == 4
    assert keys(store.read_archive()) == keys(turn(1)) and len(strict_lines(trace_file(agent_dir, "archive"))) == 4


def test_two_stores_on_one_directory_see_each_others_writes(tmp_path: Path) -> None:
    one, two = file_traces(tmp_path / "agents" / "a"), file_traces(tmp_path / "agents" / "a")
    one.add_raw(turn(1))
    assert two.list_raw() == turn(1)
    two.add_raw(turn(2))
    two.archive_turns(["turn_0001"])  # a rewrite: a new file
    assert keys(one.list_raw()) == keys(turn(2))
    assert one.add_raw(turn(2)) == []  # ids written by the other are known
    one.add_raw(turn(3))
    assert keys(two.list_raw()) == keys(turn(2) + turn(3))


def test_a_file_rewritten_in_place_is_read_again(tmp_path: Path) -> None:
    """Same inode, other bytes (an editor, or an inode number reused by a later rewrite)."""
    one, two = file_traces(tmp_path / "agents" / "a"), file_traces(tmp_path / "agents" / "a")
    one.add_raw(turn(1) + turn(2))
    assert len(two.list_raw()) == 8
    raw = trace_file(tmp_path / "agents" / "a", "raw")
    lines = raw.read_bytes().splitlines(keepends=True)
    with open(raw, "r+b") as handle:  # drop turn 1, add turn 3: longer than before
        handle.truncate(0)
        turn_3 = b"".join(RAW_TRACE_ADAPTER.dump_json(t) + b"\n" for t in turn(3))
        handle.write(b"".join(lines[4:]) + turn_3 + b"\n" * 200)
    assert keys(two.list_raw()) == keys(turn(2) + turn(3))


def test_a_corrupt_line_is_quarantined_and_the_rest_stays_readable(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agents" / "a"
    store = file_traces(agent_dir)
    store.add_raw(turn(1))
    raw = trace_file(agent_dir, "raw")
    with open(raw, "ab") as handle:
        handle.write(b'{"id":"rt_0002_0001","turn_id":"turn_2"}\n')  # complete, but not a trace
    store.add_raw(turn(2))
    assert keys(store.list_raw()) == keys(turn(1) + turn(2))
    assert [line["line_no"] for line in strict_lines(Path(f"{raw}.corrupt"))] == [5]  # moved out of the way
    assert len(strict_lines(raw)) == 8


def test_a_torn_last_line_is_skipped_then_repaired(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agents" / "a"
    store = file_traces(agent_dir)
    store.add_raw(turn(1))
    with open(trace_file(agent_dir, "raw"), "ab") as handle:
        handle.write(b'{"id":"rt_0002_0001","ts":1.0,"turn_')  # a writer killed mid-line
    fresh = file_traces(agent_dir)
    assert keys(fresh.list_raw()) == keys(turn(1))
    fresh.add_raw(turn(2))
    assert keys(fresh.list_raw()) == keys(turn(1) + turn(2))
    assert len(strict_lines(trace_file(agent_dir, "raw"))) == 8


# -- a real kill -9 in the middle of archiving --------------------------------------------------

CHILD = r"""
import sys
from agent_memory.kernel.turns import TurnTracker
from agent_memory.models.traces import EpisodicItem, RawTraceItem
from pathlib import Path
from agent_memory.storage import FileBackend, common
agent_dir = Path(sys.argv[1])
store = common.traces(FileBackend(agent_dir.parent.parent), agent_dir.name)
tracker = TurnTracker(store)
TAIL = 2
print("ready", flush=True)
for _ in range(int(sys.argv[2])):
    tid = tracker.start_turn()
    items = []
    for kind, event in (("user", "U"), ("tool_call", "C"), ("tool_result", "R"), ("assistant", "A")):
        extra = {"tool_call_id": "c" + tid, "tool_name": "t"} if kind.startswith("tool") else {}
        items.append(RawTraceItem(turn_id=tid, seq=tracker.next_seq(tid), trace_type=kind, content=kind + " of " + tid,
                                  source_event=event, **extra))
    store.add_raw(items[:2])
    store.add_raw(items[2:])
    print("wrote", tid, len(items), flush=True)
    active = store.active_turn_ids()
    window = active[:-TAIL]
    if window:  # the compactor's order: the summary first, then the move
        store.add_episodic(EpisodicItem(turn_ids=tuple(window), summary="turns " + ",".join(window)))
        store.archive_turns(window)
print("done", flush=True)
"""

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
KILL_TRIALS = 30
TURNS_BEFORE_KILL = (2, 5)
"""A child is killed once it has written this many turns (seeded, inclusive)."""


def check_invariants(directory: Path, written: dict[str, int]) -> bool:
    """No line lost or doubled; returns whether the kill left a move half done."""
    store = file_traces(directory)
    active, archive = store.list_raw(), store.read_archive()
    assert len(set(keys(active))) == len(active) and len(set(keys(archive))) == len(archive)
    raw_path = trace_file(directory, "raw")
    raw_active = strict_lines(raw_path) if raw_path.exists() else []
    half_done = bool({(l["turn_id"], l["seq"]) for l in raw_active} & set(keys(archive)))
    turns = store.turn_ids()
    assert len(turns) == len(set(turns))
    for tid, count in written.items():
        assert [item.seq for item in store.find_turn(tid)] == list(range(1, count + 1)), tid
    assert set(written) <= set(turns)
    windows = [episode.window_id for episode in store.list_episodic()]
    assert len(windows) == len(set(windows)), "a summary was written twice"
    summarised = {tid for episode in store.list_episodic() for tid in episode.turn_ids}
    archived_only = {item.turn_id for item in archive} - {item.turn_id for item in active}
    assert archived_only <= summarised, "a turn left the active file without a summary"
    return half_done


def test_kill_9_in_the_middle_of_archiving_loses_and_doubles_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "agents" / "a"
    written: dict[str, int] = {}
    rng = random.Random(7)
    half_done = 0
    for _ in range(KILL_TRIALS):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(directory), "100000"], env=ENV, stdout=subprocess.PIPE, text=True
        )
        # killed once it has written a seeded number of turns, wherever it is then (writing or moving)
        read = kill_after(child, rng.randint(*TURNS_BEFORE_KILL), lambda line: line.startswith("wrote "))
        out, _ = child.communicate(timeout=30)
        assert child.returncode == -signal.SIGKILL
        for line in [*read, *out.splitlines()]:
            if line.startswith("wrote "):
                _, tid, count = line.split()
                assert tid not in written, f"{tid} was handed out twice"
                written[tid] = int(count)
        half_done += check_invariants(directory, written)
    # A clean run afterwards continues the numbering and finishes every interrupted move.
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(directory), "3"], env=ENV, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    new = [line.split()[1] for line in done.stdout.splitlines() if line.startswith("wrote ")]
    assert min(int(t[5:]) for t in new) > max(int(t[5:]) for t in written)
    assert check_invariants(directory, written) is False
    assert len(written) > KILL_TRIALS  # the children got work done between the kills
    print(f"{KILL_TRIALS} kills, {len(written)} turns written, {half_done} kills left a move half done")
